"""The ``machine-config-daemon`` command: one per node, applies its rendered MachineConfig."""

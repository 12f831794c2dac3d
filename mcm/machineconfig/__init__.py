"""mcm.machineconfig: OpenShift's MachineConfigController design on ``mcm.runtime``.

The design is machine-config-operator's ``docs/MachineConfigController.md``; where it is silent,
the package follows machine-config-operator's code (``docs/machineconfig.md`` says where).

It rolls configuration out to machines pool by pool, while a daemon on each node applies it:

- :mod:`.template` — TemplateController: role templates + ControllerConfig → ``00-<role>`` …
- :mod:`.render` — RenderController: a pool's MachineConfigs → ``rendered-<pool>-<hash>``.
- :mod:`.update` — UpdateController: nodes to the pool's config, ``maxUnavailable`` at a time.
- :mod:`.kubeletconfig` — KubeletConfigController: KubeletConfig → ``99-<pool>-kubelet-managed``.

Start with :class:`~mcm.machineconfig.controller.MachineConfigController`; the API (resources,
annotations, conditions) is in :mod:`.api`. ``docs/machineconfig.md`` describes the flows, and
``mcm.testing.machineconfig`` has the simulated daemon. This package imports only ``mcm.runtime``
and ``mcm.drain`` (an import-linter contract).
"""

"""The ``machine-config-controller`` command: :mod:`.options` (flags), :mod:`.runner` (start-up,
HTTP endpoints, leader election, shutdown), :mod:`.cli` (click) and :mod:`.demo`."""

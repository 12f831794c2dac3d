"""The ``machine-controller-manager`` command: :mod:`.options` (flags), :mod:`.runner` (start-up,
HTTP endpoints, leader election, shutdown), :mod:`.cli` (click) and :mod:`.flagsdoc`
(``docs/manager-flags.md``). The MachineSet/MachineDeployment manager it runs is
:mod:`mcm.manager`."""

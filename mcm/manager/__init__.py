"""The MachineSet/MachineDeployment manager: the second half of a machine-controller-manager.

Start with :class:`Manager` (wiring, queues, ``run``) and :class:`ManagerOptions` (the settings
the ``machine-controller-manager`` command takes). The reconciles live in :mod:`.machineset`
(with :mod:`.replicas`, :mod:`.machineset_status`, :mod:`.propagation`), :mod:`.deployment`
(with :mod:`.newset`, :mod:`.scaling`, :mod:`.rolling`, :mod:`.recreate`, :mod:`.rollback`,
:mod:`.progress`, :mod:`.nodes`) and :mod:`.safety` (the overshoot freeze);
:mod:`.templates` computes upstream's ``machine-template-hash`` exactly. docs/manager.md
maps each module to the upstream v0.47.0 files it follows.
"""

from mcm.manager.manager import QUEUE_NAMES, Manager
from mcm.manager.options import ManagerOptions

__all__ = ["QUEUE_NAMES", "Manager", "ManagerOptions"]

"""The provider-side machine controller (upstream machine-controller-manager
``pkg/util/provider/machinecontroller``; docs/controller.md).

Start with :class:`Controller` (wiring, queues, ``run``) and :class:`ControllerOptions` (every
``machine-controller`` flag). The loops live in :mod:`.machine` (entry), :mod:`.creation`,
:mod:`.health`, :mod:`.nodesync`, :mod:`.deletion` (the step table; :mod:`.steps` what the
steps share), :mod:`.classes` (MachineClass and Secret finalizers) and :mod:`.node` (the HEAD
node loop). The drain step (:mod:`.nodedrain`) drains nodes with :mod:`mcm.drain`.
"""

from mcm.controller.controller import QUEUE_NAMES, Controller
from mcm.controller.options import ControllerOptions

__all__ = [
    "QUEUE_NAMES",
    "Controller",
    "ControllerOptions",
]

"""The simulated controllers (what kube-controller-manager would do), wired to one emulator's storage.

Usage by the emulator (``start_controllers(emulator)`` does exactly this)::

    controllers = Controllers(storage, clock=clock)
    controllers.start()        # ensures the default namespaces, resumes pending work, starts timers
    ...
    controllers.stop()         # stops timers and unsubscribes (the store is left as it is)

Each controller is an attribute with its switches: ``crds``, ``namespaces``, ``gc``, ``pdb``
(``mode``, ``delay``, ``enabled``), ``kubelet`` (``mode``, ``max_grace``, ``time_scale``,
``run_pods``, ``set_terminal_phase``, ``finish()``, ``finish_all()``), ``podgc`` (``delay``,
``enabled``), ``eventttl`` (``ttl``), ``attachdetach`` (``enabled``, ``detach_delay``), ``deployments``
(``delay``, ``hold()``, ``release()``).
Controllers react synchronously to every commit through the store's post-commit hook (see
:mod:`mcm.emulator.controllers.base`); timed work runs on one scheduler thread driven by
``clock``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcm.emulator.controllers.attachdetach import AttachDetach
from mcm.emulator.controllers.base import Reactor, Scheduler
from mcm.emulator.controllers.crd import CrdController
from mcm.emulator.controllers.deployment import DeploymentController
from mcm.emulator.controllers.disruption import DisruptionController
from mcm.emulator.controllers.eventttl import EventTTL
from mcm.emulator.controllers.gc import GarbageCollector
from mcm.emulator.controllers.kubelet import KubeletSimulator
from mcm.emulator.controllers.namespace import NamespaceController
from mcm.emulator.controllers.podgc import PodGC
from mcm.runtime.clock import REAL_CLOCK, Clock

if TYPE_CHECKING:
    from mcm.emulator.storage import Storage

__all__ = ["Controllers", "start_controllers"]


class Controllers:
    """All simulated controllers of one emulator (one cluster)."""

    def __init__(self, storage: Storage, *, clock: Clock = REAL_CLOCK) -> None:
        self.storage = storage
        self.clock = clock
        self.reactor = Reactor(storage)
        self.scheduler = Scheduler(clock)
        self.crds = CrdController(self.reactor)
        self.namespaces = NamespaceController(self.reactor)
        self.gc = GarbageCollector(self.reactor)
        self.pdb = DisruptionController(self.reactor, self.scheduler, clock)
        self.kubelet = KubeletSimulator(self.reactor, self.scheduler, clock)
        self.podgc = PodGC(self.reactor, self.scheduler)
        self.eventttl = EventTTL(self.reactor, self.scheduler)
        self.attachdetach = AttachDetach(self.reactor, self.scheduler)
        self.deployments = DeploymentController(self.reactor, self.scheduler, clock)
        self._started = False

    def start(self) -> None:
        """Subscribe to commits, catch up with the stored state and start the timer thread."""
        if self._started:
            return
        self._started = True
        self.reactor.start()
        self.crds.start()
        self.namespaces.start()
        self.pdb.start()
        self.kubelet.start()
        self.podgc.start()
        self.deployments.start()
        self.scheduler.start()

    def stop(self) -> None:
        """Stop timers and reactions; stored objects are left untouched."""
        if not self._started:
            return
        self._started = False
        self.scheduler.stop()
        self.reactor.stop()


def start_controllers(emulator: Any) -> Controllers:
    """Build and start the controllers of an ``Emulator`` (uses its ``storage`` and ``clock``)."""
    controllers = Controllers(emulator.storage, clock=getattr(emulator, "clock", None) or REAL_CLOCK)
    controllers.start()
    return controllers

"""What every reconciler needs, gathered once by the controller (clients, listers, driver, clock).

:class:`Deps` is built by :class:`~mcm.controller.Controller`; tests build it directly with the
same pieces (FakeDriver, FakeClock, an emulator's clients). Reconcilers read objects from the
listers (informer caches, never mutated) and write through the REST clients.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mcm.controller.drainer import Drainer
from mcm.controller.drivercalls import DriverCaller
from mcm.controller.metrics import ControllerMetrics
from mcm.controller.options import ControllerOptions
from mcm.controller.permits import PermitGiver
from mcm.driver import Driver
from mcm.runtime.cache.listers import Lister, NamespaceLister
from mcm.runtime.cache.store import Indexer
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import Clock
from mcm.runtime.record import EventRecorder

__all__ = ["CREATING", "DELETING", "ORPHAN_CHECK", "CreationTracker", "Deps", "Listers", "Writers"]


@dataclass(frozen=True)
class Listers:
    """Informer caches: control-side ones restricted to the controller namespace."""

    machines: NamespaceLister
    classes: NamespaceLister
    secrets: NamespaceLister
    nodes: Lister | None
    volume_attachments: Lister | None
    machine_indexer: Indexer | None = None
    """The Machine informer's indexer with :data:`~mcm.controller.indexes.MACHINE_INDEXERS`
    (``None``: lookups scan ``machines``)."""


@dataclass(frozen=True)
class Writers:
    """REST clients for the objects the controller writes (target ones ``None`` without target)."""

    machines: RESTClient
    classes: RESTClient
    secrets: RESTClient
    nodes: RESTClient | None
    target_secrets: RESTClient | None
    volume_attachments: RESTClient | None


CREATING = "creation"
DELETING = "deletion"
ORPHAN_CHECK = "orphan check"


class CreationTracker:
    """Which flow may touch a Machine (``ns/name``) now: the creation flow, the deletion flow or
    the orphan-VM check, never two at once (HEAD's "in creation" set, made exclusive both ways).

    Guarantees:

    - One holder per key. :meth:`creating`, :meth:`deleting` and :meth:`hold_off` yield ``True``
      to the one that gets the key and ``False``, at once, to the others: nobody waits for
      another flow's driver or API calls (no lock is held across one); a refused flow returns a
      retry and its key comes back through the queue.
    - A key is "in creation" (``key in tracker``) while the creation flow holds it and while a
      ``CreateMachine`` abandoned at its deadline still runs (:meth:`abandoned`): until the
      driver really returns, no second creation flow, no deletion flow and no orphan check of
      that Machine can start.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[str, str] = {}
        self._abandoned: Counter[str] = Counter()

    def _take(self, key: str, kind: str) -> bool:
        with self._lock:
            if key in self._holders or self._abandoned[key] > 0:
                return False
            self._holders[key] = kind
            return True

    @contextmanager
    def _holding(self, key: str, kind: str) -> Iterator[bool]:
        taken = self._take(key, kind)
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    self._holders.pop(key, None)

    def creating(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """Hold ``key`` for the creation flow; ``False`` when another flow has it."""
        return self._holding(key, CREATING)

    def deleting(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """Hold ``key`` for one pass of the deletion flow; ``False`` when another flow has it."""
        return self._holding(key, DELETING)

    def hold_off(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """Hold ``key`` while the orphan-VM loop confirms and deletes its VM; ``False`` if taken."""
        return self._holding(key, ORPHAN_CHECK)

    def abandoned(self, key: str) -> Callable[[], None]:
        """Keep ``key`` in creation until the returned function is called (once is enough): the
        driver call that was given up at its deadline has really returned."""
        with self._lock:
            self._abandoned[key] += 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if released.is_set():
                    return
                released.set()
                self._abandoned[key] -= 1
                if self._abandoned[key] <= 0:
                    del self._abandoned[key]

        return release

    def holder(self, key: str) -> str | None:
        """Who holds ``key`` (:data:`CREATING` also for an abandoned create still running)."""
        with self._lock:
            if key in self._holders:
                return self._holders[key]
            return CREATING if self._abandoned[key] > 0 else None

    def __contains__(self, key: object) -> bool:
        """``key`` is in creation (see the class docstring)."""
        return isinstance(key, str) and self.holder(key) == CREATING


@dataclass
class Deps:
    """Everything a reconcile may touch."""

    namespace: str
    listers: Listers
    writers: Writers
    driver: Driver
    calls: DriverCaller
    options: ControllerOptions
    clock: Clock
    metrics: ControllerMetrics
    permits: PermitGiver
    drainer: Drainer | None
    recorder: EventRecorder | None = None
    enqueue_class: Callable[[str], None] = lambda key: None
    enqueue_machine: Callable[[str, float], None] = lambda key, after: None
    enqueue_termination: Callable[[str, float], None] = lambda key, after: None
    frozen: Callable[[], bool] = lambda: False
    creation: CreationTracker = field(default_factory=CreationTracker)
    seen_class_versions: dict[str, str] = field(default_factory=dict)
    """MachineClass name → resourceVersion whose machines were last enqueued (class loop)."""
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def has_target(self) -> bool:
        return self.listers.nodes is not None and self.writers.nodes is not None

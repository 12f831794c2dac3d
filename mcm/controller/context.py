"""What every reconciler needs, gathered once by the controller (clients, listers, driver, clock).

:class:`Deps` is built by :class:`~mcm.controller.Controller`; tests build it directly with the
same pieces (FakeDriver, FakeClock, an emulator's clients). Reconcilers read objects from the
listers (informer caches, never mutated) and write through the REST clients.
"""

from __future__ import annotations

import threading
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

__all__ = ["CreationTracker", "Deps", "Listers", "Writers"]


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


class CreationTracker:
    """Machines (``ns/name``) currently inside the creation flow (HEAD mutual exclusion).

    :meth:`hold_off` lets the orphan-VM loop keep creation flows of one machine from starting
    while it confirms and deletes that machine's orphan VM.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._keys: set[str] = set()
        self._held: set[str] = set()

    @contextmanager
    def creating(self, key: str) -> Iterator[None]:
        with self._cond:
            while key in self._held:
                self._cond.wait()
            self._keys.add(key)
        try:
            yield
        finally:
            with self._cond:
                self._keys.discard(key)
                self._cond.notify_all()

    @contextmanager
    def hold_off(self, key: str) -> Iterator[bool]:
        """Yield ``True`` and keep creation flows of ``key`` waiting, or ``False`` if one runs."""
        with self._cond:
            while key in self._held:
                self._cond.wait()
            if key in self._keys:
                clear = False
            else:
                clear = True
                self._held.add(key)
        try:
            yield clear
        finally:
            if clear:
                with self._cond:
                    self._held.discard(key)
                    self._cond.notify_all()

    def __contains__(self, key: object) -> bool:
        with self._cond:
            return key in self._keys


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

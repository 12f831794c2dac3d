"""What every reconcile of the manager needs, gathered once by :class:`~mcm.manager.Manager`.

Reconciles read MachineDeployments, MachineSets, Machines and Nodes from informer caches
(:class:`CachedObjects`: never mutated; for the first three, the newer of the informer's copy
and the answer to this manager's own last write, so a write never starts from a copy the
previous write made stale) and write through the REST clients of :class:`Clients`. Tests build
:class:`Deps` directly over in-memory fakes.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from mcm.manager import constants as k
from mcm.manager.expectations import Expectations
from mcm.manager.options import ManagerOptions
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_not_found
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import Clock
from mcm.runtime.record import EventRecorder

__all__ = ["CONTROLLER_UID_INDEX", "ORPHAN", "CachedObjects", "Clients", "Deps", "ObjectSource"]

log = structlog.get_logger(__name__)

CONTROLLER_UID_INDEX = "mcm.gardener.cloud/controller-uid"
"""Machine and MachineSet index: the UID of the object's controller, or :data:`ORPHAN`."""
ORPHAN = "<orphan>"


class ObjectSource(Protocol):
    """Where :class:`CachedObjects` reads from (an informer cache, possibly behind a mutation cache)."""

    def get(self, key: str) -> Mapping[str, Any] | None: ...

    def list(self) -> builtins.list[Mapping[str, Any]]: ...

    def by_index(self, index: str, value: str) -> builtins.list[Mapping[str, Any]]: ...


@dataclass(frozen=True)
class CachedObjects:
    """One resource's cached objects in the manager's namespace (read-only views)."""

    source: ObjectSource
    namespace: str

    def get(self, name: str) -> Mapping[str, Any] | None:
        """The object, or ``None`` when the cache does not hold it."""
        return self.source.get(f"{self.namespace}/{name}" if self.namespace else name)

    def list(self) -> builtins.list[Mapping[str, Any]]:
        return self.source.list()

    def controlled_by(self, uid: str) -> builtins.list[Mapping[str, Any]]:
        """Objects whose controller reference carries ``uid``."""
        return self.source.by_index(CONTROLLER_UID_INDEX, uid) if uid else []

    def orphans(self) -> builtins.list[Mapping[str, Any]]:
        """Objects without a controller reference."""
        return self.source.by_index(CONTROLLER_UID_INDEX, ORPHAN)


@dataclass(frozen=True)
class Clients:
    """REST clients; ``nodes`` is ``None`` without a target cluster."""

    machines: RESTClient
    machine_sets: RESTClient
    machine_deployments: RESTClient
    nodes: RESTClient | None


Enqueue = Callable[[str, str, float], None]
"""``enqueue(queue_name, key, after_seconds)``."""


def _record(
    recorder: EventRecorder | None,
    obj: Mapping[str, Any],
    kind: str,
    *,
    event_type: str,
    reason: str,
    message: str,
) -> None:
    if event_type == k.EVENT_WARNING:
        log.warning("event", object=o.name_of(obj), kind=kind, reason=reason, message=message)
    if recorder is None:
        return
    reference = {"apiVersion": k.API_VERSION, "kind": kind, "metadata": dict(o.meta(obj))}
    recorder.event(reference, event_type, reason, message)


@dataclass
class Deps:
    """Everything a reconcile of the manager may touch."""

    options: ManagerOptions
    clock: Clock
    machines: CachedObjects
    machine_sets: CachedObjects
    machine_deployments: CachedObjects
    nodes: Callable[[str], Mapping[str, Any] | None] | None
    """Node lookup by name in the target cache (``None`` without a target cluster)."""
    clients: Clients
    recorder: EventRecorder | None = None
    machine_set_recorder: EventRecorder | None = None
    """Records the Events a MachineSet writes about the machines it creates and deletes; upstream
    sends them from their own component, ``machineset-controller`` (v0.47.0
    ``pkg/controller/controller.go``, ``NewController``). ``None``: ``recorder`` records them."""
    expectations: Expectations = field(default_factory=Expectations)
    enqueue: Enqueue = lambda queue, key, after: None
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def namespace(self) -> str:
        return self.options.namespace

    def event(self, obj: Mapping[str, Any], kind: str, event_type: str, reason: str, message: str) -> None:
        """Record an Event on ``obj`` (a MachineSet or MachineDeployment of ``kind``)."""
        _record(self.recorder, obj, kind, event_type=event_type, reason=reason, message=message)

    def machine_set_event(
        self, machine_set: Mapping[str, Any], event_type: str, reason: str, message: str
    ) -> None:
        """Record an Event on ``machine_set`` about a machine it created or deleted (or failed to),
        with ``machine_set_recorder`` when there is one."""
        recorder = self.machine_set_recorder or self.recorder
        _record(
            recorder, machine_set, k.KIND_MACHINE_SET, event_type=event_type, reason=reason, message=message
        )

    def node(self, name: str) -> Mapping[str, Any] | None:
        """The cached Node ``name``; ``None`` when absent, unreadable or without a target."""
        if self.nodes is None or not name:
            return None
        try:
            return self.nodes(name)
        except ApiError as err:
            if not is_not_found(err):
                log.error("node_lookup_failed", node=name, error=str(err))
            return None

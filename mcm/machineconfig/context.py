"""What the four sub-controllers share: the client, the caches, the clock, events and metrics.

:class:`CachedObjects` reads one resource from its informer cache overlaid with the answers to
this process's own writes (:class:`~mcm.runtime.cache.MutationCache`), so a sub-controller never
decides from a copy its own last write has made stale.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcm.machineconfig import api
from mcm.machineconfig.metrics import PoolMetrics
from mcm.runtime.cache import DeletedFinalStateUnknown, Lister, MutationCache, SharedInformerFactory
from mcm.runtime.client import ClusterClient, Object, Resource
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.record import EventBroadcaster, EventRecorder
from mcm.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter
from mcm.runtime.workqueue.metrics import MetricsProvider

__all__ = ["CachedObjects", "Context", "Options", "object_of", "same_content", "with_type_meta"]

MUTATION_TTL = 60.0
"""Seconds a recorded write stays in the overlay (the watch delivers it long before)."""
MUTATION_ENTRIES = 100_000
"""Room for one outstanding write per node of very large pools (client-go's default is 100)."""


@dataclass(frozen=True)
class Options:
    """Tunables of the MachineConfigController (the command's flags set them)."""

    render_delay: float = 5.0
    """Seconds the RenderController waits after a MachineConfig change before rendering, so a
    burst of changes gives one rendered config (OpenShift's ``renderDelay``)."""
    workers: int = 2
    """Workers per sub-controller queue."""
    resync: float = 0.0
    """Informer resync period in seconds (0: none)."""


class CachedObjects:
    """One cluster-scoped resource: informer cache plus this process's own writes."""

    def __init__(self, lister: Lister, clock: Clock) -> None:
        self.lister = lister
        self.mutations = MutationCache(
            lister.indexer, MUTATION_TTL, max_entries=MUTATION_ENTRIES, clock=clock
        )

    def get(self, name: str) -> Object | None:
        found: Object | None = self.mutations.get_by_key(name)
        return found

    def list(self) -> list[Object]:
        """Every cached object, each the newer of cache and own write."""
        return [self.mutations.get_by_key(key) or obj for key, obj in self._items()]

    def _items(self) -> builtins.list[tuple[str, Object]]:
        indexer = self.lister.indexer
        return [(key, obj) for key in indexer.list_keys() if (obj := indexer.get_by_key(key)) is not None]

    def record(self, obj: Object) -> Object:
        """Remember the API server's answer to a write; returns it."""
        self.mutations.mutation(obj)
        return obj


@dataclass
class Context:
    """Built once by :class:`~mcm.machineconfig.controller.MachineConfigController`."""

    client: ClusterClient
    informers: SharedInformerFactory
    broadcaster: EventBroadcaster
    options: Options = field(default_factory=Options)
    clock: Clock = REAL_CLOCK
    metrics: PoolMetrics | None = None
    queue_metrics: MetricsProvider | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    template_names: frozenset[str] = frozenset()
    """The MachineConfigs the TemplateController generates (set by it)."""
    _cached: dict[Resource, CachedObjects] = field(default_factory=dict)

    def cached(self, resource: Resource) -> CachedObjects:
        """The shared :class:`CachedObjects` of ``resource`` (registers its informer)."""
        if resource not in self._cached:
            self.informers.informer_for(resource).set_transform(with_type_meta(resource))
            self._cached[resource] = CachedObjects(self.informers.lister(resource), self.clock)
        return self._cached[resource]

    def recorder(self, component: str) -> EventRecorder:
        return self.broadcaster.new_recorder(component)

    def new_queue(self, name: str) -> RateLimitingQueue[str]:
        """A named queue with client-go's default controller rate limiter."""
        return RateLimitingQueue(
            default_controller_rate_limiter(clock=self.clock),
            name,
            clock=self.clock,
            metrics_provider=self.queue_metrics,
        )

    def synced(self, *resources: Resource) -> list[Any]:
        """The ``has_synced`` functions of the given resources' informers."""
        return [self.informers.informer_for(r).has_synced for r in resources]


def with_type_meta(resource: Resource) -> Callable[[Any], Any]:
    """An informer transform giving list items the ``kind`` and ``apiVersion`` they lack (Events
    and writes need them)."""

    def transform(obj: Any) -> Any:
        if isinstance(obj, dict) and (not obj.get("kind") or not obj.get("apiVersion")):
            return {**obj, "kind": resource.kind, "apiVersion": resource.api_version}
        return obj

    return transform


def same_content(old: Object, new: Object) -> bool:
    """Same spec and labels: an update that changes nothing a selection or a merge reads."""
    return old.get("spec") == new.get("spec") and api.labels_of(old) == api.labels_of(new)


def object_of(obj: Any) -> Object | None:
    """The object of an informer notification (unwrapping a tombstone), or ``None``."""
    if isinstance(obj, DeletedFinalStateUnknown):
        obj = obj.obj
    return obj if isinstance(obj, dict) else None

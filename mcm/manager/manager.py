"""``Manager``: the MachineSet/MachineDeployment manager's wiring (upstream v0.47.0
``pkg/controller/controller.go``, the part that is not the machine controller), built like
:class:`mcm.controller.Controller`.

Built from a control and a target :class:`~mcm.runtime.client.ClusterClient` (target ``None``:
no target cluster, so no node taints or autoscaler annotations), :class:`ManagerOptions`, a clock,
an event recorder (component ``machine-controller-manager``), optionally a second one for the
Events a MachineSet writes about its machines (upstream's component ``machineset-controller``)
and a Prometheus registry.

- Informers (``SharedInformerFactory``, resync ``min_resync_period``): Machines, MachineSets and
  MachineDeployments of ``options.namespace`` on the control cluster (Machines and MachineSets
  indexed by their controller's UID); Nodes on the target cluster. Cached objects carry no
  ``managedFields``.
- Machines, MachineSets, MachineDeployments and Nodes are read through a
  :class:`~mcm.runtime.cache.mutation_cache.MutationCache` fed by this manager's own writes (a
  roll-out taints an old Node and then annotates it in the same pass: the second write starts
  from the first one's answer, not from a cache copy it made stale).
- Three named rate-limited queues (client-go's default controller rate limiter):
  ``machineset``, ``machinedeployment``, ``machinesafetyovershooting`` (single key ``""``, added
  at construction).
- :meth:`Manager.has_synced` says whether the caches have synced (for ``/readyz``).
- :meth:`Manager.run` waits for the caches, calls ``after_sync`` if given, registers the metrics
  collectors, starts up to ``workers`` workers per queue and blocks until ``stop``; then it
  shuts every queue down with drain and joins the workers. :meth:`Manager.reconcile` runs one
  reconcile synchronously (tests and tools).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from mcm.apis.machine.resources import MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from mcm.manager.context import CONTROLLER_UID_INDEX, ORPHAN, CachedObjects, Clients, Deps
from mcm.manager.deployment import reconcile_machine_deployment
from mcm.manager.expectations import Expectations
from mcm.manager.handlers import (
    MACHINE_DEPLOYMENT_QUEUE,
    MACHINE_SET_QUEUE,
    OVERSHOOTING_QUEUE,
    EventHandlers,
)
from mcm.manager.machineset import reconcile_machine_set
from mcm.manager.metrics import ManagerMetrics
from mcm.manager.options import ManagerOptions
from mcm.manager.owners import controller_uid
from mcm.manager.safety import reconcile_overshooting
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.cache.mutation_cache import MutationCache, RecordingRESTClient
from mcm.runtime.cache.transforms import strip_managed_fields, strip_node_images
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.resources import NODES, Resource
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import DEFAULT_MAX_RETRIES, Reconciler, Result, join_workers, start_workers
from mcm.runtime.workqueue import (
    NOOP_PROVIDER,
    MetricsProvider,
    RateLimitingQueue,
    default_controller_rate_limiter,
)

__all__ = ["JOIN_TIMEOUT", "QUEUE_NAMES", "Manager"]

log = structlog.get_logger(__name__)

QUEUE_NAMES = (MACHINE_SET_QUEUE, MACHINE_DEPLOYMENT_QUEUE, OVERSHOOTING_QUEUE)
"""The named queues, in start order."""

JOIN_TIMEOUT = 60.0


def _controller_index(obj: Any) -> list[str]:
    return [controller_uid(obj) or ORPHAN] if isinstance(obj, Mapping) else []


class _MutationSource:
    """A :class:`~mcm.manager.context.ObjectSource` over an informer and a mutation cache."""

    def __init__(self, mutations: MutationCache) -> None:
        self._mutations = mutations

    def get(self, key: str) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = self._mutations.get_by_key(key)
        return found

    def list(self) -> builtins.list[Mapping[str, Any]]:
        return self._mutations.list()

    def by_index(self, index: str, value: str) -> builtins.list[Mapping[str, Any]]:
        return self._mutations.by_index(index, value)


class _NodeWriter(RecordingRESTClient):
    """Records the Nodes its writes return as the Node informer keeps them (no images)."""

    def _recorded(self, obj: Any) -> Any:
        return super()._recorded(strip_node_images(obj))


class Manager:
    """The MachineSet/MachineDeployment manager; see the module docstring."""

    def __init__(
        self,
        control: ClusterClient,
        target: ClusterClient | None,
        options: ManagerOptions | None = None,
        *,
        clock: Clock = REAL_CLOCK,
        recorder: EventRecorder | None = None,
        machine_set_recorder: EventRecorder | None = None,
        registry: CollectorRegistry | None = None,
        workqueue_metrics: MetricsProvider | None = None,
        after_sync: Callable[[], None] | None = None,
    ) -> None:
        self.options = options or ManagerOptions()
        self.clock = clock
        self._after_sync = after_sync
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = ManagerMetrics(self.registry)
        self.queues: dict[str, RateLimitingQueue[str]] = {
            name: RateLimitingQueue(
                default_controller_rate_limiter(clock=clock),
                name,
                clock=clock,
                metrics_provider=workqueue_metrics or NOOP_PROVIDER,
            )
            for name in QUEUE_NAMES
        }
        self._build_informers(control, target)
        self.deps = self._build_deps(control, target, recorder)
        self.deps.machine_set_recorder = machine_set_recorder
        self.reconcilers: dict[str, Reconciler] = {
            MACHINE_SET_QUEUE: lambda key: reconcile_machine_set(self.deps, key),
            MACHINE_DEPLOYMENT_QUEUE: lambda key: reconcile_machine_deployment(self.deps, key),
            OVERSHOOTING_QUEUE: lambda key: reconcile_overshooting(self.deps, key),
        }
        self.handlers = EventHandlers(self.deps, self.enqueue)
        self._register_handlers()
        self.queues[OVERSHOOTING_QUEUE].add("")

    # --- construction ---------------------------------------------------------------------------

    def _build_informers(self, control: ClusterClient, target: ClusterClient | None) -> None:
        resync = self.options.min_resync_period
        self.control_factory = SharedInformerFactory(
            control, self.options.namespace, resync, clock=self.clock
        )
        self.target_factory = (
            SharedInformerFactory(target, None, resync, clock=self.clock) if target is not None else None
        )
        for resource in (MACHINES, MACHINE_SETS, MACHINE_DEPLOYMENTS):
            self.control_factory.informer_for(resource).set_transform(strip_managed_fields)
        for resource in (MACHINES, MACHINE_SETS):
            self.control_factory.informer_for(resource).add_indexers(
                {CONTROLLER_UID_INDEX: _controller_index}
            )
        if self.target_factory is not None:
            self.target_factory.informer_for(NODES).set_transform(strip_node_images)

    def _cached(self, resource: Resource) -> tuple[CachedObjects, MutationCache]:
        indexer = self.control_factory.informer_for(resource).get_indexer()
        mutations = MutationCache(indexer, clock=self.clock)
        return CachedObjects(_MutationSource(mutations), self.options.namespace), mutations

    def _build_deps(
        self, control: ClusterClient, target: ClusterClient | None, recorder: EventRecorder | None
    ) -> Deps:
        machines, machine_mutations = self._cached(MACHINES)
        machine_sets, set_mutations = self._cached(MACHINE_SETS)
        deployments, deployment_mutations = self._cached(MACHINE_DEPLOYMENTS)
        node_writer: RESTClient | None = None
        nodes: Callable[[str], Mapping[str, Any] | None] | None = None
        if target is not None and self.target_factory is not None:
            node_mutations = MutationCache(
                self.target_factory.informer_for(NODES).get_indexer(), clock=self.clock
            )
            node_writer, nodes = (
                _NodeWriter(target.resource(NODES), node_mutations),
                node_mutations.get_by_key,
            )
        clients = Clients(
            machines=RecordingRESTClient(control.resource(MACHINES), machine_mutations),
            machine_sets=RecordingRESTClient(control.resource(MACHINE_SETS), set_mutations),
            machine_deployments=RecordingRESTClient(
                control.resource(MACHINE_DEPLOYMENTS), deployment_mutations
            ),
            nodes=node_writer,
        )
        return Deps(
            options=self.options,
            clock=self.clock,
            machines=machines,
            machine_sets=machine_sets,
            machine_deployments=deployments,
            nodes=nodes,
            clients=clients,
            recorder=recorder,
            expectations=Expectations(self.clock),
            enqueue=self.enqueue,
        )

    def _register_handlers(self) -> None:
        h, control = self.handlers, self.control_factory
        control.informer_for(MACHINES).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=h.machine_added, on_update=h.machine_updated, on_delete=h.machine_deleted
            )
        )
        control.informer_for(MACHINE_SETS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=h.machine_set_added, on_update=h.machine_set_updated, on_delete=h.machine_set_deleted
            )
        )
        control.informer_for(MACHINE_DEPLOYMENTS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=h.machine_deployment_added_or_deleted,
                on_update=h.machine_deployment_updated,
                on_delete=h.machine_deployment_added_or_deleted,
            )
        )

    # --- queues -----------------------------------------------------------------------------------

    def enqueue(self, queue: str, key: str, after: float) -> None:
        """Add ``key`` to the named queue now (``after`` ≤ 0) or after ``after`` seconds."""
        target = self.queues[queue]
        if after > 0:
            target.add_after(key, after)
        else:
            target.add(key)

    # --- running ----------------------------------------------------------------------------------

    def start_informers(self, stop: threading.Event) -> bool:
        """Start the informers and wait for their caches; ``False`` if ``stop`` came first."""
        factories = [f for f in (self.control_factory, self.target_factory) if f is not None]
        for factory in factories:
            factory.start(stop)
        synced = all(all(factory.wait_for_cache_sync(stop).values()) for factory in factories)
        return synced and not stop.is_set()

    def has_synced(self) -> bool:
        """Whether the Machine, MachineSet, MachineDeployment (and, with a target cluster, Node)
        caches have synced (``/readyz``)."""
        informers = [
            self.control_factory.informer_for(r) for r in (MACHINES, MACHINE_SETS, MACHINE_DEPLOYMENTS)
        ]
        if self.target_factory is not None:
            informers.append(self.target_factory.informer_for(NODES))
        return all(informer.has_synced() for informer in informers)

    def run(self, workers: int, stop: threading.Event) -> None:
        """Run until ``stop`` is set; see the module docstring."""
        self.deps.stop = stop
        groups: list[list[threading.Thread]] = []
        try:
            if not self.start_informers(stop):
                return
            if self._after_sync is not None:
                self._after_sync()
            self.metrics.register_collectors(self.deps.machine_sets.list, self.deps.machine_deployments.list)
            log.info("starting_machine_controller_manager", workers=workers)
            groups = [
                start_workers(
                    self.queues[name],
                    name,
                    workers,
                    self.reconcilers[name],
                    DEFAULT_MAX_RETRIES,
                    stop,
                    clock=self.clock,
                )
                for name in QUEUE_NAMES
            ]
            stop.wait()
        finally:
            for queue in self.queues.values():
                threading.Thread(target=queue.shut_down_with_drain, daemon=True).start()
        for threads in groups:
            join_workers(threads, JOIN_TIMEOUT)

    def reconcile(self, queue: str, key: str) -> Result | None:
        """Run one queue's reconciler for ``key`` synchronously (tests and tools)."""
        return self.reconcilers[queue](key)

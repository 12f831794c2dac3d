"""``Controller``: the machine controller's wiring (upstream v0.47.0
``pkg/util/provider/machinecontroller/controller.go``, ``NewController``, with HEAD's changes).

Built from a control and a target :class:`~mcm.runtime.client.ClusterClient` (target ``None``
= no target cluster: no node queue, no drain, machines become Available), a
:class:`~mcm.driver.Driver` (wrapped in :class:`~mcm.driver.SafeDriver`, so driver errors reach
statuses, events and logs scrubbed of secret data),
:class:`~mcm.controller.options.ControllerOptions`, a clock, an event recorder and a Prometheus
registry.

- Informers (``SharedInformerFactory``): control, restricted to ``options.namespace``:
  Machines, MachineClasses, Secrets; target: Nodes, Pods, PVs, PVCs, VolumeAttachments and
  policy/v1 PodDisruptionBudgets. Their caches hold objects without ``managedFields`` (and
  Nodes without ``status.images``), which the controller never reads.
- Machines are read through a :class:`~mcm.runtime.cache.mutation_cache.MutationCache`: a
  reconcile that runs before the informer has delivered the controller's own last write sees
  the object that write returned, so its next write does not fail with a self-inflicted 409.
  The Machine handlers let the cache drop a write's answer as soon as the informer has
  delivered it (or the Machine's deletion), so it holds only the writes the informer lags behind.
  Nodes likewise: a machine's reconcile right after its own node-template write (the Node's
  arrival enqueues the machine twice) no longer writes the template again on the stale copy.
- Seven named rate-limited queues (client-go's default controller rate limiter):
  ``secret``, ``machineclass``, ``node``, ``machine``, ``machinetermination``,
  ``machinesafetyorphanvms``, ``machinesafetyapiserver``. The safety reconcilers default to
  :class:`~mcm.controller.safety.OrphanCollector` and
  :class:`~mcm.controller.freeze.APIServerSafety` (``safety_reconcilers`` replaces them).
- The drain: with a target cluster, one :class:`mcm.drain.Drainer` over the target informers
  (its :class:`~mcm.drain.VolumeAttachmentHub` on the VolumeAttachment informer, its
  :class:`~mcm.drain.PodDeletions` on the pod informer, its pod counters ``drain_metrics`` or
  new ones on ``registry``); ``drainer`` replaces it (tests).
- :meth:`Controller.run` waits for the caches, calls ``after_sync`` if given (the command
  freezes its start-up heap there: ``mcm.app.heap``), registers the metrics collector, starts
  up to ``workers`` workers per queue (started as the work needs them) and blocks until
  ``stop``; then it shuts every queue down with drain and joins the workers, so no reconcile is
  cut in half.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import structlog
from prometheus_client import CollectorRegistry

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.controller.classes import reconcile_machine_class_key, reconcile_secret_key
from mcm.controller.context import Deps, Listers, Writers
from mcm.controller.drivercalls import DriverCaller
from mcm.controller.freeze import APIServerSafety
from mcm.controller.handlers import EventHandlers
from mcm.controller.indexes import MACHINE_INDEXERS
from mcm.controller.machine import MachineReconciler
from mcm.controller.metrics import ControllerMetrics
from mcm.controller.node import reconcile_node_key
from mcm.controller.options import ControllerOptions
from mcm.controller.permits import PermitGiver
from mcm.controller.safety import OrphanCollector
from mcm.drain import Drainer, DrainListers, DrainMetrics, PodDeletions, VolumeAttachmentHub
from mcm.driver import Driver, SafeDriver
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.cache.mutation_cache import (
    MutationCache,
    MutationClusterLister,
    MutationLister,
    RecordingRESTClient,
)
from mcm.runtime.cache.transforms import strip_managed_fields, strip_node_images
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.resources import (
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    VOLUME_ATTACHMENTS,
)
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import DEFAULT_MAX_RETRIES, Reconciler, Result, join_workers, start_workers
from mcm.runtime.workqueue import (
    NOOP_PROVIDER,
    MetricsProvider,
    RateLimitingQueue,
    default_controller_rate_limiter,
)

__all__ = ["QUEUE_NAMES", "Controller"]

log = structlog.get_logger(__name__)

QUEUE_NAMES = (
    "secret",
    "machineclass",
    "node",
    "machine",
    "machinetermination",
    "machinesafetyorphanvms",
    "machinesafetyapiserver",
)
"""The named queues, in upstream's worker start order."""

JOIN_TIMEOUT = 60.0
"""How long :meth:`Controller.run` waits for each worker after the queues were drained."""


def _build_writers(
    control: ClusterClient,
    target: ClusterClient | None,
    mutations: MutationCache,
    node_mutations: MutationCache | None,
) -> Writers:
    """API writers; a Machine's or Node's write answer goes into its mutation cache."""
    nodes = None
    if target is not None:
        nodes = target.resource(NODES)
        nodes = RecordingRESTClient(nodes, node_mutations) if node_mutations is not None else nodes
    return Writers(
        machines=RecordingRESTClient(control.resource(MACHINES), mutations),
        classes=control.resource(MACHINE_CLASSES),
        secrets=control.resource(SECRETS),
        nodes=nodes,
        target_secrets=target.resource(SECRETS) if target else None,
        volume_attachments=target.resource(VOLUME_ATTACHMENTS) if target else None,
    )


def _named_queues(clock: Clock, metrics: MetricsProvider) -> dict[str, RateLimitingQueue[str]]:
    """One rate-limited queue per name of :data:`QUEUE_NAMES` (client-go's default limiter)."""
    return {
        name: RateLimitingQueue(
            default_controller_rate_limiter(clock=clock), name, clock=clock, metrics_provider=metrics
        )
        for name in QUEUE_NAMES
    }


class Controller:
    """The provider-side machine controller; see the module docstring."""

    def __init__(
        self,
        control: ClusterClient,
        target: ClusterClient | None,
        driver: Driver,
        options: ControllerOptions | None = None,
        *,
        clock: Clock = REAL_CLOCK,
        recorder: EventRecorder | None = None,
        registry: CollectorRegistry | None = None,
        drainer: Drainer | None = None,
        drain_metrics: DrainMetrics | None = None,
        workqueue_metrics: MetricsProvider | None = None,
        safety_reconcilers: Mapping[str, Reconciler] | None = None,
        holds_lease: Callable[[], bool] | None = None,
        after_sync: Callable[[], None] | None = None,
    ) -> None:
        driver = driver if isinstance(driver, SafeDriver) else SafeDriver(driver)
        self.options = options or ControllerOptions()
        self.clock = clock
        self.frozen = False
        self._holds_lease = holds_lease
        """Asked before each VM-changing driver call (``None``: no leader election)."""
        self._after_sync = after_sync
        """Called by :meth:`run` once the caches have synced, before any worker starts."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = ControllerMetrics(self.registry, self.options.cloud_provider)
        self.queues = _named_queues(clock, workqueue_metrics or NOOP_PROVIDER)
        self.drain_stop = threading.Event()
        """Set when the controller shuts down: interrupts running drains (they are retried)."""
        self._build_informers(control, target)
        if drainer is None and target is not None:
            drainer = self._build_drainer(target, driver, recorder, drain_metrics)
        self.deps = self._build_deps(control, target, driver, recorder, drainer)
        self.machines = MachineReconciler(self.deps)
        self.orphans = OrphanCollector(self.deps, self.control_factory.informer_for(MACHINES).has_synced)
        self.apiserver_safety = APIServerSafety(self.deps, self._set_frozen)
        self.reconcilers = self._build_reconcilers(safety_reconcilers)
        self.handlers = EventHandlers(self.deps, self.enqueue, self.mutations, self.node_mutations)
        self._register_handlers()
        for name in ("machinesafetyorphanvms", "machinesafetyapiserver"):
            self.queues[name].add("")

    # --- construction ---------------------------------------------------------------------------

    def _build_reconcilers(
        self, safety_reconcilers: Mapping[str, Reconciler] | None
    ) -> dict[str, Reconciler]:
        """One reconciler per queue name; ``safety_reconcilers`` replaces the safety loops' ones."""
        reconcilers: dict[str, Reconciler] = {
            "secret": lambda key: reconcile_secret_key(self.deps, key),
            "machineclass": lambda key: reconcile_machine_class_key(self.deps, key),
            "node": lambda key: reconcile_node_key(self.deps, key),
            "machine": self.machines.reconcile_machine_key,
            "machinetermination": self.machines.reconcile_machine_termination_key,
            "machinesafetyorphanvms": self.orphans.reconcile,
            "machinesafetyapiserver": self.apiserver_safety.reconcile,
        }
        reconcilers.update(safety_reconcilers or {})
        return reconcilers

    def _build_informers(self, control: ClusterClient, target: ClusterClient | None) -> None:
        resync = self.options.min_resync_period
        self.control_factory = SharedInformerFactory(
            control, self.options.namespace, resync, clock=self.clock
        )
        self.target_factory = (
            SharedInformerFactory(target, None, resync, clock=self.clock) if target is not None else None
        )
        for resource in (MACHINES, MACHINE_CLASSES, SECRETS):
            self.control_factory.informer_for(resource).set_transform(strip_managed_fields)
        self.control_factory.informer_for(MACHINES).add_indexers(dict(MACHINE_INDEXERS))
        if self.target_factory is not None:
            for resource in (
                NODES,
                PODS,
                PERSISTENT_VOLUMES,
                PERSISTENT_VOLUME_CLAIMS,
                VOLUME_ATTACHMENTS,
                POD_DISRUPTION_BUDGETS,
            ):
                transform = strip_node_images if resource == NODES else strip_managed_fields
                self.target_factory.informer_for(resource).set_transform(transform)

    def _build_drainer(
        self,
        target: ClusterClient,
        driver: Driver,
        recorder: EventRecorder | None,
        metrics: DrainMetrics | None,
    ) -> Drainer:
        factory = self.target_factory
        assert factory is not None
        hub, pod_deletions = VolumeAttachmentHub(), PodDeletions()
        factory.informer_for(VOLUME_ATTACHMENTS).add_event_handler(hub)
        factory.informer_for(PODS).add_event_handler(pod_deletions)
        listers = DrainListers(
            pods=factory.lister(PODS),
            pdbs=factory.lister(POD_DISRUPTION_BUDGETS),
            pvs=factory.lister(PERSISTENT_VOLUMES),
            pvcs=factory.lister(PERSISTENT_VOLUME_CLAIMS),
            pods_synced=factory.informer_for(PODS).has_synced,
            pod_deletions=pod_deletions,
        )
        return Drainer(
            target,
            listers,
            driver,
            clock=self.clock,
            stop=self.drain_stop,
            hub=hub,
            recorder=recorder,
            metrics=metrics if metrics is not None else DrainMetrics(self.registry, with_duration=False),
        )

    def _build_deps(
        self,
        control: ClusterClient,
        target: ClusterClient | None,
        driver: Driver,
        recorder: EventRecorder | None,
        drainer: Drainer | None,
    ) -> Deps:
        ns = self.options.namespace
        machine_informer = self.control_factory.informer_for(MACHINES)
        mutations = self.mutations = MutationCache(machine_informer.get_indexer(), clock=self.clock)
        node_mutations = self.node_mutations = (
            MutationCache(self.target_factory.informer_for(NODES).get_indexer(), clock=self.clock)
            if self.target_factory is not None
            else None
        )
        return Deps(
            namespace=ns,
            listers=self._build_listers(mutations, node_mutations),
            writers=_build_writers(control, target, mutations, node_mutations),
            driver=driver,
            calls=DriverCaller(
                self.clock,
                self.metrics,
                self.options.driver_call_timeout,
                holds_lease=self._holds_lease,
            ),
            options=self.options,
            clock=self.clock,
            metrics=self.metrics,
            permits=PermitGiver(clock=self.clock),
            drainer=drainer if target is not None else None,
            recorder=recorder,
            enqueue_class=lambda name: self.enqueue("machineclass", f"{ns}/{name}", 0.0),
            enqueue_machine=lambda key, after: self.enqueue("machine", key, after),
            enqueue_termination=lambda key, after: self.enqueue("machinetermination", key, after),
            frozen=lambda: self.frozen,
        )

    def _build_listers(self, mutations: MutationCache, node_mutations: MutationCache | None) -> Listers:
        """Cache readers; Machines and Nodes are read through their mutation caches (our own
        last writes)."""
        ns = self.options.namespace
        target_factory = self.target_factory
        machine_informer = self.control_factory.informer_for(MACHINES)
        return Listers(
            machines=MutationLister(self.control_factory.lister(MACHINES), ns, mutations),
            classes=self.control_factory.lister(MACHINE_CLASSES).namespaced(ns),
            secrets=self.control_factory.lister(SECRETS).namespaced(ns),
            nodes=(
                MutationClusterLister(target_factory.lister(NODES), node_mutations)
                if target_factory is not None and node_mutations is not None
                else None
            ),
            volume_attachments=target_factory.lister(VOLUME_ATTACHMENTS) if target_factory else None,
            machine_indexer=machine_informer.get_indexer(),
        )

    def _register_handlers(self) -> None:
        """The handlers only read caches and enqueue, so they run inline on each informer's own
        thread (no listener thread and no hand-off per event)."""
        h = self.handlers
        control = self.control_factory
        control.informer_for(SECRETS).add_event_handler(
            ResourceEventHandlerFuncs(on_add=h.secret_event, on_delete=h.secret_event), inline=True
        )
        control.informer_for(MACHINE_CLASSES).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=h.class_added_or_deleted, on_update=h.class_updated, on_delete=h.class_added_or_deleted
            ),
            inline=True,
        )
        control.informer_for(MACHINES).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=h.machine_added, on_update=h.machine_updated, on_delete=h.machine_deleted
            ),
            inline=True,
        )
        if self.target_factory is not None:
            self.target_factory.informer_for(NODES).add_event_handler(
                ResourceEventHandlerFuncs(
                    on_add=h.node_added, on_update=h.node_updated, on_delete=h.node_deleted
                ),
                inline=True,
            )

    def _set_frozen(self, frozen: bool) -> None:
        self.frozen = frozen

    # --- queues ---------------------------------------------------------------------------------

    def enqueue(self, queue: str, key: str, after: float) -> None:
        """Add ``key`` to the named queue now (``after`` ≤ 0) or after ``after`` seconds."""
        target = self.queues[queue]
        if after > 0:
            target.add_after(key, after)
        else:
            target.add(key)

    # --- running --------------------------------------------------------------------------------

    def start_informers(self, stop: threading.Event) -> bool:
        """Start the informers and wait for their caches; ``False`` if ``stop`` came first."""
        factories = [f for f in (self.control_factory, self.target_factory) if f is not None]
        for factory in factories:
            factory.start(stop)
        synced = all(all(factory.wait_for_cache_sync(stop).values()) for factory in factories)
        return synced and not stop.is_set()

    def run(self, workers: int, stop: threading.Event) -> None:
        """Run until ``stop`` is set; see the module docstring."""
        self.deps.stop = stop
        groups: list[list[threading.Thread]] = []
        try:
            if not self.start_informers(stop):
                return
            if self._after_sync is not None:
                self._after_sync()
            self.metrics.register_collector(self.deps.listers.machines.list, lambda: self.frozen)
            log.info("starting_machine_controller", workers=workers)
            groups = self._start_workers(workers, stop)
            stop.wait()
        finally:
            self._shut_down()
        for threads in groups:
            join_workers(threads, JOIN_TIMEOUT)

    def _start_workers(self, workers: int, stop: threading.Event) -> list[list[threading.Thread]]:
        groups: list[list[threading.Thread]] = []
        for name in QUEUE_NAMES:
            if name == "node" and self.target_factory is None:
                continue
            groups.append(
                start_workers(
                    self.queues[name],
                    name,
                    workers,
                    self.reconcilers[name],
                    DEFAULT_MAX_RETRIES,
                    stop,
                    clock=self.clock,
                )
            )
        return groups

    def _shut_down(self) -> None:
        self.drain_stop.set()
        for queue in self.queues.values():
            threading.Thread(target=queue.shut_down_with_drain, daemon=True).start()
        self.deps.permits.close()

    def reconcile(self, queue: str, key: str) -> Result | None:
        """Run one queue's reconciler for ``key`` synchronously (tests and tools)."""
        reconciler: Callable[[str], Result | None] = self.reconcilers[queue]
        return reconciler(key)

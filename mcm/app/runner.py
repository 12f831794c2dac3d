"""``mcm.app.run(options, driver)``: upstream's ``app.Run`` sequence (v0.47.0
``pkg/util/provider/app/app.go``, ``Run`` and ``StartControllers``).

1. Resolve the kubeconfigs: empty target → in-cluster; ``none`` → no target cluster;
   empty control → the target's config; ``inClusterConfig`` → in-cluster.
2. One :class:`~mcm.runtime.client.ClusterClient` per cluster with ``--kube-api-qps``/``-burst``
   and upstream's user-agent suffixes.
3. The HTTP server (``/metrics``, ``/healthz``, ``/readyz``, ``/configz``) starts first, so
   standbys and a process still waiting for its clusters serve it too.
4. Discovery: the control cluster must answer ``/healthz`` and discovery, the target
   ``/version``. A failed request is retried with back-off (1 s doubling to 30 s) until it
   succeeds or a signal stops the process, each failure logged once; ``/healthz`` is ``ok``
   meanwhile and ``/readyz`` says what it waits for. Upstream gives up after 10 s and exits
   (a network blip at start-up becomes a CrashLoopBackOff); mcm never ends on one. A control
   cluster that answers but does not serve ``machine.sapcloud.io/v1alpha1 machines`` is a
   configuration error: one line, exit 1.
5. Leader election on Lease ``machine-controller`` in ``--namespace`` of the control cluster,
   identity = hostname (plus ``_<pid>`` when another machine-controller on this host already
   campaigns for the same Lease). The controller runs only while leading.
6. SIGTERM/SIGINT: workers stop within ``--shutdown-grace-period``, the lease is released, exit 0.
   A lost lease exits 1 (client-go's components exit too). ``REALLY_CRASH`` is on.

The controller is built by :func:`new_controller` only (the single place that knows its
constructor), from :func:`controller_options`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable

import structlog

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.app.clients import Clients, event_recorder
from mcm.app.clients import build_clients as _build_clients
from mcm.app.heap import freeze_start_up_heap
from mcm.app.logs import configure_logging, start_logging
from mcm.app.metrics import ProcessMetrics
from mcm.app.options import Options
from mcm.app.process import (
    ControllerProcess,
    RunnableController,
    StartupError,
    run_command_process,
    serve,
)
from mcm.app.process import leader_identity as process_identity
from mcm.app.startup import check_control_cluster, check_target_cluster, wait_for_clusters
from mcm.controller import Controller, ControllerOptions
from mcm.driver.driver import Driver
from mcm.driver.importing import import_driver_module
from mcm.runtime.client.resources import NODES, SECRETS
from mcm.runtime.leaderelection import LeaseLock
from mcm.runtime.record import EventRecorder

__all__ = [
    "LEASE_NAME",
    "Clients",
    "StartupError",
    "build_clients",
    "check_control_cluster",
    "check_target_cluster",
    "controller_options",
    "load_driver",
    "main_with_options",
    "new_controller",
    "run",
]

log = structlog.get_logger("machine-controller")

LEASE_NAME = "machine-controller"
"""The leader-election Lease (no flag changes it, as upstream)."""


def build_clients(options: Options) -> Clients:
    """Resolve the kubeconfigs and build the clients (:func:`mcm.app.clients.build_clients`)."""
    return _build_clients(options, "machine-controller")


# --- driver -------------------------------------------------------------------------------------


def load_driver(options: Options, clients: Clients | None = None) -> Driver:
    """The driver ``--driver``/``--driver-endpoint`` name; StartupError with the reason if not."""
    if options.driver_endpoint:
        return _grpc_driver(options)
    spec: str = options.driver
    if spec == "fake":
        from mcm.driver.fake import unrecorded

        return unrecorded()
    if spec == "local":
        if clients is None:
            raise StartupError("--driver=local needs the cluster clients")
        from mcm.driver.local import LocalDriver

        return LocalDriver(clients.control, target=clients.target, namespace=options.local_vm_namespace)
    if not spec:
        raise StartupError("no driver: pass --driver=local|fake|MODULE:ATTR or --driver-endpoint")
    return _import_driver(spec, options)


def _grpc_driver(options: Options) -> Driver:
    """The sidecar client: TLS (mutual with a client certificate) from the ``--driver-*`` files."""
    from mcm.driver.grpc import GrpcDriver, InsecureEndpointError, channel_credentials

    try:
        credentials = channel_credentials(
            options.driver_ca_file, options.driver_cert_file, options.driver_key_file
        )
        return GrpcDriver(
            options.driver_endpoint,
            timeout=options.driver_call_timeout or 300.0,
            credentials=credentials,
            insecure=options.driver_insecure,
            server_name=options.driver_server_name or None,
        )
    except (OSError, ValueError, InsecureEndpointError) as exc:
        raise StartupError(f"--driver-endpoint: {exc}") from None


def _import_driver(spec: str, options: Options) -> Driver:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise StartupError(f"--driver must be local, fake or MODULE:ATTR, got {spec!r}")
    try:
        module = import_driver_module(module_name)
    except Exception as exc:
        raise StartupError(f"--driver: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    target = getattr(module, attr, None)
    if target is None:
        raise StartupError(f"--driver: module {module_name!r} has no attribute {attr!r}")
    driver = target
    if not isinstance(target, Driver) and callable(target):
        try:
            driver = target()
        except Exception as exc:
            raise StartupError(f"--driver: {spec}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(driver, Driver):
        raise StartupError(f"--driver: {spec} is {type(driver).__name__}, not a mcm.driver.Driver")
    return driver


# --- controller ---------------------------------------------------------------------------------


def controller_options(options: Options) -> ControllerOptions:
    """``ControllerOptions`` from the flags (its fields are the flags' snake_case names; the
    other flags are the process's)."""
    return ControllerOptions(
        **{f.name: getattr(options, f.name) for f in dataclasses.fields(ControllerOptions)}
    )


def new_controller(
    options: Options,
    driver: Driver,
    clients: Clients,
    recorder: EventRecorder | None = None,
    metrics: ProcessMetrics | None = None,
    *,
    holds_lease: Callable[[], bool] | None = None,
    after_sync: Callable[[], None] | None = None,
) -> RunnableController:
    """Build the machine controller: the one place that knows its constructor. Its metrics go
    on ``metrics.registry`` (a fresh :class:`ProcessMetrics` when not given); ``holds_lease``
    is asked before each VM-changing driver call; ``after_sync`` runs once its caches have
    synced, before any worker starts."""
    metrics = metrics or ProcessMetrics.new()
    controller = Controller(
        clients.control,
        clients.target,
        driver,
        controller_options(options),
        recorder=recorder,
        registry=metrics.registry,
        drain_metrics=metrics.drain,
        workqueue_metrics=metrics.workqueue,
        holds_lease=holds_lease,
        after_sync=after_sync,
    )
    return _Readiness(controller)


class _Readiness:
    """Adds ``has_synced`` to the controller for ``/readyz``: the Machine, MachineClass, Secret
    (and, with a target cluster, Node) caches have synced."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def run(self, workers: int, stop: threading.Event) -> None:
        self.controller.run(workers, stop)

    def has_synced(self) -> bool:
        informers = [
            self.controller.control_factory.informer_for(r) for r in (MACHINES, MACHINE_CLASSES, SECRETS)
        ]
        if self.controller.target_factory is not None:
            informers.append(self.controller.target_factory.informer_for(NODES))
        return all(informer.has_synced() for informer in informers)


# --- identity -----------------------------------------------------------------------------------


def leader_identity(clients: Clients, namespace: str) -> contextlib.AbstractContextManager[str]:
    """The identity this process campaigns for Lease :data:`LEASE_NAME` with
    (:func:`mcm.app.process.leader_identity`); it does not depend on how the cluster is reached."""
    del clients
    return process_identity(namespace, LEASE_NAME)


# --- the run sequence ---------------------------------------------------------------------------


class _Process(ControllerProcess):
    """The machine controller's process: its controller, Lease and identity."""

    lease_name = LEASE_NAME

    def __init__(
        self,
        options: Options,
        driver: Driver,
        clients: Clients,
        stop: threading.Event,
        *,
        freeze_heap: bool = False,
    ) -> None:
        self.driver = driver
        self.freeze_heap = freeze_heap
        self.clients = clients
        self.metrics = ProcessMetrics.new()
        broadcaster, self.recorder = event_recorder(clients.control)
        super().__init__(
            options,
            stop,
            broadcaster=broadcaster,
            registry=self.metrics.registry,
            leader_metrics=self.metrics.leader,
        )
        self.machine_options = options

    def new_controller(self) -> RunnableController:
        return new_controller(
            self.machine_options,
            self.driver,
            self.clients,
            self.recorder,
            metrics=self.metrics,
            holds_lease=self.holds_lease,
            after_sync=freeze_start_up_heap if self.freeze_heap else None,
        )

    def lease_lock(self, identity: str) -> LeaseLock:
        return LeaseLock(
            self.clients.leader_election,
            self.options.namespace,
            LEASE_NAME,
            identity,
            event_recorder=self.recorder,
        )

    def leader_identity(self) -> contextlib.AbstractContextManager[str]:
        return leader_identity(self.clients, self.options.namespace)

    def wait_for_clusters(self) -> bool:
        """The control cluster answers and serves the Machine CRDs, then the target answers."""
        return wait_for_clusters(self, self.clients)


def start(
    options: Options, driver: Driver | None, stop: threading.Event, *, freeze_heap: bool = False
) -> int:
    """Steps 1-6 with an explicit ``stop`` event; raises :class:`StartupError`. ``freeze_heap``:
    freeze the start-up heap once the caches have synced (:mod:`mcm.app.heap`; the command only)."""
    clients = build_clients(options)
    try:
        if driver is None:
            driver = load_driver(options, clients)
        loaded = driver
        exit_code = serve(
            lambda: _Process(options, loaded, clients, stop, freeze_heap=freeze_heap),
            options,
            "machine-controller",
        )
        driver.close()
        return exit_code
    finally:
        clients.close()


def run(
    options: Options,
    driver: Driver | None = None,
    *,
    stop: threading.Event | None = None,
    really_crash: bool = True,
    freeze_heap: bool = False,
) -> int:
    """Run the controller until SIGTERM/SIGINT (or ``stop``); returns the process exit code.

    ``driver`` ``None`` builds the one ``--driver``/``--driver-endpoint`` names. Start-up
    failures print one line ``error: <reason>`` on stderr and return 1. ``really_crash`` (on, as
    upstream) makes a panic in a reconcile end the process; in-process tests turn it off.
    ``freeze_heap`` (the console command's choice, off for in-process callers) moves what
    start-up built out of the cyclic collector's reach once the caches have synced
    (:mod:`mcm.app.heap`).
    """
    return run_command_process(
        lambda event: start(options, driver, event, freeze_heap=freeze_heap), stop, really_crash=really_crash
    )


def main_with_options(options: Options) -> int:
    """What the console script runs after parsing: logging, driver module import, :func:`run`."""
    if not start_logging(options, log, configure=configure_logging):
        return 1
    driver: Driver | None = None
    if options.driver not in ("", "local"):
        try:
            driver = load_driver(options)
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return 1
    return run(options, driver, freeze_heap=True)

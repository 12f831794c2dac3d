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
import fcntl
import hashlib
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

import structlog
import yaml

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.app.heap import freeze_start_up_heap
from mcm.app.logs import configure_logging, log_output
from mcm.app.metrics import ProcessMetrics
from mcm.app.options import IN_CLUSTER_CONFIG, Options
from mcm.app.process import ControllerProcess, RunnableController, StartupError, run_in_thread, signals_set
from mcm.app.startup import check_control_cluster, check_target_cluster
from mcm.controller import Controller, ControllerOptions
from mcm.driver.driver import Driver
from mcm.driver.importing import import_driver_module
from mcm.runtime import errors as runtime_errors
from mcm.runtime.client import ClusterClient, ConfigError, load_config
from mcm.runtime.client.resources import NODES, SECRETS
from mcm.runtime.leaderelection import (
    LeaseLock,
)
from mcm.runtime.record import EventBroadcaster, EventRecorder

__all__ = [
    "LEASE_NAME",
    "Clients",
    "StartupError",
    "build_clients",
    "check_control_cluster",
    "controller_options",
    "load_driver",
    "main_with_options",
    "new_controller",
    "run",
]

log = structlog.get_logger("machine-controller")

LEASE_NAME = "machine-controller"
"""The leader-election Lease (no flag changes it, as upstream)."""


@dataclass
class Clients:
    """The cluster clients of one process."""

    control: ClusterClient
    leader_election: ClusterClient
    target: ClusterClient | None

    def close(self) -> None:
        for client in {id(c): c for c in (self.control, self.target) if c is not None}.values():
            with contextlib.suppress(Exception):
                client.close()


# --- kubeconfigs and clients --------------------------------------------------------------------


def _load(kubeconfig: str, what: str, options: Options, suffix: str) -> ClusterClient:
    if not kubeconfig:
        log.warning("kubeconfig_not_set_using_in_cluster_config", flag=f"--{what}-kubeconfig")
    try:
        return load_config(
            kubeconfig or IN_CLUSTER_CONFIG,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            user_agent_suffix=suffix,
        )
    except ConfigError as exc:
        raise StartupError(f"{what} cluster: {exc}") from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise StartupError(f"{what} cluster: kubeconfig {kubeconfig!r} is not valid YAML: {detail}") from None


def build_clients(options: Options) -> Clients:
    """Resolve the kubeconfigs and build the clients."""
    target = (
        None
        if options.no_target
        else _load(options.target_kubeconfig, "target", options, "machine-controller")
    )
    if options.control_kubeconfig:
        control = _load(options.control_kubeconfig, "control", options, "machine-controller")
    elif target is not None:
        control = target.with_user_agent("machine-controller")
    else:
        raise StartupError("--control-kubeconfig is required with --target-kubeconfig=none")
    return Clients(control, control.with_user_agent("machine-leader-election"), target)


# --- driver -------------------------------------------------------------------------------------


def load_driver(options: Options, clients: Clients | None = None) -> Driver:
    """The driver ``--driver``/``--driver-endpoint`` name; StartupError with the reason if not."""
    if options.driver_endpoint:
        return _grpc_driver(options)
    spec: str = options.driver
    if spec == "fake":
        from mcm.driver.fake import FakeDriver

        return FakeDriver(record_calls=False)
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


def event_recorder(control: ClusterClient) -> tuple[EventBroadcaster, EventRecorder]:
    """Events go to the control cluster (the involved object's namespace), component
    ``machine-controller``, and to the log."""
    broadcaster = EventBroadcaster()
    broadcaster.start_recording_to_sink(control)
    broadcaster.start_structured_logging()
    return broadcaster, broadcaster.new_recorder("machine-controller")


# --- identity -----------------------------------------------------------------------------------


@contextlib.contextmanager
def leader_identity(clients: Clients, namespace: str) -> Iterator[str]:
    """Hostname, or ``hostname_<pid>`` while another process on this host campaigns for the Lease.

    A lock file per (namespace, Lease) in the temp directory tells whether another process on
    this host holds the hostname identity; the kernel drops it when that process dies. The key
    leaves out the cluster's address: two replicas reaching one cluster at different addresses
    (a proxy, ``localhost`` and ``127.0.0.1``) must not both be "hostname" and both lead.
    """
    del clients  # the identity does not depend on how the cluster is reached
    hostname = socket.gethostname()
    key = hashlib.sha256(f"{namespace}|{LEASE_NAME}".encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"machine-controller-{key}.lock")
    handle: IO[str] | None = None
    try:
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the process lifetime
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        if handle is not None:
            handle.close()
        yield f"{hostname}_{os.getpid()}"
        return
    try:
        yield hostname
    finally:
        handle.close()


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
        self.waiting_for = "the control cluster"
        if not check_control_cluster(self.clients.control, self.stop):
            return False
        if self.clients.target is not None:
            self.waiting_for = "the target cluster"
            if not check_target_cluster(self.clients.target, self.stop):
                return False
        self.waiting_for = None
        return True


def start(
    options: Options, driver: Driver | None, stop: threading.Event, *, freeze_heap: bool = False
) -> int:
    """Steps 1-6 with an explicit ``stop`` event; raises :class:`StartupError`. ``freeze_heap``:
    freeze the start-up heap once the caches have synced (:mod:`mcm.app.heap`; the command only)."""
    clients = build_clients(options)
    try:
        if driver is None:
            driver = load_driver(options, clients)
        try:
            process = _Process(options, driver, clients, stop, freeze_heap=freeze_heap)
        except OSError as exc:
            raise StartupError(f"cannot serve on {options.address}:{options.port}: {exc}") from None
        exit_code = run_in_thread(process, name="machine-controller")
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
    runtime_errors.configure_crash(really_crash=really_crash)
    stop = stop or threading.Event()
    with signals_set(stop):
        try:
            return start(options, driver, stop, freeze_heap=freeze_heap)
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return 1


def main_with_options(options: Options) -> int:
    """What the console script runs after parsing: logging, driver module import, :func:`run`."""
    try:
        configure_logging(options.v, options.log_format, output=log_output(options))
    except OSError as exc:
        print(f"error: cannot open the log file: {exc}", file=sys.stderr, flush=True)
        return 1
    for flag, reason in options.without_effect():
        log.warning("flag_has_no_effect", flag=flag, reason=reason)
    driver: Driver | None = None
    if options.driver not in ("", "local"):
        try:
            driver = load_driver(options)
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return 1
    return run(options, driver, freeze_heap=True)

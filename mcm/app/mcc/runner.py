"""``machine-config-controller``'s run sequence, the same shape as ``machine-controller``'s:

1. Client from ``--kubeconfig`` (empty: in-cluster) with ``--kube-api-qps``/``--kube-api-burst``.
2. Discovery: the API server must answer and serve ``machineconfiguration.openshift.io/v1
   machinepools``; otherwise one line ``error: …`` and exit 1.
3. The HTTP server (``/metrics``, ``/healthz``, ``/readyz``) starts before the election, so a
   standby serves it too. ``/metrics`` has the pool gauges, the rollout-duration histogram, the
   ``workqueue_*`` metrics of the four queues and ``leader_election_master_status``.
4. Leader election on Lease ``machine-config-controller`` in ``--namespace`` (identity:
   ``<hostname>_<random>``); the controller runs only while leading.
5. SIGTERM/SIGINT: the workers stop (within ``--shutdown-grace-period``), the Lease is released,
   exit 0. A lost Lease exits 1. ``REALLY_CRASH`` is on: a bug ends the process.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog
import yaml
from prometheus_client import CollectorRegistry

from mcm.app.logs import configure_logging
from mcm.app.mcc.options import MccOptions
from mcm.app.metrics import DefaultRegistry
from mcm.app.runner import _signals_set
from mcm.app.server import HealthServer
from mcm.machineconfig import api
from mcm.machineconfig.context import Options
from mcm.machineconfig.controller import MachineConfigController
from mcm.machineconfig.metrics import PoolMetrics
from mcm.runtime import errors as runtime_errors
from mcm.runtime.client import IN_CLUSTER_CONFIG, ClusterClient, ConfigError, load_config
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.leaderelection import (
    HealthzAdaptor,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaseLock,
    PrometheusLeaderMetrics,
    new_leader_elector,
)
from mcm.runtime.record import EventBroadcaster
from mcm.runtime.workqueue.metrics import PrometheusMetricsProvider

__all__ = ["StartupError", "run"]

log = structlog.get_logger("machine-config-controller")

COMPONENT = "machine-config-controller"
DISCOVERY_TIMEOUT = 10.0


class StartupError(Exception):
    """Start-up cannot continue; the message is the one line the user sees."""


@dataclass(frozen=True)
class MccMetrics:
    """The metrics of one run, on a registry of its own (which also forwards the default
    registry): the pool metrics, the work-queue metrics under the runtime's default names
    (``workqueue_*``) and the leader-election gauge. Built per run, so a second run in the same
    process starts clean."""

    registry: CollectorRegistry
    pools: PoolMetrics
    queues: PrometheusMetricsProvider
    leader: PrometheusLeaderMetrics

    @classmethod
    def new(cls) -> MccMetrics:
        registry = CollectorRegistry()
        registry.register(DefaultRegistry())
        return cls(
            registry=registry,
            pools=PoolMetrics(registry),
            queues=PrometheusMetricsProvider(registry),
            leader=PrometheusLeaderMetrics(registry),
        )


def build_client(options: MccOptions) -> ClusterClient:
    try:
        return load_config(
            options.kubeconfig or IN_CLUSTER_CONFIG,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            user_agent_suffix=COMPONENT,
        )
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise StartupError(
            f"kubeconfig {options.kubeconfig!r} is not valid YAML: {' '.join(str(exc).split())}"
        ) from None


def check_cluster(client: ClusterClient, timeout: float = DISCOVERY_TIMEOUT) -> None:
    """The API server answers and serves the four CRDs, else :class:`StartupError`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            listing = client.discovery().server_resources_for_group_version(api.API_VERSION)
            break
        except NotFound:
            listing = {}
            break
        except (ApiError, ConnectionFailed) as exc:
            if time.monotonic() >= deadline:
                raise StartupError(
                    f"API server {client.host} is not reachable: {str(exc).splitlines()[0]}"
                ) from None
            time.sleep(0.5)
    served = {r.get("name") for r in listing.get("resources") or [] if isinstance(r, dict)}
    missing = [r.resource for r in api.RESOURCES if r.resource not in served]
    if missing:
        raise StartupError(
            f"the API server {client.host} does not serve {api.API_VERSION} {', '.join(missing)} "
            "(install charts/machine-config-controller/crds)"
        )


class _Process:
    """Server, election, controller, shutdown."""

    def __init__(self, options: MccOptions, client: ClusterClient, stop: threading.Event) -> None:
        self.options, self.client, self.stop = options, client, stop
        self.process_metrics = MccMetrics.new()
        self.metrics, self.queue_metrics = self.process_metrics.pools, self.process_metrics.queues
        self.broadcaster = EventBroadcaster()
        self.broadcaster.start_recording_to_sink(client)
        self.broadcaster.start_structured_logging()
        self.healthz = HealthzAdaptor(timeout=20.0)
        self.controller: MachineConfigController | None = None
        self.controller_done = threading.Event()
        self.exit_code = 0
        self.server = HealthServer(
            options.address,
            options.port,
            healthz=self._healthz,
            readyz=self._readyz,
            registry=self.process_metrics.registry,
        )

    def _healthz(self) -> str | None:
        err = self.healthz.check()
        return None if err is None else str(err)

    def _readyz(self) -> str | None:
        if self.controller is None:
            return "not leading" if self.options.leader_elect else "controller not started"
        return None if self.controller.has_synced() else "caches not synced"

    def run(self) -> int:
        self.server.start()
        log.info("serving", address=self.server.address)
        try:
            if self.options.leader_elect:
                self._run_elected()
            else:
                thread = threading.Thread(target=self._run_controller, args=(self.stop,), daemon=True)
                thread.start()
                self.stop.wait()
            if self.controller is not None and not self.controller_done.wait(
                self.options.shutdown_grace_period
            ):
                log.warning("workers_did_not_stop_in_time", grace=self.options.shutdown_grace_period)
            return self.exit_code
        finally:
            self.server.stop()
            self.broadcaster.shutdown()

    def _run_controller(self, stop: threading.Event) -> None:
        try:
            settings = Options(
                render_delay=self.options.render_delay,
                workers=self.options.concurrent_syncs,
                resync=self.options.resync_period,
            )
            self.controller = MachineConfigController(
                self.client,
                settings,
                metrics=self.metrics,
                queue_metrics=self.queue_metrics,
                broadcaster=self.broadcaster,
            )
            log.info("starting_machine_config_controller", workers=settings.workers)
            self.controller.run(settings.workers, stop)
        finally:
            self.controller_done.set()

    def _run_elected(self) -> None:
        identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        lock = LeaseLock(
            self.client.with_user_agent("machine-config-controller-leader-election"),
            self.options.namespace,
            api.LEASE_NAME,
            identity,
            event_recorder=self.broadcaster.new_recorder(COMPONENT),
        )
        config = LeaderElectionConfig(
            lock,
            LeaderCallbacks(
                on_started_leading=self._started_leading,
                on_stopped_leading=self._stopped_leading,
                on_new_leader=lambda leader: log.info("new_leader_elected", leader=leader),
            ),
            lease_duration=self.options.leader_elect_lease_duration,
            renew_deadline=self.options.leader_elect_renew_deadline,
            retry_period=self.options.leader_elect_retry_period,
            release_on_cancel=True,
            name=api.LEASE_NAME,
            watchdog=self.healthz,
        )
        log.info(
            "campaigning_for_leadership",
            lease=f"{self.options.namespace}/{api.LEASE_NAME}",
            identity=identity,
        )
        new_leader_elector(config, metrics=self.process_metrics.leader).run(self.stop)

    def _started_leading(self, lead_stop: threading.Event) -> None:
        log.info("became_leader")
        self._run_controller(lead_stop)

    def _stopped_leading(self) -> None:
        if not self.stop.is_set():
            log.error("leaderelection_lost")
            self.exit_code = 1
            self.stop.set()


def run(options: MccOptions, *, stop: threading.Event | None = None, really_crash: bool = True) -> int:
    """Run until SIGTERM/SIGINT (or ``stop``); returns the exit code. Start-up failures print one
    line ``error: <reason>`` on stderr and return 1."""
    runtime_errors.configure_crash(really_crash=really_crash)
    stop = stop or threading.Event()
    with _signals_set(stop):
        try:
            client = build_client(options)
            try:
                check_cluster(client)
                try:
                    process = _Process(options, client, stop)
                except OSError as exc:
                    raise StartupError(f"cannot serve on {options.address}:{options.port}: {exc}") from None
                result: list[int] = []
                worker = threading.Thread(target=lambda: result.append(process.run()), name=COMPONENT)
                worker.start()
                while worker.is_alive():
                    worker.join(0.2)
                return result[0] if result else 1
            finally:
                client.close()
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return 1


def main_with_options(options: MccOptions, **kwargs: Any) -> int:
    """What the console script runs after parsing: logging, then :func:`run`."""
    configure_logging(options.v, options.log_format)
    return run(options, **kwargs)

"""``machine-config-controller``'s run sequence, the same shape as ``machine-controller``'s:

1. Client from ``--kubeconfig`` (empty: in-cluster) with ``--kube-api-qps``/``--kube-api-burst``.
2. The HTTP server (``/metrics``, ``/healthz``, ``/readyz``) starts first, so a standby and a
   process still waiting for its API server serve it too. ``/metrics`` has the pool gauges,
   the rollout-duration histogram, the ``workqueue_*`` metrics of the four queues and
   ``leader_election_master_status``.
3. Discovery: the API server must serve the four ``machineconfiguration.openshift.io/v1``
   resources, else one line ``error: …`` and exit 1. An API server that does not answer is
   waited for (1 s doubling to 30 s, each failure logged as ``cluster_not_reachable``) until it
   answers or a signal stops the process; ``/readyz`` says what it waits for.
4. Leader election on Lease ``machine-config-controller`` in ``--namespace`` (identity:
   ``<hostname>_<random>``); the controller runs only while leading.
5. SIGTERM/SIGINT: the workers stop (within ``--shutdown-grace-period``), the Lease is released,
   exit 0. A lost Lease exits 1. ``REALLY_CRASH`` is on: a bug ends the process.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog
import yaml
from prometheus_client import CollectorRegistry

from mcm.app.logs import configure_logging
from mcm.app.mcc.options import MccOptions
from mcm.app.metrics import DefaultRegistry
from mcm.app.process import ControllerProcess, StartupError, run_in_thread, signals_set
from mcm.app.startup import describe, retry_until_stopped
from mcm.machineconfig import api
from mcm.machineconfig.context import Options
from mcm.machineconfig.controller import MachineConfigController
from mcm.machineconfig.metrics import PoolMetrics
from mcm.runtime import errors as runtime_errors
from mcm.runtime.client import IN_CLUSTER_CONFIG, ClusterClient, ConfigError, load_config
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.leaderelection import (
    LeaseLock,
    PrometheusLeaderMetrics,
)
from mcm.runtime.record import EventBroadcaster
from mcm.runtime.workqueue.metrics import PrometheusMetricsProvider

__all__ = ["StartupError", "run"]

log = structlog.get_logger("machine-config-controller")

COMPONENT = "machine-config-controller"


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


def check_cluster(client: ClusterClient, stop: threading.Event, *, clock: Clock = REAL_CLOCK) -> bool:
    """Wait until the API server answers discovery of ``machineconfiguration.openshift.io/v1``,
    retried as ``machine-controller``'s start-up checks are (1 s doubling to 30 s, for as long
    as it takes); ``False`` if ``stop`` came first. Raises :class:`StartupError` if it answers
    but does not serve the four CRDs."""
    listings: list[dict[str, Any]] = []

    def answers() -> str | None:
        try:
            listings.append(client.discovery().server_resources_for_group_version(api.API_VERSION))
        except NotFound:
            listings.append({})
        except (ApiError, ConnectionFailed) as exc:
            return describe(exc)
        return None

    if not retry_until_stopped(answers, client.host, stop, clock):
        return False
    served = {r.get("name") for r in listings[-1].get("resources") or [] if isinstance(r, dict)}
    missing = [r.resource for r in api.RESOURCES if r.resource not in served]
    if missing:
        raise StartupError(
            f"the API server {client.host} does not serve {api.API_VERSION} {', '.join(missing)} "
            "(install charts/machine-config-controller/crds)"
        )
    return True


class _Process(ControllerProcess):
    """The machine-config-controller's process: its controller, Lease and identity."""

    lease_name = api.LEASE_NAME

    def __init__(self, options: MccOptions, client: ClusterClient, stop: threading.Event) -> None:
        self.client = client
        self.mcc_options = options
        self.process_metrics = MccMetrics.new()
        broadcaster = EventBroadcaster()
        broadcaster.start_recording_to_sink(client)
        broadcaster.start_structured_logging()
        super().__init__(
            options,
            stop,
            broadcaster=broadcaster,
            registry=self.process_metrics.registry,
            leader_metrics=self.process_metrics.leader,
        )

    def new_controller(self) -> MachineConfigController:
        settings = Options(
            render_delay=self.mcc_options.render_delay,
            workers=self.mcc_options.concurrent_syncs,
            resync=self.mcc_options.resync_period,
        )
        return MachineConfigController(
            self.client,
            settings,
            metrics=self.process_metrics.pools,
            queue_metrics=self.process_metrics.queues,
            broadcaster=self.broadcaster,
        )

    def lease_lock(self, identity: str) -> LeaseLock:
        return LeaseLock(
            self.client.with_user_agent("machine-config-controller-leader-election"),
            self.options.namespace,
            api.LEASE_NAME,
            identity,
            event_recorder=self.broadcaster.new_recorder(COMPONENT),
        )

    def wait_for_clusters(self) -> bool:
        """The API server answers and serves the four CRDs."""
        self.waiting_for = "the API server"
        if not check_cluster(self.client, self.stop):
            return False
        self.waiting_for = None
        return True

    @contextlib.contextmanager
    def leader_identity(self) -> Iterator[str]:
        yield f"{socket.gethostname()}_{uuid.uuid4()}"


def run(options: MccOptions, *, stop: threading.Event | None = None, really_crash: bool = True) -> int:
    """Run until SIGTERM/SIGINT (or ``stop``); returns the exit code. Start-up failures print one
    line ``error: <reason>`` on stderr and return 1."""
    runtime_errors.configure_crash(really_crash=really_crash)
    stop = stop or threading.Event()
    with signals_set(stop):
        try:
            client = build_client(options)
            try:
                try:
                    process = _Process(options, client, stop)
                except OSError as exc:
                    raise StartupError(f"cannot serve on {options.address}:{options.port}: {exc}") from None
                return run_in_thread(process, name=COMPONENT)
            finally:
                client.close()
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return 1


def main_with_options(options: MccOptions, **kwargs: Any) -> int:
    """What the console script runs after parsing: logging, then :func:`run`."""
    configure_logging(options.v, options.log_format)
    return run(options, **kwargs)

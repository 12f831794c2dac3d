"""``machine-config-controller``'s run sequence, on the same shared steps as ``machine-controller``'s
(:mod:`mcm.app.clients`, :mod:`mcm.app.process`, :mod:`mcm.app.logs`, :mod:`mcm.app.metrics`):

1. Client from ``--kubeconfig`` (empty: in-cluster) with ``--kube-api-qps``/``--kube-api-burst``
   (:func:`mcm.app.clients.load_client`).
2. The HTTP server (``/metrics``, ``/healthz``, ``/readyz``) starts first, so a standby and a
   process still waiting for its API server serve it too. ``/metrics`` has the pool gauges,
   the rollout-duration histogram, the ``workqueue_*`` metrics of the four queues and
   ``leader_election_master_status``.
3. Discovery: the API server must serve the four ``machineconfiguration.openshift.io/v1``
   resources, else one line ``error: …`` and exit 1. An API server that does not answer is
   waited for (1 s doubling to 30 s, each failure logged as ``cluster_not_reachable``) until it
   answers or a signal stops the process; ``/readyz`` says what it waits for.
4. Leader election on Lease ``machine-config-controller`` in ``--namespace``; the controller runs
   only while leading. The identity is ``<hostname>_<uuid>``, as OpenShift's machine-config
   controller makes it (machine-config-operator ``pkg/controller/common``,
   ``CreateResourceLock``), not the hostname of :func:`mcm.app.process.leader_identity`, which
   follows upstream MCM.
5. SIGTERM/SIGINT: the workers stop (within ``--shutdown-grace-period``), the Lease is released,
   exit 0. A lost Lease exits 1. ``REALLY_CRASH`` is on: a bug ends the process.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import structlog

from mcm.app.clients import event_recorder, load_client
from mcm.app.logs import LogOutput, start_logging_to
from mcm.app.mcc.options import MccOptions
from mcm.app.metrics import CommandMetrics
from mcm.app.process import ControllerProcess, StartupError, run_command_process, serve
from mcm.app.startup import describe, retry_until_stopped
from mcm.machineconfig import api
from mcm.machineconfig.context import Options
from mcm.machineconfig.controller import MachineConfigController
from mcm.machineconfig.metrics import PoolMetrics
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.leaderelection import LeaseLock

__all__ = ["COMPONENT", "StartupError", "check_cluster", "main_with_options", "run", "start"]

log = structlog.get_logger("machine-config-controller")

COMPONENT = "machine-config-controller"
"""The user agent, the Events' component and the process's name."""


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
    """The machine-config-controller's process: its controller, Lease and identity. Its metrics
    (:class:`~mcm.app.metrics.CommandMetrics` with the work queues under the Kubernetes
    components' names, ``workqueue_*``, and the pool metrics) are built per run, so a second run
    in the same process starts clean."""

    lease_name = api.LEASE_NAME

    def __init__(self, options: MccOptions, client: ClusterClient, stop: threading.Event) -> None:
        self.client = client
        self.mcc_options = options
        self.metrics = CommandMetrics.new(namespace="", stability="ALPHA")
        self.pool_metrics = PoolMetrics(self.metrics.registry)
        broadcaster, self.recorder = event_recorder(client, COMPONENT)
        super().__init__(
            options,
            stop,
            broadcaster=broadcaster,
            registry=self.metrics.registry,
            leader_metrics=self.metrics.leader,
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
            metrics=self.pool_metrics,
            queue_metrics=self.metrics.workqueue,
            broadcaster=self.broadcaster,
        )

    def lease_lock(self, identity: str) -> LeaseLock:
        return LeaseLock(
            self.client.with_user_agent(f"{COMPONENT}-leader-election"),
            self.options.namespace,
            api.LEASE_NAME,
            identity,
            event_recorder=self.recorder,
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


def start(options: MccOptions, stop: threading.Event) -> int:
    """Steps 1-5 with an explicit ``stop`` event; raises :class:`StartupError`."""
    client = load_client(options.kubeconfig, options, COMPONENT)
    try:
        return serve(lambda: _Process(options, client, stop), options, COMPONENT)
    finally:
        client.close()


def run(options: MccOptions, *, stop: threading.Event | None = None, really_crash: bool = True) -> int:
    """Run until SIGTERM/SIGINT (or ``stop``); returns the exit code. Start-up failures print one
    line ``error: <reason>`` on stderr and return 1."""
    return run_command_process(lambda event: start(options, event), stop, really_crash=really_crash)


def main_with_options(options: MccOptions, **kwargs: Any) -> int:
    """What the console script runs after parsing: logging (to stderr), then :func:`run`."""
    if not start_logging_to(LogOutput(), options, log):
        return 1
    return run(options, **kwargs)

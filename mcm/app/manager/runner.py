"""``machine-controller-manager``'s run sequence: upstream's (v0.47.0
``cmd/machine-controller-manager/app/controllermanager.go``, ``Run`` and ``StartControllers``),
on the same shared steps as ``machine-controller``'s (:mod:`mcm.app.runner`).

1. Resolve the kubeconfigs (:mod:`mcm.app.clients`: empty target → in-cluster; ``none`` → no
   target cluster; empty control → the target's config; ``inClusterConfig`` → in-cluster); the
   clients carry ``--kube-api-qps``/``-burst`` and the user agent ``machine-controller-manager``.
2. The HTTP server (``/metrics``, ``/healthz``, ``/readyz``, ``/configz``) starts first, so a
   standby and a process still waiting for its clusters serve it too. ``/metrics`` has the
   MachineSet and MachineDeployment metrics (``mcm_machine_set_*``, ``mcm_machine_deployment_*``),
   the work-queue metrics under upstream's names (``mcm_workqueue_*`` of the queues
   ``machineset``, ``machinedeployment`` and ``machinesafetyovershooting``),
   ``leader_election_master_status`` and the process's own.
3. The control cluster must answer and serve ``machine.sapcloud.io/v1alpha1`` ``machines``,
   ``machinesets`` and ``machinedeployments``, the target ``/version``; a cluster that does not
   answer is waited for (1 s doubling to 30 s, each failure logged once), a control cluster
   without those resources is one line ``error: …`` and exit 1.
4. Leader election on Lease ``machine-controller-manager`` (upstream's lock name) in
   ``--namespace`` of the control cluster, identity = hostname (plus ``_<pid>`` when another
   manager on this host already campaigns for the same Lease). The manager runs only while
   leading; its own Lease, so it and ``machine-controller`` lead independently.
5. The console command freezes its start-up heap once the caches have synced (:mod:`mcm.app.heap`).
6. SIGTERM/SIGINT: workers stop within ``--shutdown-grace-period``, the Lease is released, exit 0.
   A lost Lease exits 1. ``REALLY_CRASH`` is on.

Events go to the control cluster from component ``machine-controller-manager``; those a
MachineSet records about the machines it creates and deletes from ``machineset-controller``, as
upstream's (v0.47.0 ``pkg/controller/controller.go``, ``NewController``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import structlog

from mcm.app.clients import Clients, build_clients, event_recorder
from mcm.app.heap import freeze_start_up_heap
from mcm.app.logs import start_logging
from mcm.app.manager.options import LOG_FILE_NAME, ManagerCommandOptions, manager_options
from mcm.app.metrics import CommandMetrics
from mcm.app.process import ControllerProcess, leader_identity, run_command_process, serve
from mcm.app.startup import wait_for_clusters
from mcm.manager import Manager
from mcm.runtime.leaderelection import LeaseLock
from mcm.runtime.record import EventRecorder

__all__ = [
    "COMPONENT",
    "LEASE_NAME",
    "MACHINE_SET_COMPONENT",
    "RESOURCES",
    "main_with_options",
    "new_manager",
    "run",
    "start",
]

log = structlog.get_logger(__name__)

COMPONENT = "machine-controller-manager"
"""The user agent, the Events' component and the process's name (upstream's
``controllerManagerAgentName``)."""
MACHINE_SET_COMPONENT = "machineset-controller"
"""The Events' component for a MachineSet's machine creations and deletions."""
LEASE_NAME = "machine-controller-manager"
"""The leader-election Lease (upstream's lock name; no flag changes it)."""
RESOURCES = ("machines", "machinesets", "machinedeployments")
"""The Machine API resources the control cluster must serve."""


def new_manager(
    options: ManagerCommandOptions,
    clients: Clients,
    recorder: EventRecorder | None = None,
    metrics: CommandMetrics | None = None,
    *,
    machine_set_recorder: EventRecorder | None = None,
    after_sync: Callable[[], None] | None = None,
) -> Manager:
    """Build the manager: the one place that knows its constructor. Its metrics and work-queue
    metrics go on ``metrics.registry`` (a fresh :class:`CommandMetrics` when not given);
    ``after_sync`` runs once its caches have synced, before any worker starts."""
    metrics = metrics or CommandMetrics.new()
    return Manager(
        clients.control,
        clients.target,
        manager_options(options),
        recorder=recorder,
        machine_set_recorder=machine_set_recorder,
        registry=metrics.registry,
        workqueue_metrics=metrics.workqueue,
        after_sync=after_sync,
    )


class _Process(ControllerProcess):
    """The manager's process: its manager, Lease and identity."""

    lease_name = LEASE_NAME

    def __init__(
        self,
        options: ManagerCommandOptions,
        clients: Clients,
        stop: threading.Event,
        *,
        freeze_heap: bool = False,
    ) -> None:
        self.clients = clients
        self.freeze_heap = freeze_heap
        self.metrics = CommandMetrics.new()
        broadcaster, self.recorder = event_recorder(clients.control, COMPONENT)
        self.machine_set_recorder = broadcaster.new_recorder(MACHINE_SET_COMPONENT)
        super().__init__(
            options,
            stop,
            broadcaster=broadcaster,
            registry=self.metrics.registry,
            leader_metrics=self.metrics.leader,
        )
        self.manager_options = options

    def new_controller(self) -> Manager:
        return new_manager(
            self.manager_options,
            self.clients,
            self.recorder,
            self.metrics,
            machine_set_recorder=self.machine_set_recorder,
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
        return leader_identity(self.options.namespace, LEASE_NAME)

    def wait_for_clusters(self) -> bool:
        """The control cluster answers and serves the three Machine API resources, then the
        target answers."""
        return wait_for_clusters(self, self.clients, RESOURCES, COMPONENT)


def start(options: ManagerCommandOptions, stop: threading.Event, *, freeze_heap: bool = False) -> int:
    """Steps 1-6 with an explicit ``stop`` event; raises :class:`~mcm.app.process.StartupError`."""
    clients = build_clients(options, COMPONENT)
    try:
        return serve(lambda: _Process(options, clients, stop, freeze_heap=freeze_heap), options, COMPONENT)
    finally:
        clients.close()


def run(
    options: ManagerCommandOptions,
    *,
    stop: threading.Event | None = None,
    really_crash: bool = True,
    freeze_heap: bool = False,
) -> int:
    """Run the manager until SIGTERM/SIGINT (or ``stop``); returns the process exit code.

    Start-up failures print one line ``error: <reason>`` on stderr and return 1. ``really_crash``
    (on, as upstream) makes a panic in a reconcile end the process; in-process tests turn it off.
    ``freeze_heap`` (the console command's choice) freezes the start-up heap once the caches
    have synced.
    """
    return run_command_process(
        lambda event: start(options, event, freeze_heap=freeze_heap), stop, really_crash=really_crash
    )


def main_with_options(options: ManagerCommandOptions) -> int:
    """What the console script runs after parsing: logging, then :func:`run`."""
    if not start_logging(options, log, LOG_FILE_NAME):
        return 1
    return run(options, freeze_heap=True)

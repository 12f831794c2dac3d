"""One controller process, as the commands (``machine-controller``, ``machine-controller-manager``,
``machine-config-controller``) run it: the HTTP server first, then the controller, alone or only
while it holds the Lease, then a bounded shutdown.

Guarantees:

- ``/healthz``, ``/readyz`` and ``/metrics`` are served first, before the clusters are known
  to answer and before the election, so a standby and a process still waiting for its clusters
  (:meth:`ControllerProcess.wait_for_clusters`) answer them too; ``/readyz`` fails until this
  process leads (or, without election, until the controller runs) and its caches have synced.
- The controller runs only while leading. Losing the Lease, or a controller that cannot start
  (:class:`StartupError`), sets the stop event and makes the exit code 1; a requested stop
  (SIGTERM/SIGINT, or the caller's event) leaves it 0.
- On stop the workers get ``shutdown_grace_period`` seconds; the Lease is released on a
  requested stop (``release_on_cancel``), the server and the Event broadcaster are shut down.
- ``/metrics`` carries no ``*_created`` series (prometheus-client adds one per counter, summary
  and histogram by default; upstream's Go client has none, and dashboards written for upstream
  expect none): :meth:`ControllerProcess.run` turns them off for the whole process.
- SIGTERM/SIGINT are handled by the main thread (:func:`signals_set`), which only waits for
  the process thread (:func:`run_in_thread`); :func:`run_command_process` wraps a command's run
  in both and turns a :class:`StartupError` into one line ``error: …`` and exit code 1.
- :func:`leader_identity`: the hostname, as upstream's, unless another process on this host
  already campaigns for the same Lease.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import hashlib
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import IO, Any, Protocol

import prometheus_client
import structlog
from prometheus_client import CollectorRegistry

from mcm.app.server import HealthServer
from mcm.runtime import errors as runtime_errors
from mcm.runtime.leaderelection import (
    HealthzAdaptor,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    LeaseLock,
    new_leader_elector,
)
from mcm.runtime.leaderelection.metrics import LeaderMetrics
from mcm.runtime.record import EventBroadcaster

__all__ = [
    "ControllerProcess",
    "ProcessOptions",
    "RunnableController",
    "StartupError",
    "leader_identity",
    "run_command_process",
    "run_in_thread",
    "serve",
    "signals_set",
]

log = structlog.get_logger("process")

HEALTHZ_TIMEOUT = 20.0
"""How long past the Lease's renew deadline ``/healthz`` still answers ok (client-go's
``NewLeaderHealthzAdaptor(20 * time.Second)`` in kube-controller-manager)."""


class StartupError(Exception):
    """Start-up cannot continue; the message is the one line the user sees."""


class RunnableController(Protocol):
    """What a process needs of its controller."""

    def run(self, workers: int, stop: threading.Event) -> None: ...

    def has_synced(self) -> bool: ...


class ProcessOptions(Protocol):
    """The flags both commands share (server, workers, election, shutdown), read-only."""

    @property
    def address(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def namespace(self) -> str: ...

    @property
    def concurrent_syncs(self) -> int: ...

    @property
    def shutdown_grace_period(self) -> float: ...

    @property
    def leader_elect(self) -> bool: ...

    @property
    def leader_elect_lease_duration(self) -> float: ...

    @property
    def leader_elect_renew_deadline(self) -> float: ...

    @property
    def leader_elect_retry_period(self) -> float: ...


class ControllerProcess(abc.ABC):
    """Server, election, controller, shutdown. A command says how to build its controller, its
    Lease lock and its leader identity; everything else is here."""

    lease_name: str
    """The Lease campaigned for in ``options.namespace``."""

    def __init__(
        self,
        options: ProcessOptions,
        stop: threading.Event,
        *,
        broadcaster: EventBroadcaster,
        registry: CollectorRegistry,
        leader_metrics: LeaderMetrics | None = None,
    ) -> None:
        self.options = options
        self.stop = stop
        self.broadcaster = broadcaster
        self.leader_metrics = leader_metrics
        self.controller: RunnableController | None = None
        self.controller_done = threading.Event()
        self.elector: LeaderElector | None = None
        self.exit_code = 0
        """1 once the Lease was lost or the controller could not start; 0 for a requested stop."""
        self.waiting_for: str | None = None
        """What start-up still waits for (``/readyz`` reports it), set by :meth:`wait_for_clusters`."""
        self.healthz = HealthzAdaptor(timeout=HEALTHZ_TIMEOUT)
        self.server = HealthServer(
            options.address, options.port, healthz=self._healthz, readyz=self._readyz, registry=registry
        )

    # --- what a command provides --------------------------------------------------------------

    @abc.abstractmethod
    def new_controller(self) -> RunnableController:
        """Build the controller (raises :class:`StartupError` when it cannot be built)."""

    @abc.abstractmethod
    def lease_lock(self, identity: str) -> LeaseLock:
        """The Lease lock this process campaigns with."""

    @abc.abstractmethod
    def leader_identity(self) -> contextlib.AbstractContextManager[str]:
        """The identity written into the Lease, held while campaigning."""

    def wait_for_clusters(self) -> bool:
        """Wait until the clusters answer (``waiting_for`` says which, for ``/readyz``);
        ``False`` if ``stop`` came first. Raises :class:`StartupError` for a cluster that
        answers but cannot be used. By default there is nothing to wait for."""
        return True

    # --- the run ------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve, wait for the clusters, campaign, lead; returns the exit code. A
        :class:`StartupError` from :meth:`wait_for_clusters` is raised."""
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.server.start()
        log.info("serving", address=self.server.address)
        try:
            if not self.wait_for_clusters():
                return self.exit_code
            if not self.options.leader_elect:
                return self._run_without_election()
            return self._run_elected()
        finally:
            self.server.stop()
            self.broadcaster.shutdown()

    def run_controller(self, stop: threading.Event) -> None:
        """Build and run the controller until ``stop``; ``controller_done`` is set after."""
        try:
            self.controller = self.new_controller()
            log.info("starting_controller", workers=self.options.concurrent_syncs)
            self.controller.run(self.options.concurrent_syncs, stop)
        finally:
            self.controller_done.set()

    def holds_lease(self) -> bool:
        """Whether the controller may act as leader now: without election always; with it, only
        while the elector surely holds the Lease (:meth:`LeaderElector.holds_lease`)."""
        if not self.options.leader_elect:
            return True
        return self.elector is not None and self.elector.holds_lease()

    def _healthz(self) -> str | None:
        err = self.healthz.check()
        return None if err is None else str(err)

    def _readyz(self) -> str | None:
        if self.waiting_for is not None:
            return f"waiting for {self.waiting_for}"
        if self.controller is None:
            return "not leading" if self.options.leader_elect else "controller not started"
        return None if self.controller.has_synced() else "caches not synced"

    def _run_without_election(self) -> int:
        thread = threading.Thread(target=self._guarded_controller, args=(self.stop,), daemon=True)
        thread.start()
        self.stop.wait()
        self._wait_for_workers()
        return self.exit_code

    def _guarded_controller(self, stop: threading.Event) -> None:
        try:
            self.run_controller(stop)
        except StartupError as exc:
            self._fail("controller_failed_to_start", error=str(exc))

    def _fail(self, event: str, **context: Any) -> None:
        if not self.stop.is_set():
            log.error(event, **context)
            self.exit_code = 1
            self.stop.set()

    def _run_elected(self) -> int:
        with self.leader_identity() as identity:
            config = LeaderElectionConfig(
                self.lease_lock(identity),
                LeaderCallbacks(
                    on_started_leading=self._started_leading,
                    on_stopped_leading=self._stopped_leading,
                    on_new_leader=lambda leader: log.info("new_leader_elected", leader=leader),
                ),
                lease_duration=self.options.leader_elect_lease_duration,
                renew_deadline=self.options.leader_elect_renew_deadline,
                retry_period=self.options.leader_elect_retry_period,
                release_on_cancel=True,
                name=self.lease_name,
                watchdog=self.healthz,
            )
            log.info(
                "campaigning_for_leadership",
                lease=f"{self.options.namespace}/{self.lease_name}",
                identity=identity,
            )
            self.elector = new_leader_elector(config, metrics=self.leader_metrics)
            self.elector.run(self.stop)
        self._wait_for_workers()
        return self.exit_code

    def _started_leading(self, lead_stop: threading.Event) -> None:
        log.info("became_leader")
        self._guarded_controller(lead_stop)

    def _stopped_leading(self) -> None:
        self._fail("leader_election_lost")

    def _wait_for_workers(self) -> None:
        if self.controller is None:
            return
        if not self.controller_done.wait(self.options.shutdown_grace_period):
            log.warning("workers_not_stopped_within_grace_period", grace=self.options.shutdown_grace_period)


def run_in_thread(process: ControllerProcess, name: str) -> int:
    """Run ``process`` in a thread of its own so that the calling (main) thread keeps handling
    signals; returns its exit code (1 if it ended without one) or raises its StartupError."""
    result: list[int | StartupError] = []

    def serve() -> None:
        try:
            result.append(process.run())
        except StartupError as exc:
            result.append(exc)

    worker = threading.Thread(target=serve, name=name)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    outcome = result[0] if result else 1
    if isinstance(outcome, StartupError):
        raise outcome
    return outcome


@contextlib.contextmanager
def signals_set(stop: threading.Event) -> Iterator[None]:
    """SIGTERM/SIGINT set ``stop`` (only from the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request_stop(signum: int, frame: FrameType | None) -> None:
        log.info("shutting_down", signal=signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve(build: Callable[[], ControllerProcess], options: ProcessOptions, name: str) -> int:
    """Build the process (its server binds its port: a busy port is a :class:`StartupError`) and
    run it in a thread named ``name``; its exit code."""
    try:
        process = build()
    except OSError as exc:
        raise StartupError(f"cannot serve on {options.address}:{options.port}: {exc}") from None
    return run_in_thread(process, name=name)


def run_command_process(
    start: Callable[[threading.Event], int], stop: threading.Event | None = None, *, really_crash: bool
) -> int:
    """``start(stop)`` with SIGTERM/SIGINT setting ``stop`` and ``REALLY_CRASH`` as asked; its
    exit code, or 1 after printing one line ``error: <reason>`` on stderr for a
    :class:`StartupError`."""
    runtime_errors.configure_crash(really_crash=really_crash)
    stop = stop or threading.Event()
    with signals_set(stop):
        try:
            return start(stop)
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return 1


@contextlib.contextmanager
def leader_identity(namespace: str, lease: str) -> Iterator[str]:
    """Hostname, or ``hostname_<pid>`` while another process on this host campaigns for the Lease.

    A lock file per (namespace, Lease) in the temp directory tells whether another process on
    this host holds the hostname identity; the kernel drops it when that process dies. The key
    leaves out the cluster's address: two replicas reaching one cluster at different addresses
    (a proxy, ``localhost`` and ``127.0.0.1``) must not both be "hostname" and both lead.
    """
    hostname = socket.gethostname()
    key = hashlib.sha256(f"{namespace}|{lease}".encode()).hexdigest()[:16]
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

"""The chaos harness: the world, the controller processes, and the fault switches.

:class:`Harness` owns a :class:`~mcm.testing.chaos.world.World`, runs ``machine-controller``
replicas (and, with :attr:`Settings.sidecar`, one gRPC driver sidecar per replica) as
subprocesses, and offers every fault the scenarios use as a method that records itself on the
tracker (``fault`` events) and can be undone by :meth:`Harness.clear_faults`. It also checks
what needs the live system: convergence within a bound (``converges``), process exits
(``alive``) and the controller's queue depth and thread count (``baseline``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcm.testing.chaos.cloud import ENV_CALL_LOG, ENV_CLOUD_KUBECONFIG, ENV_FAULTS, ENV_SEED, DriverFaults
from mcm.testing.chaos.invariants import Sample, Violation, await_baseline
from mcm.testing.chaos.processes import (
    Managed,
    ProcessMonitor,
    controller_command,
    free_port,
    sidecar_command,
    thread_count,
    workqueue_depths,
)
from mcm.testing.chaos.world import NAMESPACE, World

__all__ = ["Harness", "Settings"]

WRITE_VERBS = ("create", "update", "patch", "delete")
CONTROLLER_AGENTS = "machine-controller|machine-leader-election"
"""User agents of the controller's clients (faults on writes hit only the system under test)."""


@dataclass(frozen=True)
class Settings:
    """How the controllers run in one scenario (flag values; seconds)."""

    replicas: int = 1
    sidecar: bool = False
    driver_call_timeout: float = 3.0
    lease_duration: float = 30.0
    renew_deadline: float = 20.0
    retry_period: float = 2.0
    freeze_timeout: float = 5.0
    freeze_period: float = 5.0
    health_timeout: float = 8.0
    creation_timeout: float = 120.0
    orphan_period: float = 20.0
    workers: int = 5
    verbosity: int = 0

    def flags(self, replica: int, port: int, kubeconfigs: tuple[Path, Path], endpoint: str) -> list[str]:
        """The ``machine-controller`` command line of ``replica``."""
        flags = [
            f"--control-kubeconfig={kubeconfigs[0]}",
            f"--target-kubeconfig={kubeconfigs[1]}",
            f"--namespace={NAMESPACE}",
            "--address=127.0.0.1",
            f"--port={port}",
            f"--concurrent-syncs={self.workers}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            f"--driver-call-timeout={_go(self.driver_call_timeout)}",
            f"--machine-creation-timeout={_go(self.creation_timeout)}",
            f"--machine-health-timeout={_go(self.health_timeout)}",
            f"--machine-safety-apiserver-statuscheck-timeout={_go(self.freeze_timeout)}",
            f"--machine-safety-apiserver-statuscheck-period={_go(self.freeze_period)}",
            f"--machine-safety-orphan-vms-period={_go(self.orphan_period)}",
            "--machine-drain-timeout=30s",
            "--resource-exhausted-retry=5s",
            "--leader-elect=true",
            f"--leader-elect-lease-duration={_go(self.lease_duration)}",
            f"--leader-elect-renew-deadline={_go(self.renew_deadline)}",
            f"--leader-elect-retry-period={_go(self.retry_period)}",
            "--shutdown-grace-period=5s",
            "--log-format=json",
            f"--v={self.verbosity}",
        ]
        if endpoint:
            flags.append(f"--driver-endpoint={endpoint}")
        else:
            flags.append("--driver=mcm.testing.chaos.cloud:from_environment")
        del replica
        return flags


def _go(seconds: float) -> str:
    return f"{int(seconds * 1000)}ms"


class Harness:
    """See the module docstring. ``close`` ends every process and the world."""

    def __init__(self, directory: Path, seed: int) -> None:
        self.directory = directory
        self.seed = seed
        directory.mkdir(parents=True, exist_ok=True)
        self.world = World(directory, seed)
        self.tracker = self.world.tracker
        self.call_log = directory / "driver-calls.jsonl"
        self.faults_file = directory / "driver-faults.json"
        self.faults_file.write_text(DriverFaults().to_json(), encoding="utf-8")
        self.tracker.tail_call_log(str(self.call_log))
        self.violations: list[Violation] = []
        self.deaths: dict[int, float] = {}
        self.settings: Settings | None = None
        self.baselines: dict[Settings, int] = {}
        """The leader's thread count once settled, per settings (the ``baseline`` check)."""
        self.stuck: set[str] = set()
        """Machines, VMs and Nodes already reported as not converging."""
        self.controllers: list[Managed] = []
        self.sidecars: list[Managed] = []
        self.monitor = ProcessMonitor(self._exited)
        self._api_rules: list[object] = []
        self.world.start()

    # --- processes ------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            ENV_CLOUD_KUBECONFIG: str(self.world.cloud_kubeconfig),
            ENV_CALL_LOG: str(self.call_log),
            ENV_FAULTS: str(self.faults_file),
            ENV_SEED: str(self.seed),
            "PYTHONUNBUFFERED": "1",
        }

    def apply(self, settings: Settings) -> None:
        """Run the controllers with ``settings`` (restarting them only when they change)."""
        if settings == self.settings and all(p.alive() for p in self.controllers + self.sidecars):
            return
        self.stop_processes()
        self.settings = settings
        self.sidecars = []
        self.controllers = []
        for index in range(settings.replicas):
            endpoint = ""
            if settings.sidecar:
                endpoint = f"unix:{self.directory / f'driver-{index}.sock'}"
                self.sidecars.append(
                    Managed(
                        f"sidecar-{index}",
                        sidecar_command(endpoint),
                        self._env(),
                        self.directory / f"sidecar-{index}.log",
                    )
                )
            replica = self.world.replicas[index]
            port = free_port()
            flags = settings.flags(
                index, port, (replica.control_kubeconfig, replica.target_kubeconfig), endpoint
            )
            self.controllers.append(
                Managed(
                    f"controller-{index}",
                    [*controller_command(), *flags],
                    self._env(),
                    self.directory / f"controller-{index}.log",
                    port=port,
                )
            )
        for process in self.sidecars + self.controllers:
            self.start_process(process)

    def start_process(self, process: Managed) -> None:
        """Start ``process`` and watch for its exit."""
        pid = process.start()
        self.monitor.watch(process)
        self.tracker.record("process", "started", process.name, pid=pid)

    def ensure_running(self) -> None:
        """Start again every process that has ended (as Kubernetes restarts a container)."""
        self.monitor.poll()
        for process in self.sidecars + self.controllers:
            if process.stopped:
                self.signal(process, signal.SIGCONT, "resumed")
            if not process.alive():
                self.start_process(process)

    def stop_processes(self) -> None:
        """SIGTERM every process (expected exits)."""
        for process in self.controllers + self.sidecars:
            process.stop()
        self.monitor.poll()

    def signal(self, process: Managed, sig: int, reason: str) -> None:
        """Send ``sig`` to ``process`` (recorded; SIGKILL/SIGTERM are expected exits)."""
        pid = process.pid
        if process.kill(sig, reason):
            self.tracker.record("process", signal.Signals(sig).name, process.name, pid=pid, reason=reason)
            if sig == signal.SIGKILL:
                self.deaths[pid] = time.monotonic()

    def _exited(self, process: Managed, code: int, expected: bool, reason: str) -> None:
        now = time.monotonic()
        pid = process.proc.pid if process.proc is not None else 0
        self.deaths.setdefault(pid, now)
        self.tracker.record(
            "process", "exited", process.name, pid=pid, code=code, expected=expected, reason=reason
        )
        if not expected:
            tail = " | ".join(_brief(line) for line in process.log_tail(3))
            self.violations.append(
                Violation(
                    "alive", now, process.name, f"{process.name} (pid {pid}) exited with {code}: {tail}"
                )
            )

    def leader(self) -> Managed | None:
        """The controller that reports itself leading (``leader_election_master_status``)."""
        for process in self.controllers:
            if not process.alive() or process.stopped:
                continue
            try:
                text = _metrics(process.port)
            except OSError:
                continue
            if 'leader_election_master_status{name="machine-controller"} 1.0' in text:
                return process
        return None

    # --- faults ---------------------------------------------------------------------------------

    def note(self, kind: str, key: str = "", **data: Any) -> None:
        self.tracker.record("fault", kind, key, **data)

    def driver_faults(self, faults: DriverFaults) -> None:
        """Write the driver's fault file (read on its next call)."""
        tmp = self.faults_file.with_suffix(".tmp")
        tmp.write_text(faults.to_json(), encoding="utf-8")
        tmp.replace(self.faults_file)
        self.note("driver", **dataclasses.asdict(faults))

    def api_errors(self, rate: float) -> None:
        """409, 429 (Retry-After 1 s) and 500 (half of them after the commit) on ``rate`` of the
        controller's writes to both clusters."""
        share = rate / 4
        for emulator in (self.world.control, self.world.target):
            for verb in WRITE_VERBS:
                remaining = 1.0
                for code, phase, retry_after in (
                    (409, "before", None),
                    (429, "before", 1),
                    (500, "before", None),
                    (500, "after", None),
                ):
                    probability = min(1.0, share / remaining)
                    remaining -= share
                    self._api_rules.append(
                        emulator.faults.add(
                            code=code,
                            verb=verb,
                            times=None,
                            probability=probability,
                            phase=phase,
                            user_agent=CONTROLLER_AGENTS,
                            retry_after=retry_after,
                        )
                    )
        self.note("api-errors", rate=rate)

    def clear_faults(self) -> None:
        """Every fault off: API rules, pauses, proxies, driver faults, heartbeats."""
        for emulator in (self.world.control, self.world.target):
            if emulator.faults.mode is not None:
                emulator.resume()
        for rule in self._api_rules:
            rule.remove()  # type: ignore[attr-defined]
        self._api_rules.clear()
        for proxy in self.world.proxies:
            proxy.clear()
        self.driver_faults(DriverFaults())
        for node in self.world.kubelets.node_names:
            with contextlib.suppress(KeyError):  # its VM gone since the listing
                self.world.kubelets.resume_heartbeats(node)
                self.world.kubelets.set_ready(node, True)
        self.note("cleared")

    # --- checks ---------------------------------------------------------------------------------

    def converge(self, bound: float, scenario: str) -> bool:
        """Wait up to ``bound`` seconds for the world to converge; record ``converges``
        violations (with each stuck machine's history) if it does not. A Machine, VM or Node
        reported stuck once is left out of later checks (one report each, and the next
        scenarios are not held up by it)."""
        deadline = time.monotonic() + bound
        problems = self._pending()
        while problems and time.monotonic() < deadline:
            self.ensure_running()
            time.sleep(0.25)
            problems = self._pending()
        if not problems:
            return True
        now = time.monotonic()
        for key, problem in problems:
            self.violations.append(Violation("converges", now, key, f"after {bound:g}s: {key}: {problem}"))
            if key != "owner":
                self.stuck.add(key)
        self.tracker.record("check", "stuck", scenario, problems=[f"{k}: {p}" for k, p in problems])
        return False

    def _pending(self) -> list[tuple[str, str]]:
        return [(k, p) for k, p in self.world.owner.pending() if k not in self.stuck]

    def sample(self) -> Sample | None:
        """The leader's thread count and total work-queue depth; ``None`` when no controller
        reports itself leading or the leader's figures cannot be read."""
        leader = self.leader()
        if leader is None:
            return None
        try:
            depth = sum(workqueue_depths(leader.port).values())
        except OSError:
            return None
        threads = thread_count(leader.pid)
        return (threads, depth) if threads else None

    def settled_sample(self) -> Sample | None:
        """:meth:`sample` of a leader that is ready (``/readyz``: leading, caches synced) with an
        empty queue; ``None`` before. A leader sampled in its first moments, before its informers
        and workers started, would give a baseline no settled leader can keep."""
        leader = self.leader()
        if leader is None or not _ready(leader.port):
            return None
        current = self.sample()
        return current if current is not None and current[1] == 0 else None

    def check_baseline(self, threads: int, bound: float, slack: int) -> None:
        """``baseline`` (:func:`~mcm.testing.chaos.invariants.await_baseline`): depth back to 0
        and threads back to ``threads`` + ``slack`` within ``bound`` seconds, on a leader."""
        violation = await_baseline(self.sample, threads, slack, bound)
        if violation is not None:
            self.violations.append(violation)

    def close(self) -> None:
        """End every process and the world."""
        self.stop_processes()
        self.monitor.close()
        self.world.close()


def _brief(line: str, limit: int = 400) -> str:
    """A log line cut to ``limit`` characters (a panic's stack is in the process's log file)."""
    return line if len(line) <= limit else line[:limit] + "..."


def _ready(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=3) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _metrics(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as response:
        return str(response.read().decode())

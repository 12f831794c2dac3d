"""The chaos suite's processes: ``machine-controller`` replicas and gRPC driver sidecars.

:class:`Managed` runs one command as a subprocess (its stderr and stdout go to a log file),
and knows why it may end: :meth:`Managed.kill` (a signal the harness sends) and
:meth:`Managed.expect_exit` (the harness caused a lost lease) make an exit expected for a
bounded time (:data:`EXIT_WINDOW` after a signal); an exit after that time, or any other exit,
is reported to the ``on_exit`` callback as unexpected. :class:`ProcessMonitor`
polls every process a few times a second and reports exits in order.

The controller's figures come from its own endpoints: :func:`workqueue_depths` reads
``mcm_workqueue_depth`` from ``/metrics``; :func:`thread_count` reads ``/proc/<pid>/status``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

__all__ = [
    "EXIT_WINDOW",
    "Managed",
    "ProcessMonitor",
    "controller_command",
    "free_port",
    "sidecar_command",
    "thread_count",
    "workqueue_depths",
]

_DEPTH = re.compile(r'^mcm_workqueue_depth\{name="([^"]+)"\}\s+([0-9.eE+-]+)$', re.MULTILINE)


EXIT_WINDOW = 30.0
"""Seconds after a SIGKILL or SIGTERM from the harness during which the process's exit counts
as expected (its shutdown grace period is 5 s; the rest is a loaded machine's slack)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def controller_command() -> list[str]:
    """The ``machine-controller`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("machine-controller")
    if script.exists():
        return [str(script)]
    found = shutil.which("machine-controller")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from mcm.app.cli import main; sys.exit(main())"]


def sidecar_command(endpoint: str) -> list[str]:
    """The gRPC sidecar serving the chaos cloud driver on ``endpoint``."""
    return [
        sys.executable,
        "-m",
        "mcm.driver.grpc",
        "--driver",
        "mcm.testing.chaos.cloud:from_environment",
        "--endpoint",
        endpoint,
        "--grace",
        "1",
    ]


class Managed:
    """One subprocess of the harness; see the module docstring."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        env: dict[str, str],
        log_path: Path,
        *,
        port: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.env = env
        self.log_path = log_path
        self.port = port
        """The HTTP port of a controller (metrics), 0 for a sidecar."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self._log: IO[bytes] | None = None
        self._clock = clock
        self._expected_until: float | None = None
        self.expect_reason = ""
        self.stopped = False
        """Set while the process is stopped with SIGSTOP."""

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> int:
        """Start (again); returns the pid."""
        if self.alive():
            return self.pid
        self._close_log()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed when the process ends
        self._log.write(f"==== start {time.strftime('%H:%M:%S')} {' '.join(self.command)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            self.command, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.started_at = time.monotonic()
        self._expected_until = None
        self.expect_reason = ""
        self.stopped = False
        return self.proc.pid

    def kill(self, sig: int = signal.SIGKILL, reason: str = "") -> bool:
        """Send ``sig`` (an end expected within :data:`EXIT_WINDOW` unless it is SIGSTOP or
        SIGCONT); False if not running."""
        if not self.alive() or self.proc is None:
            return False
        if sig not in (signal.SIGSTOP, signal.SIGCONT):
            self.expect_exit(reason or signal.Signals(sig).name, within=EXIT_WINDOW)
        if sig == signal.SIGCONT:
            self.stopped = False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped = True
        return True

    def expect_exit(self, reason: str, *, within: float) -> None:
        """An exit in the next ``within`` seconds is the harness's doing; a later one is not."""
        self._expected_until = self._clock() + within
        self.expect_reason = reason

    def _exit_expected(self) -> bool:
        return self._expected_until is not None and self._clock() <= self._expected_until

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (SIGCONT first if stopped), wait, SIGKILL after ``timeout``."""
        if self.alive() and self.proc is not None:
            if self.stopped:
                self.kill(signal.SIGCONT)
            self.kill(signal.SIGTERM, "stopped by the harness")
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL, "stopped by the harness (SIGTERM ignored)")
                self.proc.wait(10)
        self._close_log()

    def exit_status(self) -> tuple[int, bool, str] | None:
        """``(returncode, expected, reason)`` once the process has ended, else None."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is None:
            return None
        if self._exit_expected():
            return code, True, self.expect_reason
        lapsed = f" (the harness's {self.expect_reason!r} had lapsed)" if self.expect_reason else ""
        return code, False, f"unexpected exit{lapsed}"

    def _close_log(self) -> None:
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def log_tail(self, lines: int = 30) -> list[str]:
        """The last lines of the process's log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]


class ProcessMonitor:
    """Calls ``on_exit(process, returncode, expected, reason)`` once per exit of a watched process."""

    def __init__(self, on_exit: Callable[[Managed, int, bool, str], None], interval: float = 0.1) -> None:
        self._on_exit = on_exit
        self._interval = interval
        self._watched: dict[str, tuple[Managed, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-process-monitor", daemon=True)
        self._thread.start()

    def watch(self, process: Managed) -> None:
        """Report the current run of ``process`` when it ends."""
        with self._lock:
            self._watched[process.name] = (process, process.pid)

    def poll(self) -> None:
        """Report every exit seen now (also called by the loop)."""
        with self._lock:
            watched = list(self._watched.items())
        for name, (process, pid) in watched:
            status = process.exit_status() if process.pid == pid else None
            if status is None:
                continue
            with self._lock:
                if self._watched.get(name, (None, 0))[1] != pid:
                    continue
                del self._watched[name]
            self._on_exit(process, *status)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()


def workqueue_depths(port: int, timeout: float = 5.0) -> dict[str, float]:
    """``mcm_workqueue_depth`` per queue from the controller's ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as response:
        text = response.read().decode()
    return {name: float(value) for name, value in _DEPTH.findall(text)}


def thread_count(pid: int) -> int:
    """Threads of process ``pid`` (Linux ``/proc``); 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return 0
    match = re.search(r"^Threads:\s+(\d+)$", status, re.MULTILINE)
    return int(match.group(1)) if match else 0

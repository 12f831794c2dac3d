"""One control-plane binary as a child process: its log file, a health check, a clean stop.

Guarantees:

- :meth:`Process.start` returns once ``healthy()`` is true; if the child exits first or
  ``timeout`` passes, it is killed and :class:`StartFailed` carries the tail of its log.
- The child gets ``SIGKILL`` when the thread that started it dies (``PR_SET_PDEATHSIG`` on
  Linux, :func:`mcm.runtime.parentdeath.die_with_parent`), so a crashed or killed test run
  leaves no etcd or kube-apiserver behind.
- :meth:`Process.stop` sends ``SIGTERM``, waits ``grace`` seconds, then kills; it is idempotent.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from mcm.runtime.parentdeath import die_with_parent

__all__ = ["Process", "StartFailed", "free_port"]


class StartFailed(RuntimeError):
    """A binary did not become healthy; the message ends with the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Process:
    """A named child process whose stdout and stderr go to ``<directory>/<name>.log``."""

    def __init__(self, name: str, command: Sequence[str], directory: Path) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = directory / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, healthy: Callable[[], bool], timeout: float) -> None:
        """Start the child and wait until ``healthy()`` (see the module guarantees)."""
        self.launch()
        self.wait_healthy(healthy, timeout)

    def launch(self) -> None:
        """Start the child without waiting (then :meth:`wait_healthy`)."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - only a prctl call, no locks taken
        )

    def wait_healthy(self, healthy: Callable[[], bool], timeout: float) -> None:
        """Return once ``healthy()``; kill the child and raise :class:`StartFailed` if it exits
        or ``timeout`` passes first."""
        proc = self._proc
        if proc is None:
            raise StartFailed(f"{self.name} was not launched")
        deadline = time.monotonic() + timeout
        while not healthy():
            code = proc.poll()
            if code is not None or time.monotonic() > deadline:
                self.stop(grace=0)
                state = f"exited with {code}" if code is not None else f"not healthy after {timeout:.0f}s"
                raise StartFailed(
                    f"{self.name} {state}; last lines of {self.log_path}:\n{_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            if grace > 0:
                proc.terminate()
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

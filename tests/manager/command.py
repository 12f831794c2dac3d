"""The ``machine-controller-manager`` command as a process of its own, its log in a file (for the
tests that run the real command: on the emulator, on the real API servers, and killed with
SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def manager_command(*args: str) -> list[str]:
    """The console script ``machine-controller-manager`` (``mcm.app.manager.cli:main``), as the
    interpreter running the tests runs it."""
    return [sys.executable, "-m", "mcm.app.manager.cli", *args]


class ManagerCommand:
    """One ``machine-controller-manager`` process: loopback ``--address``, a free ``--port``,
    JSON logs in ``directory/<name>.log``."""

    def __init__(
        self,
        directory: Path,
        control_kubeconfig: Path | str,
        target_kubeconfig: Path | str,
        *extra: str,
        name: str = "manager",
    ) -> None:
        self.log_path = directory / f"{name}.log"
        self.port = free_port()
        self.args = [
            f"--control-kubeconfig={control_kubeconfig}",
            f"--target-kubeconfig={target_kubeconfig}",
            "--address=127.0.0.1",
            f"--port={self.port}",
            "--log-format=json",
            *extra,
        ]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            manager_command(*self.args), stdout=self._log, stderr=subprocess.STDOUT, env=command_env()
        )

    def restart(self) -> None:
        """Start the same command again (after :meth:`kill`), appending to the same log."""
        self.process = self._spawn()

    def kill(self) -> None:
        """SIGKILL, and wait until the process is gone."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def log(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                lines.append({"msg": line})
        return lines

    def log_text(self, tail: int = 5000) -> str:
        return self.log_path.read_text()[-tail:]

    def logged(self, msg: str) -> bool:
        return any(entry.get("msg") == msg for entry in self.log())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``sig`` (if still running) and return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            self._log.close()

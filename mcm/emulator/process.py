"""Emulators in their own processes (``python -m mcm.emulator serve``), driven through
:class:`~mcm.emulator.admin.RemoteEmulator` (this keeps the server off the GIL of the code
under test). This is the one launcher: :class:`~mcm.emulator.cluster.ClusterPair`, tests
and benchmarks all start emulator processes with :func:`spawn`.

Guarantees: :func:`spawn` returns only once the ready file exists (or raises after
``timeout``, killing the process); :meth:`EmulatorProcess.close` sends SIGTERM and waits,
killing after 10 s. An :class:`EmulatorProcess` is a context manager that closes on exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from mcm.emulator.admin import RemoteEmulator

__all__ = ["EmulatorProcess", "spawn"]


class EmulatorProcess:
    """A running ``serve`` process with its remote controls and kubeconfig."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        remote: RemoteEmulator,
        kubeconfig: Path,
        ready_info: dict[str, Any] | None = None,
    ) -> None:
        self.proc = proc
        self.remote = remote
        self.kubeconfig = kubeconfig
        self.ready_info = ready_info or {}
        """The ready file's content (``url``, ``admin_url``, ``kubeconfig``, ...)."""

    @property
    def url(self) -> str:
        """The API server URL."""
        return self.remote.url

    @property
    def port(self) -> int:
        """The API server's TCP port."""
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Terminate the process."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def spawn(
    directory: str | Path,
    name: str,
    *,
    tls: bool = False,
    crds: str | Path | None = None,
    controllers: bool = True,
    history_size: int | None = None,
    request_log: str | Path | None = None,
    timeout: float = 90.0,
) -> EmulatorProcess:
    """Start ``serve`` for cluster ``name``; files go to ``directory``; the options are ``serve``'s
    (``request_log``: append every answered request to this file as a JSON line)."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    ready = target / f"{name}.ready.json"
    kubeconfig = target / f"{name}.kubeconfig"
    command = _serve_command(
        name, kubeconfig, ready, tls=tls, crds=crds, controllers=controllers, history_size=history_size
    )
    if request_log is not None:
        command += ["--request-log", str(request_log)]
    proc = subprocess.Popen(command, env=_child_env(), stderr=subprocess.DEVNULL)
    info = _wait_ready(proc, ready, name, timeout)
    return EmulatorProcess(proc, RemoteEmulator(info["admin_url"], info["url"]), kubeconfig, info)


def _serve_command(
    name: str,
    kubeconfig: Path,
    ready: Path,
    *,
    tls: bool,
    crds: str | Path | None,
    controllers: bool,
    history_size: int | None,
) -> list[str]:
    """The ``python -m mcm.emulator serve`` command line, on ephemeral ports."""
    command = [
        sys.executable,
        "-m",
        "mcm.emulator",
        "serve",
        "--port",
        "0",
        "--admin-port",
        "0",
        "--name",
        name,
        "--kubeconfig",
        str(kubeconfig),
        "--ready-file",
        str(ready),
    ]
    if tls:
        command.append("--tls")
    if crds is not None:
        command += ["--crds", str(crds)]
    if not controllers:
        command.append("--no-controllers")
    if history_size is not None:
        command += ["--history-size", str(history_size)]
    return command


def _child_env() -> dict[str, str]:
    """This environment with this source tree first on ``PYTHONPATH``."""
    root = Path(__file__).resolve().parents[2]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, name: str, timeout: float) -> dict[str, Any]:
    """The ready file's content once the child writes it; the child is killed if it exits or
    ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"emulator {name!r} did not become ready")
        time.sleep(0.005)
    info: dict[str, Any] = json.loads(ready.read_text(encoding="utf-8"))
    return info

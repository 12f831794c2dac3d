"""What both commands' demos are made of: child processes that never outlive the demo, emulators
started as processes, a live table, the work directory, and how an interrupt ends a demo.

Guarantees:

- :class:`Processes` starts every child in a session of its own with a parent-death signal
  (:func:`mcm.runtime.parentdeath.die_with_parent`): a demo stopped by Ctrl-C, SIGTERM or SIGHUP
  stops them (:meth:`Processes.stop_all`), and a demo killed by SIGKILL, which runs no handler,
  still leaves none behind.
- :func:`_workdir` is the directory of the demo's kubeconfigs and logs. An interrupt inside it
  (Ctrl-C, or SIGTERM and SIGHUP once :func:`_stop_on_signals` ran) prints ``interrupted`` and
  exits 128 + the signal's number (130, 143, 129), as a shell reports a process the signal
  ended. A temporary directory is removed when the demo ends unless ``--keep``; when it stays,
  the demo says where (a failure's message names it too). A ``--workdir`` given is never removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import click

from mcm.runtime.client.errors import ApiError, ConnectionFailed
from mcm.runtime.parentdeath import die_with_parent

__all__ = [
    "DemoFailed",
    "Processes",
    "Screen",
    "Terminated",
    "keep_running",
    "run_demo_command",
]


class DemoFailed(Exception):
    """A step did not finish; the message says which and where the logs are."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: the demo stops as on Ctrl-C, stopping its child processes."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Processes:
    """Child processes, stopped in reverse order on exit."""

    workdir: Path
    children: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a child and register it; an interrupt meanwhile is acted on once it is
        registered, so :meth:`stop_all` always sees every child that was started. Call it from
        the main thread: the child's parent-death signal follows the thread that started it."""
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop_all
        self.logs.append(log)
        with _interrupts_deferred():
            child = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - only a prctl call, no locks taken
            )
            self.children.append((name, child))
        return child

    def stop_all(self) -> None:
        """SIGTERM every child, wait for each (SIGKILL after 15 s); a second Ctrl-C or SIGTERM
        meanwhile is held back until all are gone, so none is left running."""
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            for _, child in reversed(self.children):
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for _, child in reversed(self.children):
                try:
                    child.wait(15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            for log in self.logs:
                log.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back for the block: the first that arrives is raised
    again, to its own handler, when the block ends (main thread only). Without it, an interrupt
    while ``Popen`` waits for the exec leaves the new child running, unknown to the demo."""
    arrived: list[int] = []

    def remember(signum: int, _frame: FrameType | None) -> None:
        arrived.append(signum)

    previous = _set_handlers(dict.fromkeys(_INTERRUPTS, remember))
    try:
        yield
    finally:
        _set_handlers(previous)
    if arrived:
        signal.raise_signal(arrived[0])


def _set_handlers(handlers: dict[signal.Signals, Any]) -> dict[signal.Signals, Any]:
    """Install ``handlers`` with the signals blocked meanwhile; returns the ones replaced."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        replaced = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    # None: a handler not installed from Python, which cannot be put back; the default is.
    return {sig: signal.SIG_DFL if handler is None else handler for sig, handler in replaced.items()}


def _stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP interrupt the demo like Ctrl-C (the default would end it at once,
    leaving its emulators and controller running), and Ctrl-C interrupt it even when the demo
    was started with SIGINT ignored (a background job of a script)."""

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        raise Terminated(signum)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def _wait(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise DemoFailed(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _start_emulator(procs: Processes, name: str, crds: Path | None, extra: Sequence[str] = ()) -> Path:
    """Start ``python -m mcm.emulator serve`` for cluster ``name`` (``extra``: more flags);
    returns its kubeconfig once it serves."""
    kubeconfig = procs.workdir / f"{name}.kubeconfig"
    ready = procs.workdir / f"{name}.ready.json"
    ready.unlink(missing_ok=True)
    args = [sys.executable, "-m", "mcm.emulator", "serve", "--name", name, "--kubeconfig", str(kubeconfig)]
    args += ["--ready-file", str(ready), "--admin-port", "-1", *extra]
    if crds is not None:
        args += ["--crds", str(crds)]
    child = procs.spawn(f"{name}-emulator", args)
    _wait(f"the {name} emulator", lambda: ready.exists() or child.poll() is not None, 30)
    if child.poll() is not None:
        raise DemoFailed(f"the {name} emulator exited; see {procs.workdir / f'{name}-emulator.log'}")
    return kubeconfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Screen:
    """Redraws the table in place on a terminal; elsewhere prints it when a row changes (ages
    aside: a column of whole seconds, ``12s``, inside a line or at its end). Lines are never
    cut: on a terminal, a line wider than it takes several rows and the redraw moves up by rows,
    not lines."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.last: list[str] = []
        self.last_key: list[str] = []
        self.rows = 0

    def show(self, lines: list[str]) -> None:
        key = [re.sub(r"\s\d+s(?=\s|$)", " ", line) for line in lines]
        if lines == self.last or (not self.tty and key == self.last_key):
            return
        if self.tty and self.last:
            sys.stdout.write(f"\x1b[{self.rows}F\x1b[J")
        elif self.last:
            sys.stdout.write("\n")
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        width = max(1, shutil.get_terminal_size().columns)
        self.rows = sum(max(1, -(-len(line) // width)) for line in lines)
        self.last, self.last_key = lines, key


def keep_running(hints: list[str], procs: Processes) -> None:
    """``--keep``: print what to try from another terminal, then wait for Ctrl-C or SIGTERM (or a
    child to exit); the caller stops the children. Stopping a kept demo is its normal end."""
    click.echo("From another terminal:")
    for hint in hints:
        click.echo(f"  {hint}")
    click.echo("Press Ctrl-C to stop.")
    try:
        while all(child.poll() is None for _, child in procs.children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass


@contextlib.contextmanager
def _workdir(path: str | None, keep: bool) -> Iterator[Path]:
    """The demo's directory for kubeconfigs and logs: ``path``, or a new temporary one; how an
    interrupt ends the demo and when the directory is removed (see the module guarantees)."""
    directory = Path(path) if path else Path(tempfile.mkdtemp(prefix="mcm-demo-"))
    directory.mkdir(parents=True, exist_ok=True)
    temporary = path is None
    try:
        yield directory
    except KeyboardInterrupt as interrupt:
        _leave(directory, temporary, keep)
        click.echo("interrupted", err=True)
        signum = interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT
        raise SystemExit(128 + signum) from None
    _leave(directory, temporary, keep)


def _leave(directory: Path, temporary: bool, keep: bool) -> None:
    """Remove a temporary work directory unless ``keep``; say where it stays when kept."""
    if temporary and not keep:
        shutil.rmtree(directory, ignore_errors=True)
    elif temporary:
        click.echo(f"kubeconfigs and logs kept in {directory}")


def run_demo_command(
    steps: Callable[[Path], dict[str, Any]], workdir: str | None, keep: bool, summary_json: str | None
) -> int:
    """A demo command's body: ``steps`` runs in the work directory (:func:`_workdir`, interrupts
    as the module says) and returns the summary, written to ``summary_json`` when given; a
    failure (:class:`DemoFailed`, or an API server that fails or stops answering) prints one line
    ``error: … (logs in DIR)`` and exits 1."""
    _stop_on_signals()
    with _workdir(workdir, keep) as path:
        try:
            summary = steps(path)
        except (DemoFailed, ApiError, ConnectionFailed) as exc:
            click.echo(f"error: {exc} (logs in {path})", err=True)
            raise SystemExit(1) from None
    if summary_json:
        Path(summary_json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


def _say(text: str) -> None:
    click.echo(click.style(f"==> {text}", bold=True))

"""Two elector processes on one emulator: ``kill -9`` the leader, the other takes over after the
lease expires, and the two never lead at the same time (wall-clock stamps from both processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = Path(__file__).with_name("elector_script.py")
LEASE, RETRY = 3.0, 0.2  # as elector_script.py
SLACK = 3.0  # liveness only: a loaded machine delays the takeover, never makes it early
WAIT = 30.0


class ElectorProcess:
    def __init__(self, kubeconfig: str, identity: str, changed: threading.Condition) -> None:
        self.identity = identity
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), kubeconfig, identity],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[list[str]] = []
        self.changed = changed  # shared by all processes of a test
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.split())
                self.changed.notify_all()

    def stamp(self, word: str) -> float | None:
        with self.changed:
            for parts in self.lines:
                if parts[0] == word:
                    return float(parts[2])
        return None

    def wait_for(self, word: str, timeout: float = WAIT) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: any(p[0] == word for p in self.lines), timeout)


@pytest.fixture
def processes(kubeconfig: str) -> Iterator[list[ElectorProcess]]:
    changed = threading.Condition()
    procs = [ElectorProcess(kubeconfig, name, changed) for name in ("proc-a", "proc-b")]
    yield procs
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
        p.proc.wait(WAIT)


@pytest.mark.slow
def test_kill_9_of_the_leader_hands_over_after_the_lease_expires(processes: list[ElectorProcess]) -> None:
    for p in processes:
        assert p.wait_for("READY")
    changed = processes[0].changed
    with changed:
        assert changed.wait_for(lambda: any(p.stamp("STARTED") for p in processes), WAIT)
    leader, other = sorted(processes, key=lambda p: p.stamp("STARTED") is None)
    time.sleep(1.5 * LEASE)  # an observation window: the leader renews, the other must wait
    assert other.stamp("STARTED") is None
    assert leader.stamp("LOST") is None

    killed_at = time.time()
    os.kill(leader.proc.pid, signal.SIGKILL)
    leader.proc.wait(WAIT)

    assert other.wait_for("STARTED")
    took_over_at = other.stamp("STARTED")
    assert took_over_at is not None
    assert took_over_at > killed_at  # never two leaders
    assert took_over_at - killed_at < LEASE + 2.2 * RETRY + SLACK

    other.proc.send_signal(signal.SIGTERM)
    assert other.proc.wait(WAIT) == 0
    assert other.wait_for("STOPPED", 5.0)
    lost_at = other.stamp("LOST")
    assert lost_at is not None and lost_at >= took_over_at

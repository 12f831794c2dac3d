"""``machine-config-controller demo`` stopped by SIGTERM (a supervisor, CI) stops its emulator,
daemons and controller too: they run in sessions of their own and would outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .fixtures import REPO, eventually


def _processes_mentioning(text: str) -> list[int]:
    """Live processes (not zombies) whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_sigterm_stops_the_demo_and_every_process_it_started(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    demo = subprocess.Popen(
        [sys.executable, "-m", "mcm.app.mcc.cli", "demo", "--workdir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        # The emulator, the daemons and the controller all name a file in the work directory.
        eventually(lambda: len(_processes_mentioning(str(workdir))) >= 3, 120, what="the demo's children")
        demo.send_signal(signal.SIGTERM)
        demo.wait(60)
        eventually(lambda: _processes_mentioning(str(workdir)) == [], 30, what="the children to stop")
    finally:
        if demo.poll() is None:
            demo.kill()
        for pid in _processes_mentioning(str(workdir)):
            os.kill(pid, signal.SIGKILL)

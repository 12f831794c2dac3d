"""``die_with_parent``: a child started with it ends when its parent is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PARENT = """
import subprocess, sys, time
from mcm.runtime.parentdeath import die_with_parent
kwargs = {"preexec_fn": die_with_parent()} if sys.argv[1] == "yes" else {}
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], **kwargs)
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _orphan_after_sigkill_of_its_parent(use_it: str) -> int:
    """Start a parent that starts a child, SIGKILL the parent; return the child's pid."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, use_it],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    parent.stdout.close()
    return child


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_the_child_ends_when_its_parent_is_killed() -> None:
    child = _orphan_after_sigkill_of_its_parent("yes")
    deadline = time.monotonic() + 30
    while _alive(child):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the child outlived its SIGKILLed parent")
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_without_it_the_child_outlives_its_parent() -> None:
    """The control case: what the test above would see without ``die_with_parent``."""
    child = _orphan_after_sigkill_of_its_parent("no")
    try:
        assert _alive(child)
    finally:
        os.kill(child, signal.SIGKILL)

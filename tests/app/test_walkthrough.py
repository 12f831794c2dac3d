"""README "Run it yourself": its shell block, as it stands in the README, runs step by step with
the real ``kubectl``, and each step shows what the README says it does."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="needs kubectl"),
]


def walkthrough() -> str:
    """The first ``sh`` block of the README's "Run it yourself" section."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Run it yourself\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "README.md: no sh block under 'Run it yourself'"
    return block.group(1)


def steps(script: str) -> list[tuple[str, str]]:
    """The block cut at its numbered comments (``# 1. …``): (title, commands) per step."""
    found = re.split(r"^# (\d+\. .*)$", script, flags=re.MULTILINE)
    return [(found[i].strip(), found[i + 1]) for i in range(1, len(found), 2)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mentioning(text: str) -> list[int]:
    """Processes whose command line mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and text in _cmdline(int(entry.name)):
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _run(script: str, tmp_path: Path) -> tuple[int, dict[str, str]]:
    """Run the README's steps in one bash, as a user pastes them; each step's output is
    collected under its title. The harness adds ``set -e``, the step markers and a trap that
    stops the background jobs if a step fails."""
    marked = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for title, commands in steps(script):
        marked += [f"echo {shlex.quote('@@@ ' + title)}", commands]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{Path(KUBECTL).parent}:{os.environ.get('PATH', '')}",
        "TMPDIR": str(tmp),
        "METRICS_PORT": str(_free_port()),
        "MANAGER_METRICS_PORT": str(_free_port()),
        "PYTHONPATH": str(REPO),
    }
    env.pop("KUBECONFIG", None)
    out = tmp_path / "walkthrough.out"
    with out.open("wb") as sink:  # a file, not a pipe: background jobs may hold it open
        result = subprocess.run(
            ["bash", "-c", "\n".join(marked)],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    outputs: dict[str, str] = {}
    title = ""
    for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("@@@ "):
            title = line[4:]
            outputs[title] = ""
        else:
            outputs[title] = outputs.get(title, "") + line + "\n"
    return result.returncode, outputs


def _step(outputs: dict[str, str], number: int) -> str:
    return next(text for title, text in outputs.items() if title.startswith(f"{number}."))


def test_the_readme_block_is_numbered_steps() -> None:
    titles = [title for title, _ in steps(walkthrough())]
    assert [t.split(".")[0] for t in titles] == ["1", "2", "3", "4", "5", "6", "7", "8"], titles
    assert "machine-controller-manager --control-kubeconfig" in walkthrough()
    assert "kubectl apply -f examples/manifests/control/" in walkthrough()
    assert "apply -f examples/manifests/target/" in walkthrough()


def _check_the_machine_deployment_steps(outputs: dict[str, str], transcript: str) -> None:
    """Step 3 brought demo-pool up; step 6 scaled and rolled it (the old set at 0, the new one at
    3, all Ready); step 7 replaced the machine whose Node was deleted and scaled it to 0."""
    assert "machinedeployment.machine.sapcloud.io/demo-pool created" in _step(outputs, 3), transcript
    rolled = _step(outputs, 6)
    assert "machinedeployment.machine.sapcloud.io/demo-pool scaled" in rolled, transcript
    assert "machinedeployment.machine.sapcloud.io/demo-pool patched" in rolled, transcript
    # READY DESIRED UP-TO-DATE AVAILABLE, then each set's DESIRED CURRENT READY
    assert re.search(r"^machinedeployment\S*/demo-pool\s+3\s+3\s+3\s+3\s", rolled, re.MULTILINE), transcript
    sets = re.findall(r"^machineset\S*/demo-pool-\S+\s+(\d+)\s+(\d+)\s+(\d+)\s", rolled, re.MULTILINE)
    assert sorted(sets) == [("0", "0", "0"), ("3", "3", "3")], transcript
    healed = _step(outputs, 7)
    lost = re.search(r'^node "(demo-pool-\S+)" deleted$', healed, re.MULTILINE)  # named as its machine
    assert lost is not None, transcript
    running = re.findall(r"^(demo-pool-\S+)\s+Running\s", healed, re.MULTILINE)
    assert len(running) == 3 and lost.group(1) not in running, transcript
    assert re.search(r"^machinedeployment\S*/demo-pool\s+0\s+0\s+0\s+0\s", healed, re.MULTILINE), transcript


def test_the_walkthrough_runs_as_the_readme_says(tmp_path: Path) -> None:
    try:
        code, outputs = _run(walkthrough(), tmp_path)
        transcript = "\n".join(f"--- {title}\n{text}" for title, text in outputs.items())
        assert code == 0, transcript
        applied = _step(outputs, 3)
        assert "machineclass.machine.sapcloud.io/local-small created" in applied, transcript
        for i in range(1, 6):
            assert f"machine.machine.sapcloud.io/demo-machine-{i} condition met" in applied, transcript
            assert re.search(rf"^demo-machine-{i}\s+Running\b", applied, re.MULTILINE), transcript
        workload = _step(outputs, 4)
        assert "poddisruptionbudget.policy/web created" in workload, transcript
        assert re.search(r"^pod/web-1\s+1/1\s+Running\s.*\sdemo-machine-1\s", workload, re.MULTILINE)
        assert re.search(r"^pod/web-2\s+1/1\s+Running\s.*\sdemo-machine-2\s", workload, re.MULTILINE)
        deletion = _step(outputs, 5)
        assert 'machine.machine.sapcloud.io "demo-machine-1" deleted' in deletion, transcript
        for reason in ("DrainStarted", "DrainSucceeded", "MachineDeleted"):
            assert re.search(rf"\sNormal\s+{reason}\s", deletion), transcript
        assert "Warning" not in deletion, transcript  # no ClassNotReady or any other Warning
        assert "node/demo-machine-1" not in deletion and "pod/web-1" not in deletion, transcript
        assert re.search(r"^pod/web-2\s+1/1\s+Running\s", deletion, re.MULTILINE), transcript
        _check_the_machine_deployment_steps(outputs, transcript)
    finally:
        deadline = time.monotonic() + 30
        while _mentioning(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {pid: _cmdline(pid) for pid in _mentioning(str(tmp_path))}
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert left == {}, "step 8 (kill, wait) left processes running"

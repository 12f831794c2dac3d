"""``machine-controller demo``: it never leaves processes behind (not even on SIGKILL), says it was
interrupted, removes its temporary directory unless kept, shows where its endpoints are,
and prints machine descriptions whole; the deletion trace starts with the deletion; the
MachineDeployment table has kubectl's columns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine.resources import MACHINE_DEPLOYMENTS, MACHINES
from mcm.app.demo import Processes, Screen, Terminated, _DeletionWatch, _stop_on_signals, _table
from mcm.app.demopool import pool_table
from mcm.emulator import Emulator
from mcm.runtime.client import load_config
from mcm.runtime.client.resources import PODS

REPO = Path(__file__).resolve().parents[2]
JOINED = "Machine m-1 successfully joined the cluster in 8.123s. Machine phase has been set to Running."


def _start_demo(tmp_path: Path, *args: str, workdir: bool = True) -> tuple[subprocess.Popen[str], Path]:
    """The demo as a process; without ``workdir`` it makes its temporary one under ``tmp_path/tmp``."""
    out = tmp_path / "demo.out"
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    where = ["--workdir", str(tmp_path / "work")] if workdir else []
    with out.open("w") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "mcm.app.cli", "demo", *where, *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)},
        )
    return demo, out


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _children(pid: int) -> set[int]:
    """The direct children of ``pid`` (Linux ``/proc``)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(p) for p in (task / "children").read_text().split())
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _stop_and_check_nothing_is_left(
    demo: subprocess.Popen[str], children: set[int], sig: int = signal.SIGTERM
) -> int:
    """Send ``sig`` to the demo, return its exit code once every child is gone (at most 30 s
    after the demo itself)."""
    try:
        demo.send_signal(sig)
        code = demo.wait(60)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if demo.poll() is None:
            demo.kill()
    left = sorted(pid for pid in children if _alive(pid))
    for pid in left:  # do not leak them into the machine even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes left behind by the demo: {left}"
    return code


def _demo_running_its_controller(
    tmp_path: Path, *args: str, workdir: bool = True
) -> tuple[subprocess.Popen[str], Path, set[int]]:
    """A demo with both emulators, the controller and the manager started: the process, its
    output, its children."""
    demo, out = _start_demo(tmp_path, "--machines", "2", *args, workdir=workdir)
    _wait_for("the manager to start", lambda: "running machine-controller-manager" in out.read_text())
    # the line is printed just before the manager is spawned
    _wait_for("two emulators, the controller and the manager", lambda: len(_children(demo.pid)) == 4)
    return demo, out, _children(demo.pid)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_an_interrupted_demo_says_so_exits_128_plus_the_signal_and_leaves_nothing(
    tmp_path: Path, sig: int, code: int
) -> None:
    """Ctrl-C, SIGTERM or SIGHUP mid-demo: both emulators and the controller stop, the
    temporary work directory is removed, and the demo says ``interrupted`` and exits as a shell
    reports a process the signal ended (it used to exit 1 silently and leave its directory)."""
    demo, out, children = _demo_running_its_controller(tmp_path, workdir=False)
    assert len(list((tmp_path / "tmp").glob("mcm-demo-*"))) == 1
    assert _stop_and_check_nothing_is_left(demo, children, sig) == code
    assert out.read_text().splitlines()[-1] == "interrupted"
    assert "Traceback" not in out.read_text()
    assert list((tmp_path / "tmp").glob("mcm-demo-*")) == []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_demo_killed_with_sigkill_leaves_no_process_behind(tmp_path: Path) -> None:
    """SIGKILL runs no handler of the demo: its children end through their parent-death signal."""
    demo, _, children = _demo_running_its_controller(tmp_path)
    _stop_and_check_nothing_is_left(demo, children, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_keep_prints_kubeconfigs_and_metrics_url_and_sigterm_stops_everything(tmp_path: Path) -> None:
    demo, out = _start_demo(tmp_path, "--machines", "2", "--keep", workdir=False)
    _wait_for("the demo to keep running", lambda: "Press Ctrl-C to stop" in out.read_text())
    text = out.read_text()
    children = _children(demo.pid)
    try:
        paths = {
            line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
            for line in text.splitlines()
            if ": " in line
        }
        control = load_config(paths["control cluster kubeconfig"])
        target = load_config(paths["target cluster kubeconfig"])
        machines = control.resource(MACHINES).list(namespace="default")["items"]
        owned = [m for m in machines if m["metadata"].get("ownerReferences")]
        assert len(machines) == 4 and len(owned) == 2  # --machines 2, and the MachineDeployment's 2
        [pool] = control.resource(MACHINE_DEPLOYMENTS).list(namespace="default")["items"]
        assert pool["status"]["readyReplicas"] == 2
        pods = target.resource(PODS).list(namespace="default")["items"]
        assert {p["metadata"]["name"]: p["status"]["phase"] for p in pods} == {
            "web-1": "Running",
            "web-2": "Running",
        }
        control.close()
        target.close()
        with urllib.request.urlopen(paths["controller metrics"], timeout=10) as response:
            metrics = response.read().decode()
        assert "mcm_machine_items_total 4.0" in metrics
        # the local driver's API requests, labelled with the demo class's provider
        assert 'mcm_cloud_api_requests_total{provider="local",service="configmaps"}' in metrics
        assert (
            'mcm_cloud_api_driver_request_duration_seconds_count{operation="CreateMachine",provider="local"}'
            in metrics
        )
        with urllib.request.urlopen(paths["manager metrics"], timeout=10) as response:
            metrics = response.read().decode()
        assert (
            'mcm_machine_deployment_status_ready_replicas{name="demo-pool",namespace="default"} 2.0'
            in metrics
        )
    finally:
        code = _stop_and_check_nothing_is_left(demo, children)
    assert code == 0  # stopping a kept demo is its normal end
    kept = paths["logs"]
    assert f"kubeconfigs and logs kept in {kept}" in out.read_text()
    assert Path(kept, "machine-controller.log").exists()
    assert Path(kept, "machine-controller-manager.log").exists()


def test_a_sigterm_while_a_child_starts_still_stops_that_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM landing inside ``Popen`` (the demo had printed "running machine-controller" and
    was starting it) used to leave that child running: it was never registered."""
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen_then_sigterm(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGTERM)
        return started[-1]

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    monkeypatch.setattr(subprocess, "Popen", popen_then_sigterm)
    procs = Processes(tmp_path)
    _stop_on_signals()
    try:
        with pytest.raises(Terminated):
            try:
                procs.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
            finally:
                procs.stop_all()
        after = signal.getsignal(signal.SIGTERM)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        left = [child for child in started if child.poll() is None]
        for child in left:
            child.kill()
            child.wait()
    assert len(started) == 1 and left == []
    assert getattr(after, "__name__", "") == "interrupt"  # the demo's own handler is back


def test_the_machine_table_shows_whole_descriptions() -> None:
    machine = {
        "metadata": {"name": "m-1", "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"node": "m-1"}},
        "status": {"currentStatus": {"phase": "Running"}, "lastOperation": {"description": JOINED}},
    }
    lines = _table([machine])
    assert lines[1].endswith(JOINED)


def test_the_deletion_trace_leaves_out_the_description_from_before_the_deletion(
    emulator: Emulator, kubeconfig: str
) -> None:
    client = load_config(kubeconfig)
    machine = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "m-1", "namespace": "default"},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    created = client.resource(MACHINES).create(machine, namespace="default")
    created["status"] = {"lastOperation": {"description": JOINED}}
    stored = client.resource(MACHINES).update_status(created, namespace="default")
    watch = _DeletionWatch(client, client, "m-1", "m-1", JOINED)
    assert not any(line.startswith("machine m-1") for line in watch.changes())
    stored["status"]["lastOperation"]["description"] = "Initiate node drain"
    client.resource(MACHINES).update_status(stored, namespace="default")
    assert "machine m-1: Initiate node drain" in watch.changes()
    client.close()


def _pool_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    created = "2024-01-01T00:00:00Z"
    deployment = {
        "metadata": {"name": "demo-pool", "creationTimestamp": created},
        "spec": {"replicas": 3},
        "status": {"readyReplicas": 2, "updatedReplicas": 1, "availableReplicas": 2},
    }

    def machine_set(name: str, class_name: str, desired: int, current: int, ready: int) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"replicas": desired, "template": {"spec": {"class": {"name": class_name}}}},
            "status": {"replicas": current, "readyReplicas": ready},
        }

    sets = [
        machine_set("demo-pool-bbbbb", "local-large", 1, 1, 0),
        machine_set("demo-pool-aaaaa", "local-small", 2, 3, 2),
    ]
    running: dict[str, Any] = {"status": {"currentStatus": {"phase": "Running"}}}
    machines: list[dict[str, Any]] = [
        running,
        running,
        {"metadata": {"deletionTimestamp": created}, **running},
        {"status": {"currentStatus": {"phase": "Pending"}}},
        {},
    ]
    return [deployment], sets, machines


def test_the_pool_table_has_kubectls_columns_each_sets_class_and_the_machines_by_phase() -> None:
    lines = pool_table(*_pool_objects())
    assert lines[0].split() == ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert lines[1].split()[:5] == ["machinedeployment/demo-pool", "2", "3", "1", "2"]
    assert lines[3].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CLASS"]
    rows = [line.split() for line in lines[4:6]]
    assert [(r[0], r[1:4], r[5]) for r in rows] == [
        ("machineset/demo-pool-aaaaa", ["2", "3", "2"], "local-small"),
        ("machineset/demo-pool-bbbbb", ["1", "1", "0"], "local-large"),
    ]
    assert lines[-1] == "machines: 1 Creating, 1 Pending, 2 Running, 1 Terminating"
    deployments, _, _ = _pool_objects()
    assert pool_table(deployments, [], []) == [*lines[:2], "", "machines: none"]  # no MachineSet part


def test_off_a_terminal_a_table_is_printed_again_only_when_more_than_ages_changed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    screen = Screen()
    screen.tty = False
    screen.show(["NAME  AGE", "pool  3s"])
    screen.show(["NAME  AGE", "pool  4s"])  # an age at the end of a line
    screen.show(["NAME  AGE  CLASS", "set  10s  small"])
    screen.show(["NAME  AGE  CLASS", "set  11s  small"])  # inside a line
    screen.show(["NAME  AGE  CLASS", "set  11s  large"])
    assert capsys.readouterr().out.count("NAME") == 3

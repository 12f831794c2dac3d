"""The ``machine-controller-manager`` command as a subprocess against emulated clusters: bad
start-up input, and a run beside ``machine-controller`` (both real commands) that leads,
reconciles a MachineDeployment, serves its endpoints and exits cleanly on SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.apis.machine.resources import MACHINE_DEPLOYMENTS, MACHINES
from mcm.app.demo import demo_objects
from mcm.emulator import ClusterPair, Emulator
from mcm.runtime import objects as o
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, LEASES
from tests.app.test_command import Controller
from tests.manager.cluster import md
from tests.manager.command import ManagerCommand, command_env, free_port, manager_command
from tests.realapi.env import eventually

NS = "default"
CLASS_NAME = next(body["metadata"]["name"] for _, body in demo_objects(0) if body["kind"] == "MachineClass")
"""The local provider's class of the demo's manifests."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        manager_command(*args), capture_output=True, text=True, timeout=60, env=command_env(), check=False
    )


def _one_line_error(result: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0]


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


# --- bad input ----------------------------------------------------------------------------------


def test_help_and_a_bad_flag() -> None:
    shown = _run("--help")
    assert shown.returncode == 0 and "--safety-up int32" in shown.stdout
    assert "--autoscaler-scaledown-annotation-during-rollout" in shown.stdout
    _one_line_error(_run("--machine-safety-overshooting-period=1"), 2, "--machine-safety-overshooting-period")
    _one_line_error(_run("--safety-up=-2"), 2, "--safety-up")


def test_a_missing_kubeconfig_is_one_line_and_exit_1(tmp_path: Path) -> None:
    _one_line_error(_run(f"--target-kubeconfig={tmp_path / 'nope'}"), 1, "target cluster", "does not exist")


def test_a_cluster_without_the_crds_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with Emulator() as bare:
        path = bare.write_kubeconfig(tmp_path / "bare")
        result = _run(f"--target-kubeconfig={path}", f"--port={free_port()}", "--address=127.0.0.1")
    _one_line_error(
        result, 1, "machine-controller-manager", "machines, machinesets, machinedeployments", "CRDs"
    )


def test_a_busy_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy, Emulator() as bare:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        path = bare.write_kubeconfig(tmp_path / "bare")
        result = _run(f"--target-kubeconfig={path}", f"--port={busy.getsockname()[1]}", "--address=127.0.0.1")
    _one_line_error(result, 1, "cannot serve on 127.0.0.1")


# --- at work, beside machine-controller --------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ClusterPair]:
    with ClusterPair.start(tmp_path) as pair:
        yield pair


@pytest.fixture
def control(pair: ClusterPair) -> Iterator[ClusterClient]:
    client = load_config(str(pair.control_kubeconfig), qps=-1)
    for resource, body in demo_objects(0, boot_delay=0.2):
        client.resource(resource).create(body, namespace=NS)
    yield client
    client.close()


def _lease_holder(control: ClusterClient) -> str:
    try:
        lease = control.resource(LEASES).get("machine-controller-manager", namespace=NS)
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def _available(control: ClusterClient, replicas: int) -> bool:
    deployment = control.resource(MACHINE_DEPLOYMENTS).get("pool", namespace=NS)
    machines = control.resource(MACHINES).list(namespace=NS)["items"]
    running = [m for m in machines if o.text(m, "status", "currentStatus", "phase") == "Running"]
    status = o.sub(deployment, "status")
    return len(running) == replicas == len(machines) and status.get("availableReplicas") == replicas


@pytest.mark.slow
def test_the_command_leads_reconciles_a_deployment_serves_its_endpoints_and_exits_0(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    controller = Controller(tmp_path, pair, "mc", "--driver=local")
    manager = ManagerCommand(
        tmp_path, pair.control_kubeconfig, pair.target_kubeconfig, "--machine-safety-overshooting-period=2s"
    )
    try:
        eventually(lambda: manager.logged("became_leader"), "the manager to lead")
        assert _lease_holder(control) == socket.gethostname()
        control.resource(MACHINE_DEPLOYMENTS).create(md(replicas=2, class_name=CLASS_NAME), namespace=NS)
        eventually(lambda: _available(control, 2), "2 Running machines of the MachineDeployment")

        status, body = _get(manager.port, "/metrics")
        assert status == 200
        for series in (
            'mcm_machine_deployment_status_available_replicas{name="pool",namespace="default"} 2.0',
            "mcm_machine_set_items_total 1.0",
            'leader_election_master_status{name="machine-controller-manager"} 1.0',
        ):
            assert series in body, series
        for name in ("machineset", "machinedeployment", "machinesafetyovershooting"):
            assert f'mcm_workqueue_adds_total{{name="{name}"}}' in body, name
        assert "mcm_machine_drain" not in body and "mcm_cloud_api" not in body, "the controller's metrics"
        assert "python_info" in body
        assert _get(manager.port, "/healthz") == (200, "ok")
        assert _get(manager.port, "/readyz") == (200, "ok")

        events = control.resource(EVENTS).list(namespace=NS)["items"]
        sources = {e["reason"]: (e.get("source") or {}).get("component") for e in events}
        assert sources.get("ScalingMachineSet") == "machine-controller-manager"
        assert sources.get("SuccessfulCreate") == "machineset-controller", "as upstream's"
        messages = [entry.get("msg") for entry in manager.log()]
        assert messages.count("start_up_heap_frozen") == 1
        assert messages.index("start_up_heap_frozen") < messages.index("starting_machine_controller_manager")

        assert manager.stop(signal.SIGTERM) == 0, manager.log_text()
        assert _lease_holder(control) == "", "SIGTERM releases the Lease"
    finally:
        manager.stop(signal.SIGKILL)
        assert controller.stop() == 0


UPSTREAM_MANIFEST_ARGS = [
    # The machine-controller-manager container of upstream v0.47.0's
    # kubernetes/deployment/out-of-tree/deployment.yaml (kubeconfigs aside; its two periods
    # written with units, as Go's duration flags require) ...
    "--delete-migrated-machine-class=false",
    "--safety-up=2",
    "--safety-down=1",
    "--machine-drain-timeout=5m",
    "--machine-health-timeout=10m",
    "--machine-safety-orphan-vms-period=30m",
    "--machine-safety-overshooting-period=1m",
    "--node-conditions=ReadonlyFilesystem,KernelDeadlock,DiskPressure,NetworkUnavailable",
    "--v=2",
    # ... and klog's flags as Kubernetes components' manifests pass them.
    "--logtostderr=true",
    "-v=2",
]


def test_an_upstream_manifests_args_start_the_manager_unchanged(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    args = [f"--namespace={NS}", *UPSTREAM_MANIFEST_ARGS]
    manager = ManagerCommand(tmp_path, pair.control_kubeconfig, pair.target_kubeconfig, *args)
    try:
        control.resource(MACHINE_DEPLOYMENTS).create(md(replicas=1, class_name=CLASS_NAME), namespace=NS)
        eventually(lambda: len(control.resource(MACHINES).list(namespace=NS)["items"]) == 1, "a Machine")
        warned = {e["flag"]: e["reason"] for e in manager.log() if e.get("msg") == "flag_has_no_effect"}
        assert warned == {
            "--machine-drain-timeout": "a machine-controller flag: set it there",
            "--node-conditions": "a machine-controller flag: set it there",
        }
    finally:
        assert manager.stop() == 0

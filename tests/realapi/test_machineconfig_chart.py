"""charts/machine-config-controller on a real kube-apiserver: its objects apply (server-side dry run,
then for real), and the ``machine-config-controller`` command run with the chart's arguments and
ServiceAccount token under RBAC rolls a pool out, overwrites a template edit, restores a rendered
config, applies and removes a KubeletConfig and stops on SIGTERM with every call allowed (audit
log), while ``kubectl auth can-i --list`` for that account shows nothing it did not call."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcm.machineconfig import api
from mcm.runtime.client import load_config
from mcm.runtime.client.resources import LEASES, NAMESPACES
from mcm.testing.envtest import ControlPlane
from tests.conftest import REALAPI_MARKS, REPO_ROOT, optional_module
from tests.machineconfig import fixtures
from tests.machineconfig.fixtures import Cluster, exercise_every_call
from tests.realapi.env import unique
from tests.realapi.test_chart import Call, audited_calls, granted_beyond_baseline, kubectl
from tests.realapi.test_machineconfig import empty

helm_python: Any = optional_module("helm_python")

pytestmark = [
    *REALAPI_MARKS,
    pytest.mark.kubectl,
    pytest.mark.usefixtures("needs_kubectl", "needs_helm_python"),
]

CHART = REPO_ROOT / "charts" / "machine-config-controller"
RBAC_KINDS = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ServiceAccount"}


def render(values: dict[str, Any], release: str, namespace: str) -> list[dict[str, Any]]:
    manifests = helm_python.Chart.load(str(CHART)).render(values, name=release, namespace=namespace)
    return [
        doc
        for path, text in manifests.items()
        if not path.endswith(".txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def _apply(plane: ControlPlane, objects: list[dict[str, Any]], path: Path, *extra: str) -> str:
    path.write_text(yaml.safe_dump_all(objects))
    return kubectl(plane.kubeconfig, "apply", "--server-side", *extra, "-f", str(path))


def test_the_charts_objects_apply_server_side_dry_run_then_for_real(
    mcc_plane: ControlPlane, tmp_path: Path
) -> None:
    release, namespace = unique("mcc"), unique("mcc-ns")
    values = {
        "replicaCount": 2,
        "metrics": {"service": {"annotations": {"prometheus.io/scrape": "true"}}},
        "daemon": {"enabled": True, "rebootCommand": "chroot /rootfs systemctl reboot"},
    }
    objects = render(values, release, namespace)
    mcc_plane.client().resource(NAMESPACES).create({"metadata": {"name": namespace}})
    manifest = tmp_path / "chart.yaml"
    try:
        dry = _apply(mcc_plane, objects, manifest, "--dry-run=server")
        assert dry.count("serverside-applied (server dry run)") == len(objects), dry
        applied = _apply(mcc_plane, objects, manifest)
        assert applied.count("serverside-applied") == len(objects), applied
        listed = kubectl(mcc_plane.kubeconfig, "get", "-f", str(manifest), "-o", "name").split()
        assert len(listed) == len(objects)
    finally:
        kubectl(mcc_plane.kubeconfig, "delete", "-f", str(manifest), "--wait=false", check=False)
        kubectl(mcc_plane.kubeconfig, "delete", "namespace", namespace, "--wait=false", check=False)


@dataclass
class RbacRun:
    """What one command run under the chart's RBAC did, and what its account may do."""

    exit_code: int
    log: str
    calls: set[Call] = field(default_factory=set)
    forbidden: list[str] = field(default_factory=list)
    granted: set[Call] = field(default_factory=set)
    owner_references: list[dict[str, Any]] = field(default_factory=list)
    lease: dict[str, Any] = field(default_factory=dict)
    """The Lease after the command exited."""


def _command_args(objects: list[dict[str, Any]], kubeconfig: Path, port: int) -> list[str]:
    """The chart container's arguments, with a kubeconfig and a loopback port of the test's."""
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    args = [
        arg
        for arg in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        if arg.split("=", 1)[0] not in ("--address", "--port")
    ]
    return [*args, f"--kubeconfig={kubeconfig}", "--address=127.0.0.1", f"--port={port}"]


@pytest.fixture(scope="module")
def rbac_run(mcc_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RbacRun]:
    """The chart's account and RBAC (defaults) applied, then the command run as that account."""
    from tests.machineconfig.test_command import _free_port

    tmp_path = tmp_path_factory.mktemp("mcc-rbac")
    release, namespace = unique("mcc"), unique("mcc-ns")
    objects = render({"controller": {"renderDelay": "100ms"}}, release, namespace)
    admin = load_config(str(mcc_plane.kubeconfig), qps=-1, burst=0)
    empty(admin)
    admin.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    _apply(mcc_plane, [o for o in objects if o["kind"] in RBAC_KINDS], tmp_path / "rbac.yaml")
    account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
    user = f"system:serviceaccount:{namespace}:{account}"
    token = mcc_plane.service_account_token(namespace, account)
    kubeconfig = mcc_plane.write_kubeconfig(tmp_path / "sa.kubeconfig", token=token)
    cluster = Cluster(admin)
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 2})
    cluster.start_daemons()
    log_path = tmp_path / "mcc.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcm.app.mcc.cli", *_command_args(objects, kubeconfig, _free_port())],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            with pytest.MonkeyPatch.context() as patch:  # see real_api_timeouts in test_machineconfig
                patch.setattr(fixtures, "TIMEOUT", 90.0)
                owners = exercise_every_call(cluster)
            process.send_signal(signal.SIGTERM)
            code = process.wait(60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            cluster.close()
    lease = admin.resource(LEASES).get(api.LEASE_NAME, namespace=namespace)
    run = RbacRun(code, log_path.read_text()[-5000:], owner_references=owners, lease=lease)
    run.calls, run.forbidden = audited_calls(mcc_plane, user)
    run.granted = granted_beyond_baseline(mcc_plane, user, (namespace, "default"))
    empty(admin)
    admin.resource(NAMESPACES).delete(namespace)
    admin.close()
    yield run


def test_every_call_the_command_makes_under_the_charts_rbac_is_allowed(rbac_run: RbacRun) -> None:
    assert rbac_run.exit_code == 0, rbac_run.log
    assert rbac_run.forbidden == [], rbac_run.log
    assert ("update", "coordination.k8s.io", "leases") in rbac_run.calls, "leader election ran"
    assert not rbac_run.lease["spec"].get("holderIdentity"), "SIGTERM released the Lease"
    assert ("patch", "", "nodes") in rbac_run.calls, "the UpdateController set desiredConfig"
    # OwnerReferencesPermissionEnforcement is on: this owner reference needed the
    # machinepools/finalizers grant, and no 403 came back.
    owner = rbac_run.owner_references[0]
    assert (owner["kind"], owner.get("blockOwnerDeletion")) == ("MachinePool", True)


def test_the_charts_account_may_do_nothing_the_command_does_not_use(rbac_run: RbacRun) -> None:
    """``*/finalizers`` is checked by the admission plugin, never called (see the test above)."""
    unused = sorted(
        " ".join(call) for call in rbac_run.granted - rbac_run.calls if not call[2].endswith("/finalizers")
    )
    assert unused == [], "granted but never called:\n" + "\n".join(unused)


@pytest.fixture(scope="module")
def daemon_rbac_run(mcc_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RbacRun]:
    """The chart's daemon account and RBAC applied, then ``machine-config-daemon`` run as that
    account for node worker-0, next to the controller (run as admin)."""
    from tests.machineconfig.test_chart import exercise_the_daemon

    tmp_path = tmp_path_factory.mktemp("mcd-rbac")
    release, namespace = unique("mcc"), unique("mcc-ns")
    objects = render({"daemon": {"enabled": True}}, release, namespace)
    admin = load_config(str(mcc_plane.kubeconfig), qps=-1, burst=0)
    empty(admin)
    admin.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    daemon_rbac = [o for o in objects if o["kind"] in RBAC_KINDS and "-daemon" in o["metadata"]["name"]]
    _apply(mcc_plane, daemon_rbac, tmp_path / "rbac.yaml")
    account = next(o for o in daemon_rbac if o["kind"] == "ServiceAccount")["metadata"]["name"]
    user = f"system:serviceaccount:{namespace}:{account}"
    token = mcc_plane.service_account_token(namespace, account)
    kubeconfig = mcc_plane.write_kubeconfig(tmp_path / "sa.kubeconfig", token=token)
    daemon_set = next(o for o in objects if o["kind"] == "DaemonSet")
    chart_args = [
        arg
        for arg in daemon_set["spec"]["template"]["spec"]["containers"][0]["args"]
        if arg.split("=", 1)[0] not in ("--root", "--systemctl")
    ]
    root = tmp_path / "root"
    log_path = tmp_path / "mcd.log"
    codes: list[int] = []
    with open(log_path, "wb") as log:
        processes: list[subprocess.Popen[bytes]] = []

        def start() -> Callable[[], None]:
            args = [
                f"--kubeconfig={kubeconfig}",
                "--node-name=worker-0",
                f"--root={root}",
                "--systemctl=true",
            ]
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "mcm.app.mcd.cli", *chart_args, *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

            def stop() -> None:
                processes[0].send_signal(signal.SIGTERM)
                codes.append(processes[0].wait(60))

            return stop

        cluster = Cluster(admin)
        try:
            with pytest.MonkeyPatch.context() as patch:  # see real_api_timeouts in test_machineconfig
                patch.setattr(fixtures, "TIMEOUT", 90.0)
                exercise_the_daemon(cluster, root, start)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
            cluster.close()
    run = RbacRun(codes[0] if codes else -1, log_path.read_text()[-5000:])
    run.calls, run.forbidden = audited_calls(mcc_plane, user)
    run.granted = granted_beyond_baseline(mcc_plane, user, (namespace, "default"))
    empty(admin)
    admin.resource(NAMESPACES).delete(namespace)
    admin.close()
    yield run


def test_every_call_the_daemon_makes_under_the_charts_rbac_is_allowed(daemon_rbac_run: RbacRun) -> None:
    assert daemon_rbac_run.exit_code == 0, daemon_rbac_run.log
    assert daemon_rbac_run.forbidden == [], daemon_rbac_run.log
    assert ("create", "", "pods/eviction") in daemon_rbac_run.calls, "the drain evicted the pod"
    assert ("update", "", "nodes") in daemon_rbac_run.calls and (
        "patch",
        "",
        "nodes",
    ) in daemon_rbac_run.calls


def test_the_daemons_account_may_do_nothing_the_daemon_does_not_use(daemon_rbac_run: RbacRun) -> None:
    unused = sorted(" ".join(call) for call in daemon_rbac_run.granted - daemon_rbac_run.calls)
    assert unused == [], "granted but never called:\n" + "\n".join(unused)

"""kubectl against the real servers, as tests/emulator/test_kubectl.py uses it against the emulator:
the same commands and the same expected output (what the emulator imitates, the real server does)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.testing.envtest import ControlPlanePair
from tests.conftest import MCM_CRDS_DIR, REALAPI_MARKS
from tests.emulator.test_kubectl import MACHINE, Kubectl
from tests.realapi.env import unique

KUBECTL = shutil.which("kubectl")
pytestmark = [*REALAPI_MARKS, pytest.mark.kubectl, pytest.mark.usefixtures("needs_kubectl")]


@pytest.fixture
def kubectl(real_pair: ControlPlanePair, tmp_path: Path) -> Iterator[Kubectl]:
    """kubectl on the control cluster as its admin, in a namespace of the test's own."""
    namespace = unique("kubectl")
    kubeconfig = real_pair.control.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
    ctl = Kubectl(str(kubeconfig), tmp_path)
    ctl("create", "namespace", namespace)
    ctl.namespace = namespace  # type: ignore[attr-defined]
    yield ctl
    ctl("delete", "namespace", namespace, "--wait=false", check=False)


def _machine(tmp_path: Path, namespace: str, name: str = "m1") -> Path:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(
        MACHINE.replace("namespace: default", f"namespace: {namespace}").replace("name: m1", f"name: {name}")
    )
    return manifest


def test_apply_get_columns_watch_and_delete_with_a_finalizer(kubectl: Kubectl, tmp_path: Path) -> None:
    namespace = kubectl.namespace  # type: ignore[attr-defined]
    kubectl("apply", "-f", str(MCM_CRDS_DIR))
    kubectl("wait", "--for=condition=Established", "crd/machines.machine.sapcloud.io", "--timeout=30s")
    manifest = _machine(tmp_path, namespace)
    assert "created" in kubectl("apply", "-f", str(manifest))
    assert "unchanged" in kubectl("apply", "-f", str(manifest))
    machine = json.loads(kubectl("get", "machine", "m1", "-o", "json"))
    assert machine["spec"]["class"]["name"] == "c1" and machine["metadata"]["generation"] == 1
    assert [i["metadata"]["name"] for i in json.loads(kubectl("get", "mc", "-o", "json"))["items"]] == ["m1"]
    assert kubectl("get", "machines").splitlines()[0].split() == ["NAME", "STATUS", "AGE", "NODE"]

    watch = kubectl.popen("get", "machines", "--watch", "-o", "json", "--request-timeout=30s")
    seen = threading.Event()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            if '"seen": "yes"' in line:
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert kubectl.popen("get", "machine", "m1").wait(30) == 0
        kubectl("label", "machine", "m1", "seen=yes")
        assert seen.wait(20), "kubectl --watch did not print the update"
    finally:
        watch.terminate()
        watch.wait(timeout=10)

    kubectl("delete", "machine", "m1", "--wait=false")
    assert json.loads(kubectl("get", "machine", "m1", "-o", "json"))["metadata"]["deletionTimestamp"]
    kubectl("patch", "machine", "m1", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    gone = subprocess.run(
        [*kubectl.base, "get", "machine", "m1"], capture_output=True, text=True, check=False
    )
    assert "NotFound" in gone.stderr


def test_create_builtins_get_wide_and_drain(kubectl: Kubectl, tmp_path: Path) -> None:
    data = tmp_path / "settings.conf"
    data.write_text("level=debug\n")
    kubectl("create", "secret", "generic", "creds", "--from-literal=user=admin", "--from-literal=pw=s3cr3t")
    kubectl("create", "configmap", "cfg", f"--from-file={data}")
    kubectl("create", "serviceaccount", "robot")
    kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80")
    secret = json.loads(kubectl("get", "secret", "creds", "-o", "json"))
    assert secret["type"] == "Opaque" and secret["data"] == {"user": "YWRtaW4=", "pw": "czNjcjN0"}
    assert json.loads(kubectl("get", "configmap", "cfg", "-o", "json"))["data"] == {
        "settings.conf": "level=debug\n"
    }
    deployment = json.loads(kubectl("get", "deployment", "web", "-o", "json"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert (deployment["spec"]["replicas"], container["image"], container["ports"][0]["containerPort"]) == (
        2,
        "nginx:1.27",
        80,
    )
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    service = json.loads(kubectl("get", "service", "web", "-o", "json"))
    assert (service["spec"]["ports"][0]["port"], service["spec"]["ports"][0]["targetPort"]) == (80, 8080)

    node = unique("kubectl-node")
    namespace = kubectl.namespace  # type: ignore[attr-defined]
    objects = tmp_path / "objects.yaml"
    objects.write_text(
        f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n---\n"
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  namespace: {namespace}\n"
        f"spec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n"
    )
    kubectl("apply", "-f", str(objects))
    try:
        assert kubectl("get", "nodes").splitlines()[0].split() == [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
        ]
        wide = kubectl("get", "nodes", "-o", "wide").splitlines()[0].split()
        assert wide[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
        assert kubectl("get", "pods").splitlines()[0].split() == [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
        ]
        pods = kubectl("get", "pods", "-o", "wide").splitlines()
        assert pods[0].split()[5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
        assert pods[1].split()[:2] == ["p1", "0/1"] and node in pods[1].split()
        kubectl("cordon", node)
        kubectl("taint", "node", node, "dedicated=infra:NoSchedule")
        spec = json.loads(kubectl("get", "node", node, "-o", "json"))["spec"]
        assert spec["unschedulable"] is True
        assert spec["taints"] == [
            {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},  # TaintNodesByCondition
        ]
        assert "dedicated=infra:NoSchedule" in kubectl("describe", "node", node)
        out = kubectl("drain", node, "--force", "--grace-period=0", "--timeout=30s", timeout=60)
        assert "drained" in out
        assert (
            "NotFound"
            in subprocess.run(
                [*kubectl.base, "get", "pod", "p1"], capture_output=True, text=True, check=False
            ).stderr
        )
    finally:
        kubectl("delete", "node", node, "--wait=false", check=False)


def test_auth_cluster_info_server_side_apply_explain_diff_and_dry_run(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    assert kubectl("auth", "can-i", "create", "machines").strip() == "yes"
    assert "mcm-envtest-admin" in kubectl("auth", "whoami")
    assert kubectl("auth", "can-i", "--list").splitlines()[1].split()[:1] == ["*.*"]
    assert "Kubernetes control plane is running at https://127.0.0.1:" in kubectl("cluster-info")
    services = kubectl("get", "svc", "kubernetes", "-n", "default").splitlines()
    assert services[1].split()[:2] == ["kubernetes", "ClusterIP"] and services[1].split()[3:5] == [
        "<none>",
        "443/TCP",
    ]

    namespace = kubectl.namespace  # type: ignore[attr-defined]
    manifest = _machine(tmp_path, namespace, "ssa")
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifest))
    manifest.write_text(manifest.read_text().replace("name: c1", "name: c2"))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifest))
    assert json.loads(kubectl("get", "machine", "ssa", "-o", "json"))["spec"]["class"]["name"] == "c2"
    manifest.write_text(manifest.read_text().replace("name: c2", "name: c3"))
    diff = subprocess.run(
        [*kubectl.base, "diff", "-f", str(manifest)], capture_output=True, text=True, timeout=30, check=False
    )
    assert diff.returncode == 1 and "+    name: c3" in diff.stdout, diff.stderr
    kubectl("patch", "machine", "ssa", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')

    spec = kubectl("explain", "machines.spec")
    assert "KIND:       Machine" in spec and "class\t<Object>" in spec
    pod_spec = kubectl("explain", "pod.spec")
    assert "FIELD: spec <PodSpec>" in pod_spec and "containers\t<[]Container> -required-" in pod_spec

    kubectl("create", "configmap", "dry", "--from-literal=a=b", "--dry-run=server")
    assert (
        subprocess.run(
            [*kubectl.base, "get", "configmap", "dry"], capture_output=True, check=False
        ).returncode
        != 0
    )
    kubectl("run", "web", "--image=nginx", "--labels=app=web")
    assert "service/web exposed" in kubectl("expose", "pod", "web", "--port=80")
    assert kubectl("describe", "pod", "web").split()[:2] == ["Name:", "web"]

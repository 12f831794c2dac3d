"""kubectl interoperability: discovery, OpenAPI validation, apply, get, watch, delete, wait, drain.

Skipped when ``kubectl`` is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from mcm.emulator import Emulator
from tests.conftest import MCM_CRDS_DIR

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine"),
]

MACHINE = """\
apiVersion: machine.sapcloud.io/v1alpha1
kind: Machine
metadata:
  name: m1
  namespace: default
  finalizers: ["example.com/hold"]
spec:
  class:
    kind: MachineClass
    name: c1
"""


class Kubectl:
    def __init__(self, kubeconfig: str, tmp_path: Path) -> None:
        self.base = [str(KUBECTL), "--kubeconfig", kubeconfig, "--cache-dir", str(tmp_path / "cache")]
        self.tmp_path = tmp_path

    def __call__(self, *args: str, check: bool = True, timeout: float = 30) -> str:
        result = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.base, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


@pytest.fixture
def kubectl(kubeconfig: str, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig, tmp_path)


def test_kubectl_apply_crds_and_machine_then_get_json(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "-f", str(MCM_CRDS_DIR))
    kubectl("wait", "--for=condition=Established", "crd/machines.machine.sapcloud.io", "--timeout=10s")
    manifest = tmp_path / "machine.yaml"
    manifest.write_text(MACHINE)
    assert "created" in kubectl("apply", "-f", str(manifest))
    assert "unchanged" in kubectl("apply", "-f", str(manifest))
    machine = json.loads(kubectl("get", "machine", "m1", "-o", "json"))
    assert machine["spec"]["class"]["name"] == "c1"
    assert machine["metadata"]["generation"] == 1
    listing = json.loads(kubectl("get", "mc", "-o", "json"))
    assert [i["metadata"]["name"] for i in listing["items"]] == ["m1"]
    header = kubectl("get", "machines").splitlines()[0].split()
    assert header == ["NAME", "STATUS", "AGE", "NODE"]


def test_kubectl_watch_sees_update(kubectl: Kubectl, tmp_path: Path, emulator: Emulator) -> None:
    manifest = tmp_path / "machine.yaml"
    manifest.write_text(MACHINE)
    kubectl("apply", "-f", str(manifest))
    proc = kubectl.popen("get", "machines", "--watch", "-o", "json", "--request-timeout=20s")
    seen = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"seen": "yes"' in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert emulator.wait_for(
            lambda: emulator.watches.open_watches().get("machines.machine.sapcloud.io") == 1, 15
        )
        kubectl("label", "machine", "m1", "seen=yes")
        assert seen.wait(10), "kubectl --watch did not print the update"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_kubectl_delete_with_finalizer_leaves_object_terminating(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "machine.yaml"
    manifest.write_text(MACHINE)
    kubectl("apply", "-f", str(manifest))
    kubectl("delete", "machine", "m1", "--wait=false")
    machine = json.loads(kubectl("get", "machine", "m1", "-o", "json"))
    assert machine["metadata"]["deletionTimestamp"]
    kubectl("patch", "machine", "m1", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    out = kubectl("get", "machine", "m1", check=False)
    assert out == ""
    assert (
        "NotFound"
        in subprocess.run(
            [*kubectl.base, "get", "machine", "m1"], capture_output=True, text=True, check=False
        ).stderr
    )


def test_kubectl_create_node_and_drain_evicts_pod(
    kubectl: Kubectl, tmp_path: Path, emulator: Emulator
) -> None:
    node = tmp_path / "node.yaml"
    node.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: node1\n")
    kubectl("create", "-f", str(node))
    emulator.seed(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p1", "namespace": "default"},
                "spec": {"nodeName": "node1", "containers": [{"name": "c", "image": "busybox:1"}]},
            }
        ]
    )
    out = kubectl("drain", "node1", "--force", "--grace-period=0", "--timeout=20s", timeout=40)
    assert "drained" in out
    assert json.loads(kubectl("get", "node", "node1", "-o", "json"))["spec"]["unschedulable"] is True
    assert emulator.get("pods", "default", "p1") is None
    assert emulator.stats.count("create", "pods", subresource="eviction") >= 1


def test_kubectl_over_tls_with_token(tmp_path: Path) -> None:
    from mcm.emulator import ClusterPair
    from mcm.emulator.kubeconfig import tls_available

    if not tls_available():
        pytest.skip("TLS material needs the openssl command")
    with ClusterPair.single(tmp_path, tls=True) as pair:
        kubectl = Kubectl(str(pair.control_kubeconfig), tmp_path)
        assert "namespace/default" in kubectl("get", "ns", "-o", "name")
        assert "emulator-admin" in kubectl("auth", "whoami")
        assert kubectl("auth", "can-i", "create", "machines").strip() == "yes"
        assert pair.control.stats.count(code=401) == 0


# --------------------------------------------------------------------------- everyday commands


def test_kubectl_create_builtins_sent_as_protobuf(
    kubectl: Kubectl, tmp_path: Path, emulator: Emulator
) -> None:
    data = tmp_path / "settings.conf"
    data.write_text("level=debug\n")
    assert "namespace/team created" in kubectl("create", "namespace", "team")
    kubectl("create", "secret", "generic", "creds", "--from-literal=user=admin", "--from-literal=pw=s3cr3t")
    kubectl("create", "configmap", "cfg", f"--from-file={data}")
    kubectl("create", "serviceaccount", "robot", "-n", "team")
    kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80")
    assert emulator.get("namespaces", "", "team") is not None
    secret = emulator.get("secrets", "default", "creds")
    assert secret is not None and secret["type"] == "Opaque"
    assert secret["data"] == {"user": "YWRtaW4=", "pw": "czNjcjN0"}
    config = emulator.get("configmaps", "default", "cfg")
    assert config is not None and config["data"] == {"settings.conf": "level=debug\n"}
    assert emulator.get("serviceaccounts", "team", "robot") is not None
    deployment = emulator.get(("apps", "deployments"), "default", "web")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["ports"][0]["containerPort"]) == ("nginx:1.27", 80)
    kubectl("run", "shell", "--image=busybox:1", "--labels=app=shell", "--", "sleep", "3600")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    pod = emulator.get("pods", "default", "shell")
    assert pod is not None and pod["spec"]["containers"][0]["args"] == ["sleep", "3600"]
    service = emulator.get("services", "default", "web")
    assert service is not None and service["spec"]["ports"][0]["port"] == 80
    assert service["spec"]["ports"][0]["targetPort"] == 8080
    assert emulator.stats.count(code=415) == 0


def test_kubectl_get_wide_prints_the_real_columns(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  namespace: default\n"
        "spec:\n  nodeName: n1\n  containers: [{name: c, image: busybox}]\n"
    )
    kubectl("apply", "-f", str(manifest))
    assert kubectl("get", "nodes").splitlines()[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    wide = kubectl("get", "nodes", "-o", "wide").splitlines()[0].split()
    assert wide[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert kubectl("get", "pods").splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    pods = kubectl("get", "pods", "-o", "wide").splitlines()
    assert pods[0].split()[5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert pods[1].split()[:2] == ["p1", "0/1"] and "n1" in pods[1].split()


def test_kubectl_auth_and_cluster_info(kubectl: Kubectl) -> None:
    assert kubectl("auth", "can-i", "create", "machines").strip() == "yes"
    assert "system:anonymous" in kubectl("auth", "whoami")
    assert kubectl("auth", "can-i", "--list").splitlines()[1].split()[:1] == ["*.*"]
    assert "Kubernetes control plane is running at http://127.0.0.1:" in kubectl("cluster-info")
    services = kubectl("get", "svc", "kubernetes").splitlines()
    assert services[1].split()[:5] == ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]


def test_kubectl_apply_server_side_creates_then_merges(
    kubectl: Kubectl, tmp_path: Path, emulator: Emulator
) -> None:
    manifest = tmp_path / "machine.yaml"
    manifest.write_text(MACHINE)
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifest))
    manifest.write_text(MACHINE.replace("name: c1", "name: c2"))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifest))
    machine = emulator.get(("machine.sapcloud.io", "machines"), "default", "m1")
    assert machine is not None and machine["spec"]["class"]["name"] == "c2"


def test_kubectl_explain_uses_openapi_v3(kubectl: Kubectl) -> None:
    spec = kubectl("explain", "machines.spec")
    assert "KIND:       Machine" in spec and "class\t<Object>" in spec
    assert "KIND:       MachineClass" in kubectl("explain", "machineclass")
    pod_spec = kubectl("explain", "pod.spec")
    assert "FIELD: spec <PodSpec>" in pod_spec and "containers\t<[]Container> -required-" in pod_spec


def test_kubectl_describe_diff_expose_dry_run_and_node_maintenance(
    kubectl: Kubectl, tmp_path: Path, emulator: Emulator
) -> None:
    manifest = tmp_path / "machine.yaml"
    manifest.write_text(MACHINE)
    kubectl("apply", "-f", str(manifest))
    manifest.write_text(MACHINE.replace("name: c1", "name: c2"))
    diff = subprocess.run(
        [*kubectl.base, "diff", "-f", str(manifest)], capture_output=True, text=True, timeout=30, check=False
    )
    assert diff.returncode == 1 and "+    name: c2" in diff.stdout, diff.stderr
    kubectl("create", "configmap", "dry", "--from-literal=a=b", "--dry-run=server")
    assert emulator.get("configmaps", "default", "dry") is None
    kubectl("run", "web", "--image=nginx", "--labels=app=web")
    assert "service/web exposed" in kubectl("expose", "pod", "web", "--port=80")
    assert kubectl("describe", "pod", "web").split()[:2] == ["Name:", "web"]
    node = tmp_path / "node.yaml"
    node.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n")
    kubectl("apply", "-f", str(node))
    kubectl("cordon", "n1")
    kubectl("taint", "node", "n1", "dedicated=infra:NoSchedule")
    spec = json.loads(kubectl("get", "node", "n1", "-o", "json"))["spec"]
    assert spec["unschedulable"] is True
    assert spec["taints"] == [
        {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},  # TaintNodesByCondition
    ]
    assert "dedicated=infra:NoSchedule" in kubectl("describe", "node", "n1")

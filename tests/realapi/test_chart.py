"""The Helm chart on the real pair: its rendered objects apply (server-side dry run, then for real),
and the controller run with the chart's ServiceAccount token under RBAC is allowed every call it
makes, while ``kubectl auth can-i --list`` for that account shows nothing it does not use."""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import Forbidden, NotFound
from mcm.runtime.client.resources import (
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
)
from mcm.testing.envtest import ControlPlane, ControlPlanePair
from tests.conftest import REALAPI_MARKS, REPO_ROOT, optional_module
from tests.realapi.env import eventually, unique

helm_python: Any = optional_module("helm_python")

KUBECTL = shutil.which("kubectl")
pytestmark = [
    *REALAPI_MARKS,
    pytest.mark.kubectl,
    pytest.mark.usefixtures("needs_kubectl", "needs_helm_python"),
]

CHART = REPO_ROOT / "charts" / "machine-controller"
EVERYTHING = yaml.safe_load((REPO_ROOT / "tests" / "app" / "values-everything.yaml").read_text())
TARGET_TEMPLATE = "rbac-target.yaml"
"""The template whose objects go to the target cluster (the rest to the control cluster)."""


def render(values: dict[str, Any], release: str, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """The chart's objects by template file name (NOTES excluded)."""
    manifests = helm_python.Chart.load(str(CHART)).render(values, name=release, namespace=namespace)
    by_template: dict[str, list[dict[str, Any]]] = {}
    for path, text in manifests.items():
        if path.endswith(".txt"):
            continue
        docs = [d for d in yaml.safe_load_all(text) if d]
        if docs:
            by_template[Path(path).name] = docs
    return by_template


def kubectl(kubeconfig: Path, *args: str, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        input=stdin,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def operator_crds() -> str:
    """Schemaless stand-ins for prometheus-operator's ServiceMonitor and PrometheusRule CRDs."""
    docs = []
    for kind, plural in (("ServiceMonitor", "servicemonitors"), ("PrometheusRule", "prometheusrules")):
        docs.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.monitoring.coreos.com"},
                "spec": {
                    "group": "monitoring.coreos.com",
                    "scope": "Namespaced",
                    "names": {
                        "kind": kind,
                        "plural": plural,
                        "singular": kind.lower(),
                        "listKind": f"{kind}List",
                    },
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    ],
                },
            }
        )
    return yaml.safe_dump_all(docs)


def local_provider() -> dict[str, Any]:
    """The chart has no default driver; these tests run the local provider (an explicit opt-in),
    its VM namespace unique per test (the chart creates it)."""
    return {"driver": {"local": {"enabled": True, "namespace": unique("vms")}}}


@pytest.mark.parametrize("local", [True, False], ids=["local-provider", "everything-on"])
def test_rendered_objects_apply_server_side_dry_run_then_for_real(
    real_pair: ControlPlanePair, tmp_path: Path, local: bool
) -> None:
    values = local_provider() if local else EVERYTHING
    release, namespace = unique("chart"), unique("chart-ns")
    objects = [o for docs in render(values, release, namespace).values() for o in docs]
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    kubeconfig = real_pair.control_kubeconfig
    if "ServiceMonitor" in {o["kind"] for o in objects}:
        kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=operator_crds())
        for plural in ("servicemonitors", "prometheusrules"):
            kubectl(kubeconfig, "wait", "--for=condition=Established", f"crd/{plural}.monitoring.coreos.com")
    namespaces = {namespace, *(o["metadata"].get("namespace") for o in objects)} - {None, "kube-system"}
    for name in sorted(namespaces):
        kubectl(kubeconfig, "create", "namespace", str(name))
    try:
        dry = kubectl(kubeconfig, "apply", "--server-side", "--dry-run=server", "-f", str(manifest))
        assert dry.count("serverside-applied (server dry run)") == len(objects), dry
        before = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "-f", str(manifest)],
            capture_output=True,
            text=True,
            check=False,
        )
        made_here = [o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] in namespaces]
        assert before.stderr.count("NotFound") == len(objects) - len(made_here), "the dry run created nothing"
        applied = kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
        assert applied.count("serverside-applied") == len(objects), applied
        listed = kubectl(kubeconfig, "get", "-f", str(manifest), "-o", "name").split()
        assert len(listed) == len(objects)
    finally:
        kubectl(kubeconfig, "delete", "-f", str(manifest), "--wait=false", check=False)
        for name in sorted(namespaces):
            kubectl(kubeconfig, "delete", "namespace", str(name), "--wait=false", check=False)


# --- the chart's RBAC, for real ----------------------------------------------------------------


Call = tuple[str, str, str]
"""(verb, API group, resource[/subresource])."""


def _call(verb: str, resource: str) -> Call:
    """Split kubectl's ``<resource>[.<group>][/<sub>]`` (``machines.machine.sapcloud.io/status``)."""
    name, _, group = resource.partition(".")
    if "/" in group:
        group, subresource = group.split("/", 1)
        name = f"{name}/{subresource}"
    return verb, group, name


@dataclass
class RbacRun:
    """What one controller run under the chart's RBAC did, and what its account may do."""

    user: str
    namespace: str
    calls: dict[str, set[Call]] = field(default_factory=dict)
    """Per cluster: what the account called."""
    forbidden: list[str] = field(default_factory=list)
    granted: dict[str, set[Call]] = field(default_factory=dict)
    """Per cluster: what ``kubectl auth can-i --list`` shows beyond what every authenticated
    account may do."""
    kubeconfigs: dict[str, Path] = field(default_factory=dict)
    """Per cluster: a kubeconfig authenticating as the chart's ServiceAccount."""


def audited_calls(plane: ControlPlane, user: str) -> tuple[set[Call], list[str]]:
    """The calls ``user`` made to ``plane`` (from its audit log), and those answered 403."""
    calls: set[Call] = set()
    forbidden: list[str] = []
    for event in plane.audit_events(user):
        ref = event.get("objectRef") or {}
        if not ref.get("resource"):
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        calls.add((event["verb"], ref.get("apiGroup") or "", resource))
        if (event.get("responseStatus") or {}).get("code") == 403:
            forbidden.append(f"{plane.name}: {event['verb']} {event.get('requestURI')}")
    return calls, forbidden


def can_i_list(plane: ControlPlane, user: str, namespace: str) -> set[Call]:
    """The resource rules of ``kubectl auth can-i --list --as=<user> -n <namespace>``."""
    out = kubectl(plane.kubeconfig, "auth", "can-i", "--list", f"--as={user}", "-n", namespace)
    calls: set[Call] = set()
    for line in out.splitlines()[1:]:
        if not line.strip() or line.startswith(" "):
            continue  # non-resource URLs have no resource column
        resource = line.split()[0]
        calls.update(_call(verb, resource) for verb in line[line.rindex("[") + 1 : line.rindex("]")].split())
    return calls


def granted_beyond_baseline(plane: ControlPlane, user: str, namespaces: tuple[str, ...]) -> set[Call]:
    """What ``user`` may do in ``namespaces`` beyond what an account without bindings may."""
    baseline_user = "system:serviceaccount:default:nobody-at-all"
    granted: set[Call] = set()
    for namespace in namespaces:
        granted |= can_i_list(plane, user, namespace) - can_i_list(plane, baseline_user, namespace)
    return granted


def _apply(plane: ControlPlane, objects: list[dict[str, Any]], tmp_path: Path) -> None:
    manifest = tmp_path / f"{plane.name}-{unique('objects')}.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    kubectl(plane.kubeconfig, "apply", "--server-side", "-f", str(manifest))


def _workload(target: ClusterClient, namespace: str, node: str) -> None:
    """On ``node``: a pod a PDB holds (forcing the drain timeout's deletion) and a PV pod."""
    pod_spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]}
    pods = target.resource(PODS)
    pods.create(
        {"metadata": {"name": "held", "labels": {"app": "held"}}, "spec": pod_spec}, namespace=namespace
    )
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    pods.patch("held", ready, namespace=namespace, subresource="status")
    pdb = {
        "metadata": {"name": "held"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}},
    }
    target.resource(POD_DISRUPTION_BUDGETS).create(pdb, namespace=namespace)
    pv = {
        "metadata": {"name": f"{namespace}-pv"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "csi.example.com", "volumeHandle": namespace},
        },
    }
    target.resource(PERSISTENT_VOLUMES).create(pv)
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": pv["metadata"]["name"],
        },
    }
    target.resource(PERSISTENT_VOLUME_CLAIMS).create(claim, namespace=namespace)
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    pods.create({"metadata": {"name": "db"}, "spec": {**pod_spec, "volumes": [volume]}}, namespace=namespace)


def _controller_args(deployment: dict[str, Any], control: Path, target: Path) -> list[str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    replaced = {
        "--control-kubeconfig": str(control),
        "--target-kubeconfig": str(target),
        "--address": "127.0.0.1",
    }
    args = []
    for arg in container["args"]:
        flag = arg.split("=", 1)[0]
        if flag == "--port":
            continue  # the test's Controller picks a free port
        args.append(f"{flag}={replaced[flag]}" if flag in replaced else arg)
    return args


@pytest.fixture(scope="module")
def rbac_run(real_pair: ControlPlanePair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RbacRun]:
    """The chart (defaults, fast timeouts) installed into both clusters, then the controller run
    as its ServiceAccount through creation, deletion with a drain (evictions refused by a PDB,
    then the drain timeout's deletions), orphan collection and a SIGTERM."""
    tmp_path = tmp_path_factory.mktemp("rbac")
    release, namespace = unique("rbac"), unique("rbac-ns")
    values = {
        **local_provider(),
        "controller": {
            "machineDrainTimeout": "5s",
            "machineSafetyOrphanVMsPeriod": "2s",
            "logFormat": "json",
        },
    }
    templates = render(values, release, namespace)
    control, target = real_pair.control, real_pair.target
    account = templates["serviceaccount.yaml"][0]
    user = f"system:serviceaccount:{namespace}:{account['metadata']['name']}"
    rbac_kinds = {
        "Namespace",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    control_objects = [
        o
        for name, docs in templates.items()
        if name != TARGET_TEMPLATE and not name.startswith("manager-")  # the manager's: test_manager_chart.py
        for o in docs
        if o["kind"] in rbac_kinds
    ]
    for plane in (control, target):
        plane.client().resource(NAMESPACES).create({"metadata": {"name": namespace}})
        _apply(plane, [account], tmp_path)
    _apply(control, control_objects, tmp_path)
    _apply(target, templates.get(TARGET_TEMPLATE, []), tmp_path)
    kubeconfigs = {}
    for plane in (control, target):
        token = plane.service_account_token(namespace, account["metadata"]["name"])
        kubeconfigs[plane.name] = plane.write_kubeconfig(
            tmp_path / f"{plane.name}-sa.kubeconfig", token=token
        )
    deployment = templates["deployment.yaml"][0]
    args = _controller_args(deployment, kubeconfigs["control"], kubeconfigs["target"])

    admin_control = control.client()
    admin_target = target.client()
    target_ns = namespace
    admin_control.resource(SECRETS).create(
        {
            "metadata": {"name": "userdata"},
            "stringData": {"userData": "#!/bin/sh\necho <<BOOTSTRAP_TOKEN>>\n"},
        },
        namespace=namespace,
    )
    machine_class = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": "local"},
        "provider": "local",
        "providerSpec": {"bootDelaySeconds": 0.2},
        "secretRef": {"name": "userdata", "namespace": namespace},
    }
    admin_control.resource(MACHINE_CLASSES).create(machine_class, namespace=namespace)
    names = [unique("rbac-m") for _ in range(2)]
    spec = {"class": {"kind": "MachineClass", "name": "local"}}
    machines = admin_control.resource(MACHINES)
    run = RbacRun(user, namespace, kubeconfigs=kubeconfigs)
    controller = _SaController(tmp_path, args)
    try:
        for name in names:
            machines.create(
                {
                    "apiVersion": "machine.sapcloud.io/v1alpha1",
                    "kind": "Machine",
                    "metadata": {"name": name},
                    "spec": spec,
                },
                namespace=namespace,
            )

        def phases() -> dict[str, str]:
            items = machines.list(namespace=namespace).get("items") or []
            return {
                m["metadata"]["name"]: ((m.get("status") or {}).get("currentStatus") or {}).get("phase", "")
                for m in items
            }

        eventually(
            lambda: all(phases().get(n) == "Running" for n in names),
            "machines Running under RBAC",
            timeout=90,
        )
        _workload(admin_target, target_ns, names[0])
        for name in names:
            machines.delete(name, namespace=namespace)
        eventually(lambda: phases() == {}, "machines deleted under RBAC", timeout=90)
        assert controller.stop() == 0, controller.log_text()
    finally:
        controller.stop(signal.SIGKILL)
        for name in names:
            try:
                admin_target.resource(NODES).delete(name)
            except NotFound:
                pass
    for plane in (control, target):
        calls, forbidden = audited_calls(plane, user)
        run.calls[plane.name] = calls
        run.forbidden += forbidden
        run.granted[plane.name] = granted_beyond_baseline(plane, user, (namespace, "kube-system"))
    yield run


class _SaController:
    """``machine-controller`` with the chart's arguments (and a free ``--port``)."""

    def __init__(self, tmp_path: Path, args: list[str]) -> None:
        from tests.app.test_command import _command, _env, _free_port

        self.log_path = tmp_path / "controller.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            _command(*args, f"--port={_free_port()}"), stdout=self._log, stderr=subprocess.STDOUT, env=_env()
        )

    def log_text(self) -> str:
        return self.log_path.read_text()[-5000:]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(60)
        self._log.close()
        return code


def test_every_call_the_controller_makes_under_the_charts_rbac_is_allowed(rbac_run: RbacRun) -> None:
    assert rbac_run.forbidden == []
    assert ("create", "", "pods/eviction") in rbac_run.calls["target"], "the drain evicted through the API"
    assert ("delete", "", "pods") in rbac_run.calls["target"], "the drain timeout deleted the held pod"
    assert ("update", "coordination.k8s.io", "leases") in rbac_run.calls["control"], "leader election ran"


NOT_REACHED_HERE: dict[str, set[Call]] = {
    "control": {("delete", "machine.sapcloud.io", "machines")},  # a Node deleted by a user
    "target": {
        ("delete", "storage.k8s.io", "volumeattachments"),  # a forced drain of a node with attachments
        ("get", "", "pods"),  # the drain's live read of a pod it waits for
        ("patch", "", "nodes/status"),  # the local provider's simulated kubelet heartbeat (every 10 s)
    },
}
"""Grants of code paths this run does not reach; tests/app/test_chart_rbac.py reaches every one
(on the emulator) and fails when any grant is unused there."""


def test_the_charts_account_may_do_nothing_the_controller_does_not_use(rbac_run: RbacRun) -> None:
    for cluster, calls in NOT_REACHED_HERE.items():
        assert calls <= rbac_run.granted[cluster], f"{cluster}: an exemption the chart no longer grants"
    unused = {
        cluster: sorted(
            " ".join(call) for call in granted - rbac_run.calls[cluster] - NOT_REACHED_HERE[cluster]
        )
        for cluster, granted in rbac_run.granted.items()
    }
    assert unused == {"control": [], "target": []}, "granted but never called:\n" + "\n".join(
        f"{cluster}: {call}" for cluster, calls in unused.items() for call in calls
    )


# --- the admission policies, for real ----------------------------------------------------------------


def _as_account(rbac_run: RbacRun, cluster: str) -> ClusterClient:
    from mcm.runtime.client import load_config

    return load_config(str(rbac_run.kubeconfigs[cluster]), qps=-1, burst=0)


def _refused(write: Any) -> str:
    """The message of the 403 a write by the chart's account gets ("" when it was allowed)."""
    try:
        write()
    except Forbidden as err:
        return err.message
    return ""


def test_the_account_cannot_mint_a_service_account_token_but_makes_bootstrap_tokens(
    rbac_run: RbacRun, real_pair: ControlPlanePair
) -> None:
    """Issue 36 #8: ``create`` on kube-system Secrets let the controller's identity create a
    ``kubernetes.io/service-account-token`` Secret for any kube-system ServiceAccount and read its
    token back. The chart's policy lets it create and delete bootstrap tokens only (the run above
    made and deleted its machines' tokens under it)."""
    secrets = _as_account(rbac_run, "target").resource(SECRETS)
    policy = "ValidatingAdmissionPolicy 'rbac-"
    sa_token = {
        "metadata": {
            "name": unique("minted"),
            "annotations": {"kubernetes.io/service-account.name": "default"},
        },
        "type": "kubernetes.io/service-account-token",
    }
    assert policy in _refused(lambda: secrets.create(sa_token, namespace="kube-system"))
    disguised = {"metadata": {"name": f"bootstrap-token-{unique('x')[-6:]}"}, "type": "Opaque"}
    assert policy in _refused(lambda: secrets.create(disguised, namespace="kube-system"))
    token_id = unique("t")[-6:]
    bootstrap = {
        "metadata": {"name": f"bootstrap-token-{token_id}"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": token_id, "token-secret": "0123456789abcdef"},
    }
    assert _refused(lambda: secrets.create(bootstrap, namespace="kube-system")) == ""
    assert _refused(lambda: secrets.delete(bootstrap["metadata"]["name"], namespace="kube-system")) == ""
    other = unique("kept")
    real_pair.target.client().resource(SECRETS).create({"metadata": {"name": other}}, namespace="kube-system")
    assert policy in _refused(lambda: secrets.delete(other, namespace="kube-system"))


def test_the_account_changes_nothing_but_finalizers_of_the_control_namespaces_secrets(
    rbac_run: RbacRun, real_pair: ControlPlanePair
) -> None:
    """Issue 36 #11: in the release namespace the controller could rewrite Helm's release records
    (a tampered manifest is applied by the next rollback). It may change finalizers only."""
    name = "sh.helm.release.v1.rbac.v1"
    record = {
        "metadata": {"name": name, "labels": {"owner": "helm", "status": "superseded"}},
        "type": "helm.sh/release.v1",
        "data": {"release": "H4sIAAAAAAAA"},
    }
    real_pair.control.client().resource(SECRETS).create(record, namespace=rbac_run.namespace)
    secrets = _as_account(rbac_run, "control").resource(SECRETS)

    def changed(change: Any) -> Any:
        def write() -> None:
            live = secrets.get(name, namespace=rbac_run.namespace)
            change(live)
            secrets.update(live, namespace=rbac_run.namespace)

        return write

    policy = "ValidatingAdmissionPolicy 'rbac-"
    assert policy in _refused(changed(lambda s: s["data"].update(release="dGFtcGVyZWQ=")))
    assert policy in _refused(changed(lambda s: s["metadata"]["labels"].update(status="deployed")))
    finalizer = "machine.sapcloud.io/machine-controller"
    assert _refused(changed(lambda s: s["metadata"].update(finalizers=[finalizer]))) == ""
    assert _refused(changed(lambda s: s["metadata"].update(finalizers=[]))) == ""

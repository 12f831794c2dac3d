"""The chart's machine-controller-manager: a Deployment of its own beside the controller (on by
default, ``manager.enabled`` turns it off), valid flags of the command, its own ServiceAccount,
selectors that never match the controller's pods, and the target kubeconfig it is given."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.app.manager.cli import parse_options
from tests.app.test_chart import EVERYTHING, MINIMAL, REPO, _by_kind, _render

MANAGER = "machine-controller-manager"


def _manager_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in _by_kind(objects, "Deployment") if o["metadata"]["name"].endswith("-manager")]
    return dict(deployment["spec"]["template"]["spec"])


def _manager_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _manager_pod(objects)["containers"]
    assert container["name"] == MANAGER
    return dict(container)


def _manager_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/name") == MANAGER]


@pytest.mark.parametrize("values", [MINIMAL, EVERYTHING], ids=["minimal", "everything-on"])
def test_the_managers_args_are_valid_flags_of_the_command(values: dict[str, Any]) -> None:
    objects = _render(values)
    container = _manager_container(objects)
    assert container["command"] == [MANAGER]
    options = parse_options(container["args"])
    assert options.port == 10258 == container["ports"][0]["containerPort"]
    assert options.control_kubeconfig == "inClusterConfig"
    assert options.namespace == values.get("controlNamespace", "machines")
    assert (options.concurrent_syncs, options.safety_up, options.safety_down) == (10, 2, 1)
    assert options.machine_safety_overshooting_period == 60.0
    assert options.shutdown_grace_period == 30.0
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    controller_image = next(
        c["image"]
        for o in _by_kind(objects, "Deployment")
        for c in o["spec"]["template"]["spec"]["containers"]
        if c["name"] == "machine-controller"
    )
    assert container["image"] == controller_image, "one image holds both commands"


def test_manager_values_reach_its_flags() -> None:
    values = {
        **MINIMAL,
        "manager": {
            "replicaCount": 2,
            "leaderElect": False,
            "concurrentSyncs": 4,
            "safetyUp": 5,
            "safetyDown": 2,
            "machineSafetyOvershootingPeriod": "30s",
            "autoscalerScaleDownAnnotationDuringRollout": False,
            "verbosity": 4,
            "logFormat": "text",
            "extraArgs": ["--min-resync-period=1h"],
            "image": {"repository": "m/mcm", "tag": "9.9"},
        },
    }
    objects = _render(values)
    container = _manager_container(objects)
    options = parse_options(container["args"])
    assert options.leader_elect is True, "forced on with 2 replicas"
    assert (options.concurrent_syncs, options.safety_up, options.safety_down) == (4, 5, 2)
    assert options.machine_safety_overshooting_period == 30.0
    assert options.autoscaler_scaledown_annotation_during_rollout is False
    assert (options.v, options.log_format, options.min_resync_period) == (4, "text", 3600.0)
    assert container["image"] == "m/mcm:9.9"
    (pdb,) = [o for o in _by_kind(objects, "PodDisruptionBudget") if o in _manager_objects(objects)]
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == MANAGER


def test_manager_enabled_false_renders_nothing_of_it() -> None:
    off = _render({**MINIMAL, "manager": {"enabled": False}})
    assert _manager_objects(off) == []
    assert [o["metadata"]["name"] for o in off if "manager" in o["metadata"]["name"]] == []


def test_the_manager_has_its_own_account_and_the_controller_gets_none_of_its_rights() -> None:
    objects = _render(MINIMAL)
    pod = _manager_pod(objects)
    account = pod["serviceAccountName"]
    assert account == "mc-machine-controller-manager"
    assert account in {o["metadata"]["name"] for o in _by_kind(objects, "ServiceAccount")}
    for binding in [*_by_kind(objects, "RoleBinding"), *_by_kind(objects, "ClusterRoleBinding")]:
        names = {s["name"] for s in binding["subjects"]}
        assert len(names) == 1, "no binding is shared by both accounts"
        if binding["roleRef"]["name"].startswith("mc-machine-controller-manager"):
            assert names == {account}


def test_no_selector_of_one_deployment_matches_the_others_pods() -> None:
    objects = _render(EVERYTHING)
    deployments = _by_kind(objects, "Deployment")
    pods = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in deployments}
    selectors = [
        (o["kind"], o["metadata"]["name"], o["spec"].get("selector") or o["spec"].get("podSelector"))
        for o in objects
        if o["kind"] in ("Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy")
    ]
    for kind, name, selector in selectors:
        labels = selector.get("matchLabels", selector)
        matched = [pod for pod, have in pods.items() if all(have.get(k) == v for k, v in labels.items())]
        assert len(matched) == 1, f"{kind} {name} selects {matched}"


@pytest.mark.parametrize(
    ("target", "manager_target", "argument", "secret"),
    [
        ({}, {}, "--target-kubeconfig=inClusterConfig", None),
        ({"none": True}, {}, "--target-kubeconfig=none", None),
        ({"existingSecret": "shoot"}, {}, "--target-kubeconfig=/etc/", "shoot"),
        (
            {"existingSecret": "shoot"},
            {"existingSecret": "nodes-only"},
            "--target-kubeconfig=/etc/",
            "nodes-only",
        ),
    ],
    ids=["in-cluster", "none", "the-controllers-kubeconfig", "its-own-kubeconfig"],
)
def test_the_managers_target_cluster(
    target: dict[str, Any], manager_target: dict[str, Any], argument: str, secret: str | None
) -> None:
    values = {**MINIMAL, "targetCluster": target, "manager": {"targetCluster": manager_target}}
    objects = _render(values)
    pod = _manager_pod(objects)
    (container,) = pod["containers"]
    assert any(arg.startswith(argument) for arg in container["args"])
    volumes = {v["name"]: v for v in pod["volumes"]}
    if secret is None:
        assert "target-kubeconfig" not in volumes
    else:
        assert volumes["target-kubeconfig"]["secret"]["secretName"] == secret
        assert volumes["target-kubeconfig"]["secret"]["defaultMode"] == 0o400
    cluster_roles = [o["metadata"]["name"] for o in _by_kind(objects, "ClusterRole")]
    assert ("mc-machine-controller-manager-target" in cluster_roles) == (not target)


def test_the_chart_readme_says_why_the_manager_has_its_own_deployment() -> None:
    readme = (REPO / "charts" / "machine-controller" / "README.md").read_text(encoding="utf-8")
    assert "Deployment of its own" in readme and "ServiceAccount" in readme


@pytest.mark.parametrize(
    ("manager", "message"),
    [
        ({"enabeld": False}, "additional properties 'enabeld' not allowed"),
        ({"safetyUp": -1}, "/manager/safetyUp'"),
        ({"machineSafetyOvershootingPeriod": "0s"}, "/manager/machineSafetyOvershootingPeriod'"),
        ({"machineSafetyOvershootingPeriod": "60"}, "/manager/machineSafetyOvershootingPeriod'"),
        ({"logFormat": "xml"}, "/manager/logFormat'"),
        ({"targetCluster": {"kubeconfig": "inline"}}, "additional properties 'kubeconfig' not allowed"),
    ],
)
def test_the_schema_checks_the_managers_values(manager: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match="schema") as info:
        _render({**MINIMAL, "manager": manager})
    assert message in str(info.value)

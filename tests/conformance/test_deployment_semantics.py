"""Conformance: apps/v1 Deployments (defaults, validation, generation, status and scale subresources)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conformance import wire
from tests.conformance.semantics_support import (
    Cluster,
    cluster,
    emulator_deviation,
    emulator_only,
    namespace,
    within,
)

__all__ = ["cluster", "namespace"]

LABELS = {"app": "web"}


def deployment_body(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]},
            },
        },
    }
    body["spec"].update(spec)
    return body


@pytest.fixture
def apps(cluster: Cluster) -> client.AppsV1Api:
    return client.AppsV1Api(cluster.api)


@pytest.fixture
def held(cluster: Cluster) -> Iterator[None]:
    """On the emulator, keep the simulated deployment controller from writing statuses."""
    if cluster.emulator is None:
        yield
        return
    controller = cluster.emulator.controllers.deployments
    controller.hold()
    yield
    controller.release()


def invalid_causes(err: pytest.ExceptionInfo[client.ApiException]) -> list[tuple[str, str]]:
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid"
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


def test_discovery_serves_deployments_with_scale_and_status(cluster: Cluster) -> None:
    resources = {r.name: r for r in client.AppsV1Api(cluster.api).get_api_resources().resources}
    assert resources["deployments"].kind == "Deployment"
    assert resources["deployments"].namespaced is True
    assert "deploy" in (resources["deployments"].short_names or [])
    assert resources["deployments/scale"].kind == "Scale"
    assert resources["deployments/status"].kind == "Deployment"


def test_create_applies_the_apps_v1_defaults_and_resets_status(
    apps: client.AppsV1Api, namespace: str, held: None
) -> None:
    body = deployment_body("d")
    body["status"] = {"replicas": 9}
    created = apps.create_namespaced_deployment(namespace, body)
    assert created.metadata.generation == 1
    assert created.spec.replicas == 1
    assert created.spec.strategy.type == "RollingUpdate"
    assert created.spec.strategy.rolling_update.max_unavailable == "25%"
    assert created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.revision_history_limit == 10
    assert created.spec.progress_deadline_seconds == 600
    pod_spec = created.spec.template.spec
    assert (pod_spec.restart_policy, pod_spec.dns_policy, pod_spec.termination_grace_period_seconds) == (
        "Always",
        "ClusterFirst",
        30,
    )
    assert pod_spec.scheduler_name == "default-scheduler"
    assert pod_spec.containers[0].image_pull_policy == "Always"
    assert pod_spec.containers[0].termination_message_path == "/dev/termination-log"
    assert pod_spec.tolerations is None
    assert created.status.replicas is None


def test_generation_follows_the_spec_only(apps: client.AppsV1Api, namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment_body("g"))
    labelled = apps.patch_namespaced_deployment("g", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("g", namespace, {"spec": {"replicas": 2}})
    assert scaled.metadata.generation == 2


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"replicas": -1}, "spec.replicas", "must be greater than or equal to 0"),
        (
            {"selector": {"matchLabels": {"app": "other"}}},
            "spec.template.metadata.labels",
            "`selector` does not match template `labels`",
        ),
        ({"selector": None}, "spec.selector", "Required value"),
        (
            {"strategy": {"type": "Sideways"}},
            "spec.strategy",
            'Unsupported value: {"Type":"Sideways","RollingUpdate":null}',
        ),
    ],
)
def test_invalid_specs_are_422(
    cluster: Cluster, namespace: str, spec: dict[str, Any], field: str, message: str
) -> None:
    body = deployment_body("bad")
    body["spec"].update(spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    # raw: the typed client refuses a body without a selector
    reply = wire.call(cluster, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body)
    assert reply.status == 422
    causes = [(c["field"], c["message"]) for c in reply.json()["details"]["causes"]]
    assert any(f == field and message in m for f, m in causes), causes


def test_the_template_must_restart_always(apps: client.AppsV1Api, namespace: str) -> None:
    body = deployment_body("never")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(namespace, body)
    assert (
        "spec.template.spec.restartPolicy",
        'Unsupported value: "Never": supported values: "Always"',
    ) in invalid_causes(err)


def test_the_selector_is_immutable(apps: client.AppsV1Api, namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment_body("sel"))
    patch = {
        "spec": {
            "selector": {"matchLabels": {"app": "web", "tier": "x"}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "x"}}},
        }
    }
    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment("sel", namespace, patch)
    assert any(f == "spec.selector" and m.endswith("field is immutable") for f, m in invalid_causes(err))


def test_status_and_spec_are_written_separately(apps: client.AppsV1Api, namespace: str, held: None) -> None:
    apps.create_namespaced_deployment(namespace, deployment_body("s"))
    written = apps.patch_namespaced_deployment_status(
        "s", namespace, {"spec": {"replicas": 5}, "status": {"replicas": 7}}
    )
    assert (written.spec.replicas, written.status.replicas) == (1, 7)
    written = apps.patch_namespaced_deployment(
        "s", namespace, {"spec": {"replicas": 2}, "status": {"replicas": 0}}
    )
    assert (written.spec.replicas, written.status.replicas) == (2, 7)


def test_the_scale_subresource_reads_and_writes_replicas(apps: client.AppsV1Api, namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment_body("sc", replicas=2))
    scale = apps.read_namespaced_deployment_scale("sc", namespace)
    assert (scale.kind, scale.api_version, scale.spec.replicas) == ("Scale", "autoscaling/v1", 2)
    apps.patch_namespaced_deployment_scale("sc", namespace, {"spec": {"replicas": 4}})
    deployment = apps.read_namespaced_deployment("sc", namespace)
    assert (deployment.spec.replicas, deployment.metadata.generation) == (4, 2)


def test_strict_field_validation_knows_the_deployment_fields(cluster: Cluster, namespace: str) -> None:
    body = deployment_body("strict")
    body["spec"]["template"]["spec"]["containers"][0]["bogus"] = 1
    reply = wire.call(
        cluster, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments?fieldValidation=Strict", body
    )
    assert reply.status == 400
    assert reply.json()["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].bogus"'
    )
    ok = wire.call(
        cluster,
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments?fieldValidation=Strict",
        deployment_body("ok"),
    )
    assert ok.status == 201


@pytest.mark.deviation  # real: needs the deployment and ReplicaSet controllers, a scheduler, kubelets
def test_the_deployment_controller_reports_the_replicas_available(
    cluster: Cluster, apps: client.AppsV1Api, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, deployment_body("avail", replicas=2))

    def available() -> bool:
        status = apps.read_namespaced_deployment_status("avail", namespace).status
        return status.available_replicas == 2 and status.observed_generation == 1

    # 10 s like the other deviation tests: the emulator's bound, and on the real pair (no
    # scheduler, no kubelets) the replicas never become available, so a longer wait only idles.
    emulator_deviation(within(10.0, available), "needs a scheduler and kubelets for available replicas")
    conditions = {
        c.type: (c.status, c.reason)
        for c in apps.read_namespaced_deployment("avail", namespace).status.conditions
    }
    assert conditions["Available"] == ("True", "MinimumReplicasAvailable")


def test_the_simulated_controller_can_be_held(
    cluster: Cluster, apps: client.AppsV1Api, namespace: str
) -> None:
    controller = emulator_only(cluster).controllers.deployments
    controller.hold()
    try:
        apps.create_namespaced_deployment(namespace, deployment_body("h", replicas=3))
        apps.patch_namespaced_deployment("h", namespace, {"metadata": {"labels": {"poke": "1"}}})
        assert apps.read_namespaced_deployment("h", namespace).status.replicas is None
    finally:
        controller.release()
    cluster.wait(
        lambda: apps.read_namespaced_deployment("h", namespace).status.available_replicas == 3, "the release"
    )
    scaled = apps.patch_namespaced_deployment("h", namespace, {"spec": {"replicas": 0}})
    assert scaled.metadata.generation == 2

    def scaled_to_zero() -> bool:
        status = apps.read_namespaced_deployment("h", namespace).status
        return (
            status.observed_generation == 2 and status.replicas is None and status.available_replicas is None
        )

    cluster.wait(scaled_to_zero, "the scale to zero")

"""Conformance: per-kind create defaults, normalisation and generation rules."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.semantics_support import (
    Cluster,
    cleanup_node,
    cluster,
    namespace,
    node_body,
    pod_body,
    unique,
)
from tests.conformance.wire import call

__all__ = ["cluster", "namespace"]

GROUP, VERSION = "machine.sapcloud.io", "v1alpha1"


@pytest.fixture
def node_name(cluster: Cluster) -> Iterator[str]:
    name = unique("conf-node")
    yield name
    cleanup_node(cluster, name)


def test_pod_create_resets_status_and_defaults(cluster: Cluster, namespace: str) -> None:
    body = pod_body("p")
    body["status"] = {"phase": "Running"}
    created = cluster.core.create_namespaced_pod(namespace, body)
    assert created.status.phase == "Pending"
    assert created.spec.termination_grace_period_seconds == 30
    assert created.spec.restart_policy == "Always"
    assert created.spec.dns_policy == "ClusterFirst"
    assert created.spec.containers[0].termination_message_path == "/dev/termination-log"
    assert created.spec.containers[0].image_pull_policy == "IfNotPresent"
    tolerations = {(t.key, t.effect, t.toleration_seconds) for t in created.spec.tolerations}
    assert ("node.kubernetes.io/not-ready", "NoExecute", 300) in tolerations


def test_node_create_keeps_status(cluster: Cluster, node_name: str) -> None:
    body = node_body(node_name)
    body["status"] = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]
    }
    created = cluster.core.create_node(body)
    assert [(c.type, c.status) for c in created.status.conditions] == [("Ready", "True")]


def test_quantity_number_returned_as_string(cluster: Cluster, node_name: str) -> None:
    body = node_body(node_name)
    body["status"] = {"capacity": {"cpu": 2, "memory": "8Gi"}}
    # the typed client refuses a number here, so the body goes out untyped
    method, url, headers, payload, _ = cluster.api.param_serialize(
        "POST",
        "/api/v1/nodes",
        header_params={"Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = cluster.api.call_api(method, url, headers, payload)
    response.read()
    assert response.status == 201
    response = cluster.core.read_node(node_name, _preload_content=False)
    raw = json.loads(response.data)
    assert raw["status"]["capacity"] == {"cpu": "2", "memory": "8Gi"}
    assert cluster.core.read_node(node_name).status.capacity["cpu"] == "2"


def test_time_fields_normalised_to_seconds_z(cluster: Cluster, node_name: str) -> None:
    body = node_body(node_name)
    body["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "ok",
                "lastTransitionTime": "2026-01-01T01:00:00.123+01:00",
            }
        ]
    }
    cluster.core.create_node(body)
    raw = json.loads(cluster.core.read_node(node_name, _preload_content=False).data)
    assert raw["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_secret_stringdata_merged_into_data(cluster: Cluster, namespace: str) -> None:
    body = {
        "metadata": {"name": "s"},
        "data": {"a": base64.b64encode(b"old").decode()},
        "stringData": {"a": "new", "b": "x"},
    }
    created = cluster.core.create_namespaced_secret(namespace, body)
    assert created.type == "Opaque"
    assert created.string_data is None
    assert base64.b64decode(created.data["a"]) == b"new"
    assert base64.b64decode(created.data["b"]) == b"x"


def test_lease_microtime_roundtrip_and_without_fraction_is_400(cluster: Cluster, namespace: str) -> None:
    leases = client.CoordinationV1Api(cluster.api)
    body = {
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.123456Z"},
    }
    leases.create_namespaced_lease(namespace, body)
    raw = json.loads(leases.read_namespaced_lease("l", namespace, _preload_content=False).data)
    assert raw["spec"]["renewTime"] == "2026-01-01T00:00:00.123456Z"
    bad = {"metadata": {"name": "l2"}, "spec": {"renewTime": "2026-01-01T00:00:00+00:00"}}
    with pytest.raises(client.ApiException) as err:
        leases.create_namespaced_lease(namespace, bad)
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"].startswith(
        'Lease in version "v1" cannot be handled as a Lease:'
    )


def test_generation_pdb_spec_only(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}
    created = cluster.policy.create_namespaced_pod_disruption_budget(namespace, body)
    assert created.metadata.generation == 1
    labelled = cluster.policy.patch_namespaced_pod_disruption_budget(
        "b", namespace, {"metadata": {"labels": {"x": "y"}}}
    )
    assert labelled.metadata.generation == 1
    changed = cluster.policy.patch_namespaced_pod_disruption_budget(
        "b", namespace, {"spec": {"minAvailable": 2}}
    )
    assert changed.metadata.generation == 2


def test_generation_machineclass_bumps_on_any_top_level_change(cluster: Cluster, namespace: str) -> None:
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MachineClass",
        "metadata": {"name": "mc"},
        "providerSpec": {"size": "small"},
        "secretRef": {"name": "s", "namespace": namespace},
        "provider": "test",
    }
    created = cluster.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "machineclasses", body
    )
    assert created["metadata"]["generation"] == 1
    labelled = cluster.custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "machineclasses", "mc", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 1
    changed = cluster.custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "machineclasses", "mc", {"providerSpec": {"size": "large"}}
    )
    assert changed["metadata"]["generation"] == 2


def test_pod_update_may_only_change_images(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("p"))
    image = {"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    assert cluster.core.patch_namespaced_pod("p", namespace, image).spec.containers[0].image.endswith("3.10")
    with pytest.raises(client.ApiException) as err:
        cluster.core.patch_namespaced_pod("p", namespace, {"spec": {"restartPolicy": "Never"}})
    assert err.value.status == 422


def test_node_taint_validation_422(cluster: Cluster, node_name: str) -> None:
    cluster.core.create_node(node_body(node_name))
    with pytest.raises(client.ApiException) as err:
        cluster.core.patch_node(node_name, {"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}})
    assert err.value.status == 422
    assert json.loads(err.value.body)["details"]["causes"][0]["field"] == "metadata.taints[0].effect"


def test_a_new_node_gets_the_not_ready_taint(cluster: Cluster) -> None:
    """TaintNodesByCondition admission: every new Node starts tainted not-ready (the node lifecycle
    controller lifts it once Ready); later writes may drop it."""
    name = unique("conf-node")
    body = node_body(name)
    body["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    try:
        created = call(cluster, "POST", "/api/v1/nodes", body).json()
        assert created["spec"]["taints"] == [
            {"key": "dedicated", "value": "x", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        ]
        untainted = cluster.core.patch_node(name, {"spec": {"taints": None}})
        assert untainted.spec.taints is None
    finally:
        cleanup_node(cluster, name)


def test_an_event_lives_in_its_objects_namespace(cluster: Cluster, namespace: str) -> None:
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}}
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/events", event)
    assert reply.status == 422
    assert reply.json()["details"]["causes"][0]["field"] == "involvedObject.namespace"
    assert 'Invalid value: "other": does not match event.namespace' in reply.json()["message"]
    cluster_scoped = {"metadata": {"name": "n"}, "involvedObject": {"kind": "Node", "name": "n"}}
    assert call(cluster, "POST", f"/api/v1/namespaces/{namespace}/events", cluster_scoped).status == 422

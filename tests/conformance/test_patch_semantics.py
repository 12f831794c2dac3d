"""Conformance: merge, strategic-merge and JSON patch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.conformance.semantics_support import Cluster, cleanup_node, cluster, namespace, node_body, unique

__all__ = ["cluster", "namespace"]

MACHINES = ("machine.sapcloud.io", "v1alpha1", "machines")


@pytest.fixture
def node(cluster: Cluster) -> Iterator[str]:
    name = unique("conf-node")
    body = node_body(name)
    body["status"] = {
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"},
            {
                "type": "MemoryPressure",
                "status": "False",
                "reason": "KubeletHasSufficientMemory",
                "message": "ok",
            },
        ]
    }
    cluster.core.create_node(body)
    yield name
    cleanup_node(cluster, name)


def merge(cluster: Cluster, name: str, body: object) -> client.V1Node:
    return cluster.core.patch_node(name, body, _content_type="application/merge-patch+json")


def test_merge_patch_labels_and_null_delete(cluster: Cluster, node: str) -> None:
    merge(cluster, node, {"metadata": {"labels": {"a": "1", "b": "2"}}})
    patched = merge(cluster, node, {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert patched.metadata.labels["b"] == "2" and patched.metadata.labels["c"] == "3"
    assert "a" not in patched.metadata.labels


def test_merge_patch_replaces_finalizers_list(cluster: Cluster, node: str) -> None:
    merge(cluster, node, {"metadata": {"finalizers": ["example.com/a", "example.com/b"]}})
    patched = merge(cluster, node, {"metadata": {"finalizers": ["example.com/c"]}})
    assert patched.metadata.finalizers == ["example.com/c"]
    merge(cluster, node, {"metadata": {"finalizers": None}})


def test_smp_finalizers_merge_and_delete_directive(cluster: Cluster, node: str) -> None:
    cluster.core.patch_node(node, {"metadata": {"finalizers": ["example.com/a"]}})
    added = cluster.core.patch_node(node, {"metadata": {"finalizers": ["example.com/b"]}})
    assert added.metadata.finalizers == ["example.com/b", "example.com/a"]  # new values first
    removed = cluster.core.patch_node(
        node, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "example.com/b"]}}
    )
    assert not removed.metadata.finalizers


def test_smp_node_unschedulable_and_taints_atomic(cluster: Cluster, node: str) -> None:
    cordoned = cluster.core.patch_node(node, {"spec": {"unschedulable": True}})
    assert cordoned.spec.unschedulable is True
    cluster.core.patch_node(node, {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    patched = cluster.core.patch_node(node, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})
    assert [(t.key, t.effect) for t in patched.spec.taints] == [("b", "NoExecute")]


def test_smp_node_conditions_merge_by_type(cluster: Cluster, node: str) -> None:
    body = {
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Down", "message": "x"}]}
    }
    patched = cluster.core.patch_node_status(node, body)
    by_type = {c.type: c.status for c in patched.status.conditions}
    assert by_type == {"Ready": "False", "MemoryPressure": "False"}


def test_smp_event_count_patch(cluster: Cluster, namespace: str) -> None:
    name = unique("ev")
    event = {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Node", "name": "n", "apiVersion": "v1", "namespace": namespace},
        "reason": "Test",
        "message": "m1",
        "count": 1,
        "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    cluster.core.create_namespaced_event(namespace, event)
    patched = cluster.core.patch_namespaced_event(
        name, namespace, {"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z", "message": "m2"}
    )
    assert (patched.count, patched.message, patched.reason) == (2, "m2", "Test")
    assert patched.last_timestamp.isoformat().startswith("2026-01-01T00:01:00")


def test_json_patch_ops_and_test_failure_422(cluster: Cluster, node: str) -> None:
    ops = [
        {"op": "add", "path": "/metadata/labels", "value": {"x": "1", "y": "2"}},
        {"op": "replace", "path": "/metadata/labels/x", "value": "3"},
        {"op": "remove", "path": "/metadata/labels/y"},
    ]
    patched = cluster.core.patch_node(node, ops)
    assert patched.metadata.labels["x"] == "3" and "y" not in patched.metadata.labels
    with pytest.raises(client.ApiException) as err:
        cluster.core.patch_node(node, [{"op": "test", "path": "/metadata/labels/x", "value": "nope"}])
    assert err.value.status == 422


def test_patch_with_stale_rv_409(cluster: Cluster, node: str) -> None:
    first = merge(cluster, node, {"metadata": {"labels": {"v": "1"}}})
    merge(cluster, node, {"metadata": {"labels": {"v": "2"}}})
    with pytest.raises(client.ApiException) as err:
        merge(
            cluster,
            node,
            {"metadata": {"resourceVersion": first.metadata.resource_version, "labels": {"v": "3"}}},
        )
    assert err.value.status == 409


def test_smp_on_custom_object_415(cluster: Cluster, namespace: str) -> None:
    name = unique("m")
    group, version, plural = MACHINES
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    cluster.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    with pytest.raises(client.ApiException) as err:
        cluster.custom.patch_namespaced_custom_object(
            group,
            version,
            namespace,
            plural,
            name,
            {"spec": {"providerID": "x"}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415
    patched = cluster.custom.patch_namespaced_custom_object(
        group, version, namespace, plural, name, {"spec": {"providerID": "x"}}
    )
    assert patched["spec"]["providerID"] == "x"


def test_patch_missing_object_404(cluster: Cluster) -> None:
    with pytest.raises(client.ApiException) as err:
        cluster.core.patch_node(unique("conf-missing"), {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 404


def test_python_client_dict_patch_is_smp(cluster: Cluster, node: str) -> None:
    cluster.core.patch_node(node, {"metadata": {"finalizers": ["example.com/a"]}})
    patched = cluster.core.patch_node(node, {"metadata": {"finalizers": ["example.com/b"]}})
    # only a strategic merge patch adds to finalizers (new values first); a merge patch replaces them
    assert patched.metadata.finalizers == ["example.com/b", "example.com/a"]
    merge(cluster, node, {"metadata": {"finalizers": None}})

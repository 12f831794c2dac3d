"""Known differences from a real kube-apiserver (spec §2.18), pinned so they show up when the suite
runs against a real cluster (there these tests are expected to fail)."""

from __future__ import annotations

import pytest

from tests.conformance.semantics_support import Cluster, cleanup_node, cluster, namespace, node_body, unique
from tests.conformance.wire import call

__all__ = ["cluster", "namespace"]

pytestmark = pytest.mark.deviation


def test_server_side_apply_is_415(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "ssa"}})
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: b\n"
    path = f"/api/v1/namespaces/{namespace}/configmaps/ssa?fieldManager=test"
    reply = call(cluster, "PATCH", path, body, "application/apply-patch+yaml")
    assert reply.status == 415 and reply.json()["reason"] == "UnsupportedMediaType"


def test_managed_fields_absent(cluster: Cluster, namespace: str) -> None:
    created = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "mf"}})
    assert created.metadata.managed_fields is None


def test_quantities_kept_as_sent(cluster: Cluster) -> None:
    name = unique("conf-node")
    body = node_body(name)
    body["status"] = {"capacity": {"cpu": "1000m"}}
    try:
        assert call(cluster, "POST", "/api/v1/nodes", body).status == 201
        assert cluster.core.read_node(name).status.capacity["cpu"] == "1000m"
    finally:
        cleanup_node(cluster, name)


def test_builtin_tables_have_name_and_age_only(cluster: Cluster, namespace: str) -> None:
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    table = call(cluster, "GET", f"/api/v1/namespaces/{namespace}/pods", accept=accept).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]

"""Conformance: what kubectl's everyday commands rely on, and bad input at the door.

Server-side apply (common case), protobuf request bodies, self-subject reviews, the ``kubernetes``
Service, built-in table columns, OpenAPI v3 schemas, non-standard JSON and the object size limit.
All of these hold for a real kube-apiserver too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3

from tests.conformance.semantics_support import Cluster, cluster, emulator_deviation, namespace
from tests.conformance.wire import call

__all__ = ["cluster", "namespace"]

APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _field(number: int, payload: bytes) -> bytes:
    return bytes([(number << 3) | 2, len(payload)]) + payload


def test_server_side_apply_creates_then_merges(cluster: Cluster, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/ssa?fieldManager=conformance"
    first = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  labels: {a: b}\ndata:\n  k: one\n"
    created = call(cluster, "PATCH", path, first, APPLY)
    assert created.status == 201 and created.json()["data"] == {"k": "one"}
    second = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  labels: {a: b}\ndata:\n  k: two\n"
    merged = call(cluster, "PATCH", path, second, APPLY)
    assert merged.status == 200 and merged.json()["data"] == {"k": "two"}
    assert merged.json()["metadata"]["labels"] == {"a": "b"}


def test_server_side_apply_needs_a_field_manager(cluster: Cluster, namespace: str) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nofm\n"
    reply = call(cluster, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/nofm", body, APPLY)
    assert reply.status == 422 and reply.json()["reason"] == "Invalid"
    assert "fieldManager: Required value" in reply.json()["message"]


def test_protobuf_configmap_is_accepted(cluster: Cluster, namespace: str) -> None:
    meta = _field(1, b"pb")
    entry = _field(1, b"key") + _field(2, b"value")
    raw = _field(1, meta) + _field(2, entry)
    unknown = _field(1, _field(1, b"v1") + _field(2, b"ConfigMap")) + _field(2, raw)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    reply = call(cluster, "POST", path, b"k8s\x00" + unknown, "application/vnd.kubernetes.protobuf")
    assert reply.status == 201
    assert reply.json()["data"] == {"key": "value"}


@pytest.mark.deviation  # real: the connection is closed without an answer
def test_protobuf_for_a_custom_resource_is_415(cluster: Cluster, namespace: str) -> None:
    path = f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines"
    try:
        reply = call(cluster, "POST", path, b"k8s\x00\n\x00", "application/vnd.kubernetes.protobuf")
    except urllib3.exceptions.ProtocolError:
        emulator_deviation(False, "closes the connection without an answer")
    assert reply.status == 415 and reply.json()["reason"] == "UnsupportedMediaType"


def test_self_subject_access_review_answers(cluster: Cluster) -> None:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}},
    }
    reply = call(cluster, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)
    assert reply.status == 201
    assert isinstance(reply.json()["status"]["allowed"], bool)
    assert reply.json()["spec"]["resourceAttributes"]["verb"] == "list"


def test_self_subject_review_names_the_caller(cluster: Cluster) -> None:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    reply = call(cluster, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body)
    assert reply.status == 201
    assert isinstance(reply.json()["status"]["userInfo"]["username"], str)


def test_the_kubernetes_service_exists(cluster: Cluster) -> None:
    service = cluster.core.read_namespaced_service("kubernetes", "default")
    assert service.spec.type == "ClusterIP"
    assert [(p.name, p.port, p.protocol) for p in service.spec.ports] == [("https", 443, "TCP")]


def test_service_defaults(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    created = cluster.core.create_namespaced_service(namespace, body)
    assert created.spec.type == "ClusterIP" and created.spec.session_affinity == "None"
    assert created.spec.ports[0].protocol == "TCP" and created.spec.ports[0].target_port == 80
    assert created.spec.cluster_ip and created.spec.cluster_ip != "None"


def test_pod_table_columns(cluster: Cluster, namespace: str) -> None:
    table = call(cluster, "GET", f"/api/v1/namespaces/{namespace}/pods", accept=TABLE).json()
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]


def test_openapi_v3_has_the_pod_schema(cluster: Cluster) -> None:
    root = call(cluster, "GET", "/openapi/v3").json()
    doc = call(cluster, "GET", root["paths"]["api/v1"]["serverRelativeURL"]).json()
    kinds = {
        gvk["kind"]: schema
        for schema in doc["components"]["schemas"].values()
        for gvk in schema.get("x-kubernetes-group-version-kind", [])
        if gvk["group"] == "" and gvk["version"] == "v1"
    }
    assert "spec" in kinds["Pod"]["properties"]


def test_non_standard_json_is_refused(cluster: Cluster, namespace: str) -> None:
    body = b'{"metadata":{"name":"nan"},"spec":{"class":{"name":"c"}},"x":NaN}'
    path = f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines"
    reply = call(cluster, "POST", path, body)
    assert reply.status == 400 and reply.json()["reason"] == "BadRequest"


@pytest.mark.deviation  # real: 422 (ConfigMap data over 1 MiB); 413 only past 3 MiB
def test_object_over_the_storage_limit_is_413(cluster: Cluster, namespace: str) -> None:
    body = json.dumps({"metadata": {"name": "big"}, "data": {"a": "x" * (1600 * 1024)}}).encode()
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
    too_large = reply.status == 413 and reply.json()["reason"] == "RequestEntityTooLarge"
    emulator_deviation(too_large, f"answers {reply.status} (413 only past 3 MiB)")


def test_node_port_service_gets_a_node_port(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
    created = cluster.core.create_namespaced_service(namespace, body)
    try:
        assert 30000 <= created.spec.ports[0].node_port <= 32767
    finally:
        cluster.core.delete_namespaced_service("np", namespace)


def test_deleting_a_service_account_answers_the_object(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    deleted = cluster.core.delete_namespaced_service_account("robot", namespace)
    assert deleted.metadata.name == "robot"


EVENT_COLUMNS = [
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
]


def _events(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A core/v1 Event as client-go's recorder writes it, and an events.k8s.io/v1 one in a series."""
    counted = {
        "metadata": {"name": "m-1.counted", "namespace": namespace},
        "involvedObject": {"kind": "Machine", "name": "m-1", "namespace": namespace, "fieldPath": "spec"},
        "type": "Normal",
        "reason": "MachineRunning",
        "message": "  Machine m-1 is now Running\n",
        "count": 3,
        "firstTimestamp": "2020-01-01T00:00:00Z",
        "lastTimestamp": "2020-01-02T00:00:00Z",
        "source": {"component": "machine-controller", "host": "mc-0"},
    }
    series = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "m-1.series", "namespace": namespace},
        "regarding": {"kind": "Machine", "name": "m-1", "namespace": namespace},
        "type": "Warning",
        "reason": "DrainFailed",
        "action": "Drain",
        "note": "eviction refused",
        "eventTime": "2020-01-01T00:00:00.000000Z",
        "reportingController": "machine-controller",
        "reportingInstance": "mc-1",
        "series": {"count": 7, "lastObservedTime": "2020-01-03T00:00:00.000000Z"},
    }
    return counted, series


def test_event_table_columns_and_cells(cluster: Cluster, namespace: str) -> None:
    """What ``kubectl get events`` prints: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE (and the wide
    columns), the same through both Event APIs."""
    counted, series = _events(namespace)
    core = f"/api/v1/namespaces/{namespace}/events"
    new = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    assert call(cluster, "POST", core, counted).status == 201
    assert call(cluster, "POST", new, series).status == 201
    tables = [call(cluster, "GET", path, accept=TABLE).json() for path in (core, new)]
    for table in tables:
        assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == EVENT_COLUMNS
    rows = {row["cells"][-1]: row["cells"][1:] for row in tables[0]["rows"]}
    assert rows == {row["cells"][-1]: row["cells"][1:] for row in tables[1]["rows"]}
    assert rows["m-1.counted"][:6] == [
        "Normal", "MachineRunning", "machine/m-1", "spec", "machine-controller, mc-0",
        "Machine m-1 is now Running",
    ]  # fmt: skip
    assert rows["m-1.counted"][7] == 3
    assert rows["m-1.series"][:6] == [
        "Warning", "DrainFailed", "machine/m-1", "", "machine-controller, mc-1", "eviction refused",
    ]  # fmt: skip
    assert rows["m-1.series"][7] == 7
    single = call(cluster, "GET", f"{new}/m-1.counted", accept=TABLE).json()
    assert single["rows"][0]["cells"][1:] == rows["m-1.counted"]

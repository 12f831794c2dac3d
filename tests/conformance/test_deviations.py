"""Known differences from a real kube-apiserver (the deviations table in docs/emulator.md), pinned
so they show up when the suite runs against a real cluster: there each test is expected to fail
with :class:`EmulatorDeviation`, raised by the one check that pins its deviation; every other
step must pass on both servers."""

from __future__ import annotations

import time

import pytest

from tests.conformance.semantics_support import (
    Cluster,
    cleanup_node,
    cluster,
    emulator_deviation,
    namespace,
    node_body,
    unique,
)
from tests.conformance.wire import call

__all__ = ["cluster", "namespace"]

pytestmark = pytest.mark.deviation


def test_server_side_apply_keeps_fields_dropped_from_the_applied_configuration(
    cluster: Cluster, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/ssa?fieldManager=test"
    first = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: b\n  c: d\n"
    second = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: b\n"
    assert call(cluster, "PATCH", path, first, "application/apply-patch+yaml").status == 201
    reply = call(cluster, "PATCH", path, second, "application/apply-patch+yaml")
    assert reply.status == 200
    emulator_deviation(reply.json()["data"] == {"a": "b", "c": "d"}, 'drops "c": {"a": "b"}')


def test_managed_fields_absent(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "mf"}, "data": {"a": "b"}}
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
    assert reply.status == 201
    emulator_deviation("managedFields" not in reply.json()["metadata"], "an entry for the fields set")


def test_quantities_kept_as_sent(cluster: Cluster) -> None:
    name = unique("conf-node")
    body = node_body(name)
    body["status"] = {"capacity": {"cpu": "1000m"}}
    try:
        assert call(cluster, "POST", "/api/v1/nodes", body).status == 201
        cpu = cluster.core.read_node(name).status.capacity["cpu"]
        emulator_deviation(cpu == "1000m", f"the canonical form {cpu!r}")
    finally:
        cleanup_node(cluster, name)


def _field(number: int, payload: bytes) -> bytes:
    tag = (number << 3) | 2
    head = bytes([tag]) if tag < 128 else bytes([tag & 0x7F | 0x80, tag >> 7])
    return head + bytes([len(payload)]) + payload


def test_protobuf_fields_outside_the_emulators_definitions_are_refused(
    cluster: Cluster, namespace: str
) -> None:
    hosts = _field(23, _field(1, b"1.2.3.4"))  # hostAliases: not defined by the emulator
    spec = _field(2, _field(1, b"c") + _field(2, b"busybox")) + hosts
    pod = _field(1, _field(1, b"pb")) + _field(2, spec)
    unknown = _field(1, _field(1, b"v1") + _field(2, b"Pod")) + _field(2, pod)
    path = f"/api/v1/namespaces/{namespace}/pods"
    reply = call(cluster, "POST", path, b"k8s\x00" + unknown, "application/vnd.kubernetes.protobuf")
    refused = reply.status == 415 and "field 23 of PodSpec" in reply.json()["message"]
    emulator_deviation(refused, f"reads every field (answered {reply.status})")


def test_builtin_kinds_without_a_printer_have_name_and_age(cluster: Cluster, namespace: str) -> None:
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    table = call(cluster, "GET", path, accept=accept).json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    emulator_deviation(columns == ["Name", "Age"], f"the kind's printer columns {columns}")


def test_openapi_v2_is_not_served(cluster: Cluster) -> None:
    status = call(cluster, "GET", "/openapi/v2").status
    emulator_deviation(status == 404, f"serves it (answered {status})")


def test_no_endpoints_controller(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "noep"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}
    cluster.core.create_namespaced_service(namespace, body)
    path = f"/api/v1/namespaces/{namespace}/endpoints/noep"
    deadline = time.monotonic() + 3  # real: the endpoints controller creates it within moments
    while time.monotonic() < deadline and call(cluster, "GET", path).status == 404:
        time.sleep(0.1)
    emulator_deviation(call(cluster, "GET", path).status == 404, "the endpoints controller created it")


def test_decoder_names_integer_fields_int64(cluster: Cluster, namespace: str) -> None:
    container = {"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}
    body = {"metadata": {"name": "int"}, "spec": {"containers": [container]}}
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/pods", body)
    assert reply.status == 400
    message = reply.json()["message"]
    emulator_deviation("of type int64" in message, f"names the field's type int32: {message[:200]}")

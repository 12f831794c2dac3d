"""Conformance: create, update, status, generation, leases, time and quantities, events."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.semantics_support import (
    Cluster,
    cleanup_node,
    cluster,
    emulator_deviation,
    namespace,
    node_body,
    pod_body,
    unique,
)
from tests.conformance.wire import call

__all__ = ["cluster", "namespace"]

MACHINES = ("machine.sapcloud.io", "v1alpha1")


def _machine(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
        **extra,
    }


def test_create_sets_uid_timestamp_rv(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "s", "uid": "0000"}}
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/secrets", body)
    assert reply.status == 201
    meta = reply.json()["metadata"]
    assert meta["uid"] != "0000" and isinstance(meta["resourceVersion"], str)
    assert meta["creationTimestamp"].endswith("Z") and len(meta["creationTimestamp"]) == 20


def test_create_with_resource_version_is_a_storage_500(cluster: Cluster, namespace: str) -> None:
    reply = call(
        cluster,
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "s", "resourceVersion": "1"}},
    )
    assert reply.status == 500 and "reason" not in reply.json()
    assert reply.json()["message"] == "resourceVersion should not be set on objects to be created"


def test_create_duplicate_is_409_already_exists(cluster: Cluster, namespace: str) -> None:
    path = f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines"
    assert call(cluster, "POST", path, _machine("dup")).status == 201
    status = call(cluster, "POST", path, _machine("dup")).json()
    assert status["reason"] == "AlreadyExists" and status["code"] == 409
    assert status["message"] == 'machines.machine.sapcloud.io "dup" already exists'
    assert status["details"] == {"name": "dup", "group": "machine.sapcloud.io", "kind": "machines"}


def test_generate_name(cluster: Cluster, namespace: str) -> None:
    secret = cluster.core.create_namespaced_secret(namespace, {"metadata": {"generateName": "m-"}})
    name = secret.metadata.name
    assert len(name) == 7 and set(name[2:]) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_missing_name_is_422(cluster: Cluster, namespace: str) -> None:
    status = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {}}).json()
    assert status["code"] == 422
    assert status["details"]["causes"][0]["reason"] == "FieldValueRequired"
    assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_invalid_name_is_422(cluster: Cluster, namespace: str) -> None:
    status = call(
        cluster, "POST", f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "Bad_Name"}}
    ).json()
    assert status["code"] == 422
    assert (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
        in status["message"]
    )


def test_create_in_missing_namespace_is_404(cluster: Cluster) -> None:
    missing = unique("conf-missing")
    status = call(
        cluster, "POST", f"/api/v1/namespaces/{missing}/secrets", {"metadata": {"name": "x"}}
    ).json()
    assert status["code"] == 404 and status["message"] == f'namespaces "{missing}" not found'


def test_create_fills_apiversion_kind(cluster: Cluster, namespace: str) -> None:
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "c"}})
    assert reply.json()["kind"] == "ConfigMap" and reply.json()["apiVersion"] == "v1"


def test_node_create_keeps_status_and_quantity_as_string(cluster: Cluster) -> None:
    name = unique("conf-node")
    body = node_body(name)
    body["status"] = {
        "capacity": {"cpu": 2},
        "conditions": [{"type": "Ready", "status": "True", "reason": "r", "message": "m"}],
    }
    try:
        reply = call(cluster, "POST", "/api/v1/nodes", body)
        assert reply.status == 201
        node = cluster.core.read_node(name)
        assert node.status.capacity["cpu"] == "2"
        assert node.status.conditions[0].type == "Ready"
    finally:
        cleanup_node(cluster, name)


def test_custom_object_create_drops_status_sets_generation_1(cluster: Cluster, namespace: str) -> None:
    obj = cluster.custom.create_namespaced_custom_object(
        *MACHINES, namespace, "machines", _machine("st", status={"currentStatus": {"phase": "Running"}})
    )
    assert "status" not in obj or not obj["status"]
    assert obj["metadata"]["generation"] == 1


def test_custom_object_prunes_unknown_fields_and_warns(cluster: Cluster, namespace: str) -> None:
    body = _machine("pr")
    body["spec"]["foo"] = "bar"
    reply = call(cluster, "POST", f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines", body)
    assert reply.status == 201
    assert "foo" not in reply.json()["spec"]
    assert 'unknown field \\"spec.foo\\"' in reply.headers.get("warning", "")


def test_custom_object_strict_field_validation_400(cluster: Cluster, namespace: str) -> None:
    body = _machine("strict")
    body["spec"]["foo"] = "bar"
    path = f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines?fieldValidation=Strict"
    reply = call(cluster, "POST", path, body)
    assert reply.status == 400
    assert 'strict decoding error: unknown field "spec.foo"' in reply.json()["message"]


def test_secret_stringdata_merged_into_data(cluster: Cluster, namespace: str) -> None:
    secret = call(
        cluster,
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "sd"}, "stringData": {"a": "b"}},
    ).json()
    assert secret["data"] == {"a": "Yg=="} and "stringData" not in secret and secret["type"] == "Opaque"


def test_empty_list_items_is_array(cluster: Cluster, namespace: str) -> None:
    reply = call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert reply.json()["items"] == []
    assert cluster.core.list_namespaced_config_map(namespace).items == []


def test_put_stale_rv_409_conflict(cluster: Cluster, namespace: str) -> None:
    cm = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    body = cluster.api.sanitize_for_serialization(cm)
    body["data"] = {"a": "1"}
    cluster.core.replace_namespaced_config_map("c", namespace, body)
    body["data"] = {"a": "2"}
    with pytest.raises(client.ApiException) as info:
        cluster.core.replace_namespaced_config_map("c", namespace, body)
    assert info.value.status == 409
    assert "the object has been modified; please apply your changes to the latest version" in info.value.body


def test_put_without_rv_allowed_for_node_pod_secret(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_secret(namespace, {"metadata": {"name": "u"}})
    updated = cluster.core.replace_namespaced_secret(
        "u", namespace, {"metadata": {"name": "u"}, "data": {"a": "YQ=="}}
    )
    assert updated.data == {"a": "YQ=="}


def test_put_without_rv_rejected_for_lease_and_custom_object(cluster: Cluster, namespace: str) -> None:
    cluster.custom.create_namespaced_custom_object(*MACHINES, namespace, "machines", _machine("norv"))
    reply = call(
        cluster,
        "PUT",
        f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines/norv",
        _machine("norv"),
    )
    assert reply.status == 422
    assert reply.json()["message"].endswith(
        "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    )


def test_put_name_mismatch_400(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    reply = call(cluster, "PUT", f"/api/v1/namespaces/{namespace}/configmaps/a", {"metadata": {"name": "b"}})
    assert reply.status == 400


def test_noop_update_keeps_rv(cluster: Cluster, namespace: str) -> None:
    cm = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "n"}, "data": {"a": "b"}})
    again = cluster.core.replace_namespaced_config_map(
        "n", namespace, cluster.api.sanitize_for_serialization(cm)
    )
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_main_write_ignores_status_and_status_write_ignores_spec(cluster: Cluster, namespace: str) -> None:
    obj = cluster.custom.create_namespaced_custom_object(*MACHINES, namespace, "machines", _machine("ms"))
    obj["status"] = {"currentStatus": {"phase": "Running"}}
    obj = cluster.custom.replace_namespaced_custom_object(*MACHINES, namespace, "machines", "ms", obj)
    assert not (obj.get("status") or {}).get("currentStatus")
    obj["status"] = {"currentStatus": {"phase": "Running"}}
    obj["spec"]["providerID"] = "changed"
    obj["metadata"]["labels"] = {"changed": "yes"}
    obj = cluster.custom.replace_namespaced_custom_object_status(*MACHINES, namespace, "machines", "ms", obj)
    assert obj["status"]["currentStatus"]["phase"] == "Running"
    assert "providerID" not in obj["spec"] and not obj["metadata"].get("labels")


def test_generation_bumps_on_spec_change_only_custom_object(cluster: Cluster, namespace: str) -> None:
    cluster.custom.create_namespaced_custom_object(*MACHINES, namespace, "machines", _machine("g"))
    patch = cluster.custom.patch_namespaced_custom_object
    assert (
        patch(*MACHINES, namespace, "machines", "g", {"metadata": {"labels": {"a": "b"}}})["metadata"][
            "generation"
        ]
        == 1
    )
    assert (
        patch(*MACHINES, namespace, "machines", "g", {"spec": {"providerID": "x"}})["metadata"]["generation"]
        == 2
    )


def test_generation_machineclass_bumps_on_any_top_level_change(cluster: Cluster, namespace: str) -> None:
    body = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": "mc"},
        "providerSpec": {"a": 1},
    }
    cluster.custom.create_namespaced_custom_object(*MACHINES, namespace, "machineclasses", body)
    obj = cluster.custom.patch_namespaced_custom_object(
        *MACHINES, namespace, "machineclasses", "mc", {"providerSpec": {"a": 2}}
    )
    assert obj["metadata"]["generation"] == 2


def test_lease_put_creates_when_missing(cluster: Cluster, namespace: str) -> None:
    reply = call(
        cluster,
        "PUT",
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/l",
        {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}},
    )
    assert reply.status == 201


def test_lease_microtime_roundtrip_six_digits(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "mt"}, "spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}}
    lease = call(cluster, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body).json()
    assert lease["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"


def test_lease_microtime_without_fraction_is_400(cluster: Cluster, namespace: str) -> None:
    body = {"metadata": {"name": "bad"}, "spec": {"renewTime": "2026-01-01T00:00:00+00:00"}}
    reply = call(cluster, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body)
    assert reply.status == 400
    assert reply.json()["message"].startswith('Lease in version "v1" cannot be handled as a Lease:')


def test_time_fields_normalised_to_seconds_z(cluster: Cluster, namespace: str) -> None:
    body = {
        "metadata": {"name": "ev"},
        "involvedObject": {"kind": "Node", "name": "n", "namespace": namespace},
        "firstTimestamp": "2026-01-01T01:00:00.5+01:00",
        "reason": "R",
        "message": "m",
    }
    event = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/events", body).json()
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"


def test_leader_election_race_one_winner(cluster: Cluster, namespace: str) -> None:
    coord = client.CoordinationV1Api(cluster.api)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    call(cluster, "POST", path, {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "nobody"}})
    base = coord.read_namespaced_lease("leader", namespace)
    barrier = threading.Barrier(4)
    codes: list[int] = []

    def candidate(identity: str) -> None:
        body = cluster.api.sanitize_for_serialization(base)
        body["spec"]["holderIdentity"] = identity
        barrier.wait()
        codes.append(call(cluster, "PUT", f"{path}/leader", body).status)

    threads = [threading.Thread(target=candidate, args=(f"c{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [200, 409, 409, 409]


def test_core_event_create_for_cluster_scoped_object_in_default_ns(cluster: Cluster) -> None:
    name = unique("conf-ev")
    body = {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "R",
        "message": "m",
    }
    try:
        event = cluster.core.create_namespaced_event("default", body)
        assert event.metadata.namespace == "default"
    finally:
        cluster.core.delete_namespaced_event(name, "default")


def test_event_patch_missing_is_404_then_create(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(client.ApiException) as info:
        cluster.core.patch_namespaced_event("missing.1", namespace, {"count": 2})
    assert info.value.status == 404
    body = {
        "metadata": {"name": "missing.1"},
        "involvedObject": {"kind": "Node", "name": "n1", "namespace": namespace},
        "count": 1,
    }
    cluster.core.create_namespaced_event(namespace, body)
    patched = cluster.core.patch_namespaced_event("missing.1", namespace, {"count": 2, "message": "again"})
    assert patched.count == 2 and patched.message == "again"


def test_pod_create_resets_status_and_defaults(cluster: Cluster, namespace: str) -> None:
    body = pod_body("p")
    body["status"] = {"phase": "Running"}
    pod = cluster.core.create_namespaced_pod(namespace, body)
    assert pod.status.phase == "Pending"
    assert pod.spec.termination_grace_period_seconds == 30 and pod.spec.restart_policy == "Always"


@pytest.mark.deviation  # real: a pods/status write takes the labels it carries
def test_status_write_ignores_spec_pod(cluster: Cluster, namespace: str) -> None:
    pod = cluster.core.create_namespaced_pod(namespace, pod_body("sp", labels={"a": "1"}))
    body = cluster.api.sanitize_for_serialization(pod)
    body["metadata"]["labels"] = {"a": "2"}
    body["spec"]["activeDeadlineSeconds"] = 7
    body["status"] = {"phase": "Running"}
    written = cluster.core.replace_namespaced_pod_status("sp", namespace, body)
    assert written.status.phase == "Running"
    ignored = written.metadata.labels == {"a": "1"} and written.spec.active_deadline_seconds is None
    emulator_deviation(ignored, f"takes the labels it carries: {written.metadata.labels}")


def test_status_write_node_metadata_behaviour(cluster: Cluster) -> None:
    name = unique("conf-node")
    try:
        node = cluster.core.create_node(node_body(name))
        body = cluster.api.sanitize_for_serialization(node)
        body["metadata"]["labels"]["pinned"] = "yes"
        body["spec"] = {"unschedulable": True}
        body["status"] = {"phase": "Running"}
        written = cluster.core.replace_node_status(name, body)
        assert not (written.spec and written.spec.unschedulable)
        # Pinned: node status writes keep label changes (no metadata reset for nodes).
        assert written.metadata.labels.get("pinned") == "yes"
    finally:
        cleanup_node(cluster, name)


def test_pod_generation_absent_before_1_33(cluster: Cluster, namespace: str) -> None:
    version = client.VersionApi(cluster.api).get_code()
    if (int(version.major), int(version.minor.rstrip("+"))) >= (1, 33):
        pytest.skip("pods track generation from v1.33")
    pod = cluster.core.create_namespaced_pod(namespace, pod_body("gen"))
    assert pod.metadata.generation is None


def test_pod_generation_tracks_spec_changes_from_1_33(cluster: Cluster, namespace: str) -> None:
    """From v1.33 a pod has ``metadata.generation``: 1 on create, bumped by a spec change and by
    the start of a graceful deletion, not by a status or metadata write."""
    version = client.VersionApi(cluster.api).get_code()
    if (int(version.major), int(version.minor.rstrip("+"))) < (1, 33):
        pytest.skip("pods track generation from v1.33")
    pod = cluster.core.create_namespaced_pod(namespace, pod_body("gen", node="conf-gen-node"))
    assert pod.metadata.generation == 1
    labelled = cluster.core.patch_namespaced_pod("gen", namespace, {"metadata": {"labels": {"a": "1"}}})
    assert labelled.metadata.generation == 1
    status = cluster.core.patch_namespaced_pod_status("gen", namespace, {"status": {"phase": "Running"}})
    assert status.metadata.generation == 1
    bumped = cluster.core.patch_namespaced_pod("gen", namespace, {"spec": {"activeDeadlineSeconds": 30}})
    assert bumped.metadata.generation == 2
    cluster.core.delete_namespaced_pod("gen", namespace, grace_period_seconds=60)
    deleting = cluster.core.read_namespaced_pod("gen", namespace)
    assert deleting.metadata.deletion_timestamp is not None and deleting.metadata.generation == 3
    cluster.core.delete_namespaced_pod("gen", namespace, grace_period_seconds=0)


def test_events_k8s_io_shares_storage_with_core(cluster: Cluster, namespace: str) -> None:
    body = {
        "metadata": {"name": "shared"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "mcm",
        "reportingInstance": "mcm-1",
        "action": "Drain",
        "reason": "Drained",
        "note": "drained",
        "regarding": {"kind": "Node", "name": "n1", "namespace": namespace},
        "type": "Normal",
    }
    reply = call(cluster, "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body)
    assert reply.status == 201
    core = cluster.core.read_namespaced_event("shared", namespace)
    assert core.message == "drained" and core.involved_object.name == "n1"

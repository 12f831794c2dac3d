"""Create, read, update, patch and delete semantics over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.emulator import Emulator
from tests.emulator.raw import Raw, pod

NS = "/api/v1/namespaces/default"


@pytest.fixture
def raw(emulator: Emulator) -> Iterator[Raw]:
    client = Raw(emulator.url)
    yield client
    client.close()


def test_create_sets_system_fields_and_replaces_uid(raw: Raw) -> None:
    body = {"metadata": {"name": "s1", "uid": "client-uid"}, "data": {}}
    code, headers, obj = raw.post(f"{NS}/secrets", body)
    assert code == 201
    assert obj["kind"] == "Secret" and obj["apiVersion"] == "v1"
    meta = obj["metadata"]
    assert meta["uid"] != "client-uid"
    assert isinstance(meta["resourceVersion"], str)
    assert meta["creationTimestamp"].endswith("Z") and len(meta["creationTimestamp"]) == 20
    assert "audit-id" in headers and headers["cache-control"] == "no-cache, private"


def test_create_with_resource_version_is_a_storage_500(raw: Raw) -> None:
    code, _, status = raw.post(f"{NS}/secrets", {"metadata": {"name": "s", "resourceVersion": "5"}})
    assert code == 500 and "reason" not in status
    assert status["message"] == "resourceVersion should not be set on objects to be created"


def test_create_duplicate_is_409_already_exists(raw: Raw) -> None:
    raw.post(f"{NS}/secrets", {"metadata": {"name": "dup"}})
    code, _, status = raw.post(f"{NS}/secrets", {"metadata": {"name": "dup"}})
    assert code == 409
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'secrets "dup" already exists'
    assert status["details"] == {"name": "dup", "kind": "secrets"}


def test_generate_name_uses_upstream_alphabet(raw: Raw) -> None:
    code, _, obj = raw.post(f"{NS}/secrets", {"metadata": {"generateName": "m-"}})
    assert code == 201
    name = obj["metadata"]["name"]
    assert name.startswith("m-") and len(name) == 7
    assert set(name[2:]) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_missing_and_invalid_names_are_422(raw: Raw) -> None:
    code, _, status = raw.post(f"{NS}/secrets", {"metadata": {}})
    assert code == 422
    assert status["details"]["causes"][0] == {
        "reason": "FieldValueRequired",
        "message": "Required value: name or generateName is required",
        "field": "metadata.name",
    }
    code, _, status = raw.post(f"{NS}/secrets", {"metadata": {"name": "Bad_Name"}})
    assert code == 422
    assert status["message"].startswith(
        'Secret "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
    )
    assert "lowercase RFC 1123 subdomain" in status["message"]


def test_create_in_missing_namespace_is_404(raw: Raw) -> None:
    code, _, status = raw.post("/api/v1/namespaces/nope/secrets", {"metadata": {"name": "x"}})
    assert code == 404
    assert status["message"] == 'namespaces "nope" not found'
    assert status["details"] == {"name": "nope", "kind": "namespaces"}


def test_namespace_mismatch_is_400_and_kind_mismatch_is_400(raw: Raw) -> None:
    code, _, status = raw.post(f"{NS}/secrets", {"metadata": {"name": "x", "namespace": "other"}})
    assert code == 400
    assert "does not match the namespace" in status["message"]
    code, _, _ = raw.post(f"{NS}/secrets", {"kind": "ConfigMap", "metadata": {"name": "x"}})
    assert code == 400


def test_get_missing_is_404_with_details(raw: Raw) -> None:
    code, _, status = raw.get("/api/v1/nodes/dummy_name")
    assert code == 404
    assert status["reason"] == "NotFound"
    assert status["message"] == 'nodes "dummy_name" not found'


def test_put_stale_rv_is_conflict_and_without_rv_allowed_for_secret(raw: Raw) -> None:
    _, _, obj = raw.post(f"{NS}/secrets", {"metadata": {"name": "u"}, "data": {"a": "YQ=="}})
    stale = obj["metadata"]["resourceVersion"]
    obj["data"] = {"a": "Yg=="}
    code, _, updated = raw.put(f"{NS}/secrets/u", obj)
    assert code == 200 and updated["metadata"]["resourceVersion"] != stale
    code, _, status = raw.put(f"{NS}/secrets/u", obj)
    assert code == 409
    assert status["message"] == (
        'Operation cannot be fulfilled on secrets "u": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    del obj["metadata"]["resourceVersion"]
    obj["data"] = {"a": "Yw=="}
    code, _, _ = raw.put(f"{NS}/secrets/u", obj)
    assert code == 200


def test_put_without_rv_rejected_for_lease(raw: Raw) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    raw.post(path, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    code, _, status = raw.put(f"{path}/l", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    assert code == 422
    assert status["message"] == (
        'Lease.coordination.k8s.io "l" is invalid: metadata.resourceVersion: Invalid value: 0: '
        "must be specified for an update"
    )


def test_lease_put_creates_when_missing(raw: Raw) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/new"
    code, _, obj = raw.put(path, {"metadata": {"name": "new"}, "spec": {"holderIdentity": "a"}})
    assert code == 201
    assert obj["spec"]["holderIdentity"] == "a"


def test_lease_microtime_rules(raw: Raw) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    code, _, obj = raw.post(
        path, {"metadata": {"name": "m"}, "spec": {"renewTime": "2026-01-01T01:00:00.123456+01:00"}}
    )
    assert code == 201
    assert obj["spec"]["renewTime"] == "2026-01-01T00:00:00.123456Z"
    code, _, status = raw.post(
        path, {"metadata": {"name": "m2"}, "spec": {"renewTime": "2026-01-01T00:00:00+00:00"}}
    )
    assert code == 400
    assert status["message"].startswith('Lease in version "v1" cannot be handled as a Lease:')


def test_put_name_mismatch_is_400(raw: Raw) -> None:
    raw.post(f"{NS}/secrets", {"metadata": {"name": "a"}})
    code, _, status = raw.put(f"{NS}/secrets/a", {"metadata": {"name": "b"}})
    assert code == 400
    assert status["message"] == "the name of the object (b) does not match the name on the URL (a)"


def test_noop_update_keeps_rv(raw: Raw) -> None:
    _, _, obj = raw.post(f"{NS}/configmaps", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    code, _, same = raw.put(f"{NS}/configmaps/c", obj)
    assert code == 200
    assert same["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_pod_status_write_ignores_spec_and_labels(raw: Raw) -> None:
    _, _, obj = raw.post(f"{NS}/pods", pod("p", labels={"a": "1"}))
    assert obj["status"]["phase"] == "Pending"
    obj["status"] = {"phase": "Running"}
    obj["metadata"]["labels"] = {"a": "2"}
    obj["spec"]["activeDeadlineSeconds"] = 5
    code, _, written = raw.put(f"{NS}/pods/p/status", obj)
    assert code == 200
    assert written["status"]["phase"] == "Running"
    assert written["metadata"]["labels"] == {"a": "1"}
    assert "activeDeadlineSeconds" not in written["spec"]
    written["status"] = {"phase": "Failed"}
    code, _, main = raw.put(f"{NS}/pods/p", written)
    assert code == 200 and main["status"]["phase"] == "Running"


def test_patch_rv_precondition_and_missing_object(raw: Raw) -> None:
    _, _, obj = raw.post(f"{NS}/configmaps", {"metadata": {"name": "pc"}})
    raw.patch(f"{NS}/configmaps/pc", {"data": {"a": "b"}})
    code, _, _ = raw.patch(
        f"{NS}/configmaps/pc", {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}}
    )
    assert code == 409
    code, _, _ = raw.patch(f"{NS}/configmaps/missing", {"data": {}})
    assert code == 404


def test_json_patch_failed_test_op_is_422(raw: Raw) -> None:
    raw.post(f"{NS}/configmaps", {"metadata": {"name": "jp"}, "data": {"a": "1"}})
    ops = [{"op": "replace", "path": "/data/a", "value": "2"}]
    code, _, obj = raw.patch(f"{NS}/configmaps/jp", ops, "json")
    assert code == 200 and obj["data"]["a"] == "2"
    code, _, status = raw.patch(
        f"{NS}/configmaps/jp", [{"op": "test", "path": "/data/a", "value": "9"}], "json"
    )
    assert code == 422 and status["reason"] == "Invalid"


def test_unsupported_patch_types_are_415(raw: Raw) -> None:
    raw.post(f"{NS}/configmaps", {"metadata": {"name": "ap"}})
    code, _, status = raw.request("PATCH", f"{NS}/configmaps/ap", {}, "application/x-unknown-patch")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"


def test_finalizer_delete_marks_then_release_removes(raw: Raw) -> None:
    raw.post(f"{NS}/configmaps", {"metadata": {"name": "f", "finalizers": ["example.com/keep"]}})
    code, _, obj = raw.delete(f"{NS}/configmaps/f")
    assert code == 200
    assert obj["metadata"]["deletionTimestamp"] and obj["metadata"]["deletionGracePeriodSeconds"] == 0
    code, _, again = raw.delete(f"{NS}/configmaps/f")
    assert code == 200 and again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    code, _, released = raw.patch(f"{NS}/configmaps/f", {"metadata": {"finalizers": None}})
    assert code == 200
    code, _, _ = raw.get(f"{NS}/configmaps/f")
    assert code == 404
    del released


def test_delete_body_shapes(raw: Raw) -> None:
    raw.post(f"{NS}/secrets", {"metadata": {"name": "d"}})
    code, _, body = raw.delete(f"{NS}/secrets/d")
    assert code == 200
    assert body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "d" and body["details"]["kind"] == "secrets"
    raw.post(f"{NS}/pods", pod("dp"))
    code, _, body = raw.delete(f"{NS}/pods/dp")
    assert code == 200 and body["kind"] == "Pod"


def test_delete_precondition_mismatch_is_409(raw: Raw) -> None:
    raw.post(f"{NS}/secrets", {"metadata": {"name": "pre"}})
    code, _, status = raw.delete(f"{NS}/secrets/pre", {"preconditions": {"resourceVersion": "1"}})
    assert code == 409
    assert (
        "the ResourceVersion in the precondition (1) does not match the ResourceVersion in record"
        in (status["message"])
    )


def test_pod_graceful_delete_sets_grace(raw: Raw, emulator: Emulator) -> None:
    raw.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
    raw.post(f"{NS}/pods", pod("g", node="n1"))
    code, _, obj = raw.delete(f"{NS}/pods/g")
    assert code == 200
    assert obj["metadata"]["deletionGracePeriodSeconds"] == 30
    code, _, shorter = raw.delete(f"{NS}/pods/g", {"gracePeriodSeconds": 10})
    assert code == 200
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 10
    assert shorter["metadata"]["deletionTimestamp"] < obj["metadata"]["deletionTimestamp"]
    code, _, _ = raw.delete(f"{NS}/pods/g", {"gracePeriodSeconds": 0})
    assert code == 200
    assert emulator.get("pods", "default", "g") is None


def test_namespace_delete_terminating_blocks_create(raw: Raw) -> None:
    raw.post("/api/v1/namespaces", {"metadata": {"name": "gone"}})
    raw.post("/api/v1/namespaces/gone/configmaps", {"metadata": {"name": "keep", "finalizers": ["x.io/y"]}})
    code, _, obj = raw.delete("/api/v1/namespaces/gone")
    assert code == 200
    assert obj["status"]["phase"] == "Terminating"
    code, _, status = raw.post("/api/v1/namespaces/gone/configmaps", {"metadata": {"name": "new"}})
    assert code == 403
    assert status["details"]["causes"][0]["reason"] == "NamespaceTerminating"


def test_deletecollection_by_label(raw: Raw, emulator: Emulator) -> None:
    for name, team in (("a", "x"), ("b", "y"), ("c", "x")):
        raw.post(f"{NS}/configmaps", {"metadata": {"name": name, "labels": {"team": team}}})
    code, _, body = raw.delete(f"{NS}/configmaps?labelSelector=team%3Dx")
    assert code == 200
    assert body["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "c"]
    assert [o["metadata"]["name"] for o in emulator.list("configmaps", "default")] == ["b"]


def test_generation_rules_for_custom_objects(raw: Raw) -> None:
    path = "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machines"
    body = {"metadata": {"name": "m"}, "spec": {"class": {"kind": "MachineClass", "name": "a"}}, "status": {}}
    code, _, obj = raw.post(path, body)
    assert code == 201 and obj["metadata"]["generation"] == 1
    code, _, obj = raw.patch(f"{path}/m", {"metadata": {"labels": {"l": "v"}}})
    assert obj["metadata"]["generation"] == 1
    code, _, obj = raw.patch(f"{path}/m", {"spec": {"providerID": "p"}})
    assert code == 200 and obj["metadata"]["generation"] == 2
    code, _, _ = raw.patch(f"{path}/m", {"spec": {"x": 1}}, "strategic")
    assert code == 415


def test_bodies_over_limit_are_413(raw: Raw) -> None:
    code, _, status = raw.post(f"{NS}/configmaps", b"{" + b" " * (3 * 1024 * 1024 + 10) + b"}")
    assert code == 413
    assert status["message"] == "Request entity too large: limit is 3145728"


def test_yaml_body_accepted(raw: Raw) -> None:
    text = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  a: b\n"
    code, _, obj = raw.request("POST", f"{NS}/configmaps", text, "application/yaml")
    assert code == 201 and obj["data"] == {"a": "b"}


def test_scale_subresource(raw: Raw) -> None:
    path = "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machinesets"
    body = {"metadata": {"name": "ms"}, "spec": {"replicas": 2, "machineClass": {"name": "c"}}}
    code, _, obj = raw.post(path, body)
    assert code == 201, obj
    code, _, scale = raw.get(f"{path}/ms/scale")
    assert code == 200
    assert (
        scale["kind"] == "Scale"
        and scale["apiVersion"] == "autoscaling/v1"
        and scale["spec"]["replicas"] == 2
    )
    code, _, scale = raw.patch(f"{path}/ms/scale", {"spec": {"replicas": 5}})
    assert code == 200 and scale["spec"]["replicas"] == 5
    _, _, obj = raw.get(f"{path}/ms")
    assert obj["spec"]["replicas"] == 5


def test_strict_field_validation_rejects_duplicate_keys(raw: Raw) -> None:
    body = b'{"metadata": {"name": "dk", "name": "dk2"}}'
    code, _, status = raw.request("POST", f"{NS}/configmaps?fieldValidation=Strict", body)
    assert code == 400
    assert 'strict decoding error: json: duplicate field "name"' in status["message"]
    code, _, _ = raw.request("POST", f"{NS}/configmaps", body)
    assert code == 201


def test_watch_timeout_zero_means_default_not_immediate_close(emulator: Emulator) -> None:
    from tests.emulator.raw import WatchReader

    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion=1&timeoutSeconds=0")
    assert emulator.wait_for(lambda: emulator.watches.open_watches().get("configmaps") == 1, 2)
    emulator.stop()
    assert list(reader.lines()) == []
    assert not emulator.watches.open_watches() or emulator.wait_for(
        lambda: not emulator.watches.open_watches(), 2
    )


def test_events_k8s_io_shares_storage_with_core(raw: Raw, emulator: Emulator) -> None:
    from tests.emulator.raw import WatchReader

    v1 = "/apis/events.k8s.io/v1/namespaces/default/events"
    body = {
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "mcm",
        "reportingInstance": "mcm-1",
        "action": "Drain",
        "reason": "Drained",
        "note": "drained the node",
        "regarding": {"kind": "Node", "name": "n1"},
        "type": "Normal",
    }
    code, _, created = raw.post(v1, body)
    assert (
        code == 201 and created["apiVersion"] == "events.k8s.io/v1" and created["note"] == "drained the node"
    )
    code, _, core = raw.get(f"{NS}/events/e1")
    assert core["message"] == "drained the node" and core["involvedObject"]["name"] == "n1"
    assert core["reportingComponent"] == "mcm" and "note" not in core
    code, _, patched = raw.patch(f"{v1}/e1", {"note": "again"})
    assert code == 200 and patched["note"] == "again"
    _, _, listing = raw.get(v1)
    assert [i["note"] for i in listing["items"]] == ["again"] and "kind" not in listing["items"][0]
    events = list(WatchReader(emulator.url, f"{v1}?watch=true&timeoutSeconds=1").events())
    assert events[0]["object"]["apiVersion"] == "events.k8s.io/v1" and events[0]["object"]["note"] == "again"
    code, _, status = raw.post(v1, {"metadata": {"name": "e2"}, "regarding": {"kind": "Node", "name": "n"}})
    assert code == 422 and status["details"]["causes"]
    assert raw.delete(f"{v1}/e1")[0] == 200
    assert raw.get(f"{NS}/events/e1")[0] == 404

"""Unit tests for mcm.emulator.strategies: per-kind flags, defaults, normalisation and validation."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from mcm.emulator.crdvalidation import CLEANUP_FINALIZER, is_established, schemas_by_version
from mcm.emulator.strategies import DecodeError, custom_strategy, strategy_for


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec},
    }


@pytest.mark.parametrize(
    ("group", "kind", "unconditional", "create_on_update", "returns_object", "generation", "status_sub"),
    [
        ("", "Pod", True, False, True, "spec", True),  # from v1.33
        ("", "Node", True, False, False, "none", True),
        ("", "Secret", True, False, False, "none", False),
        ("", "Namespace", True, False, True, "none", True),
        ("", "PersistentVolume", True, False, True, "none", True),
        ("", "PersistentVolumeClaim", True, False, True, "none", True),
        ("", "Event", True, False, False, "none", False),
        ("coordination.k8s.io", "Lease", False, True, False, "none", False),
        ("policy", "PodDisruptionBudget", False, False, False, "spec", True),
        ("storage.k8s.io", "VolumeAttachment", False, False, True, "none", True),
        ("apiextensions.k8s.io", "CustomResourceDefinition", False, False, True, "spec", True),
        ("machine.sapcloud.io", "Machine", False, False, False, "non_metadata", False),
    ],
)
def test_table_7_flags(
    group: str,
    kind: str,
    unconditional: bool,
    create_on_update: bool,
    returns_object: bool,
    generation: str,
    status_sub: bool,
) -> None:
    s = strategy_for(group, kind)
    assert s.unconditional_update is unconditional
    assert s.create_on_update is create_on_update
    assert s.return_deleted_object is returns_object
    assert s.tracks_generation == generation
    assert s.status_subresource is status_sub


def test_reset_status_on_create_except_nodes() -> None:
    assert strategy_for("", "Node").reset_status_on_create is False
    for group, kind in [
        ("", "Pod"),
        ("", "PersistentVolume"),
        ("policy", "PodDisruptionBudget"),
        ("storage.k8s.io", "VolumeAttachment"),
    ]:
        assert strategy_for(group, kind).reset_status_on_create is True


def test_pod_defaults_do_not_mutate_input() -> None:
    body = pod(containers=[{"name": "a", "image": "nginx"}], tolerations=[{"key": "k", "operator": "Exists"}])
    before = copy.deepcopy(body)
    strategy_for("", "Pod").defaults(body)
    assert body == before


def test_pod_defaults() -> None:
    out = strategy_for("", "Pod").defaults(
        pod(containers=[{"name": "a", "image": "nginx"}, {"name": "b", "image": "r/x:1.2"}])
    )
    spec = out["spec"]
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["enableServiceLinks"] is True
    assert spec["containers"][0]["imagePullPolicy"] == "Always"
    assert spec["containers"][1]["imagePullPolicy"] == "IfNotPresent"
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    assert out["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert strategy_for("", "Pod").defaults(out) == out  # idempotent


def test_pod_qos_class() -> None:
    limits = {"cpu": "1", "memory": "1Gi"}
    guaranteed = pod(containers=[{"name": "c", "image": "i", "resources": {"limits": limits}}])
    burstable = pod(containers=[{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}])
    assert strategy_for("", "Pod").defaults(guaranteed)["status"]["qosClass"] == "Guaranteed"
    assert strategy_for("", "Pod").defaults(burstable)["status"]["qosClass"] == "Burstable"


def test_pod_create_requires_containers() -> None:
    errors = strategy_for("", "Pod").validate({"metadata": {"name": "p"}, "spec": {}}, None)
    assert [(e.type, e.field) for e in errors] == [("FieldValueRequired", "spec.containers")]


def test_pod_update_immutability() -> None:
    s = strategy_for("", "Pod")
    old = s.defaults(pod(nodeName="n1"))
    image_change = {
        **old,
        "spec": {**old["spec"], "containers": [{**old["spec"]["containers"][0], "image": "nginx:2"}]},
    }
    assert s.validate(image_change, old) == []
    tol = {
        **old,
        "spec": {
            **old["spec"],
            "tolerations": [*old["spec"]["tolerations"], {"key": "k", "operator": "Exists"}],
        },
    }
    assert s.validate(tol, old) == []
    moved = {**old, "spec": {**old["spec"], "nodeName": "n2"}}
    errors = s.validate(moved, old)
    assert [(e.type, e.field) for e in errors] == [("FieldValueForbidden", "spec")]
    # a client that omits defaulted fields is not refused
    assert s.validate(pod(nodeName="n1"), old) == []


@pytest.mark.parametrize(
    ("spec", "status", "options", "grace"),
    [
        ({"nodeName": "n"}, {}, {}, 30),
        ({"nodeName": "n", "terminationGracePeriodSeconds": 5}, {}, {}, 5),
        ({"nodeName": "n"}, {}, {"gracePeriodSeconds": 7}, 7),
        ({}, {}, {"gracePeriodSeconds": 7}, 0),
        ({"nodeName": "n"}, {"phase": "Succeeded"}, {}, 0),
        ({"nodeName": "n"}, {"phase": "Failed"}, {"gracePeriodSeconds": 9}, 0),
        ({"nodeName": "n"}, {}, {"gracePeriodSeconds": 0}, 0),
    ],
)
def test_pod_grace_period(
    spec: dict[str, Any], status: dict[str, Any], options: dict[str, Any], grace: int
) -> None:
    s = strategy_for("", "Pod")
    assert s.graceful_delete is not None
    obj = s.defaults(pod(**spec))
    obj["status"] = {**obj["status"], **status}
    if "terminationGracePeriodSeconds" not in spec:
        obj["spec"]["terminationGracePeriodSeconds"] = 30
    assert s.graceful_delete(obj, options) == grace
    assert strategy_for("", "Node").graceful_delete is None


def test_pod_field_selectors() -> None:
    selectors = strategy_for("", "Pod").field_selectors
    unscheduled = pod()
    assert selectors["spec.nodeName"](unscheduled) == ""
    assert selectors["spec.nodeName"](pod(nodeName="n1")) == "n1"
    assert selectors["spec.hostNetwork"](unscheduled) == "false"
    assert selectors["status.phase"]({**unscheduled, "status": {"phase": "Running"}}) == "Running"


def test_node_normalises_quantities_and_times() -> None:
    node = {
        "metadata": {"name": "n"},
        "status": {
            "capacity": {"cpu": 2, "memory": "8Gi"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T01:00:00.5+01:00"}
            ],
        },
    }
    out = strategy_for("", "Node").normalize(node)
    assert out["status"]["capacity"] == {"cpu": "2", "memory": "8Gi"}
    assert out["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert node["status"]["capacity"]["cpu"] == 2


def test_node_taint_validation() -> None:
    s = strategy_for("", "Node")

    def errors(taints: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(e.type, e.field) for e in s.validate({"spec": {"taints": taints}}, None)]

    assert errors([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]) == []
    assert errors([{"key": "a"}]) == [("FieldValueRequired", "metadata.taints[0].effect")]
    assert errors([{"key": "a", "effect": "Sometimes"}]) == [
        ("FieldValueNotSupported", "metadata.taints[0].effect")
    ]
    assert errors([{"key": "bad key", "effect": "NoSchedule"}]) == [
        ("FieldValueInvalid", "metadata.taints[0].key")
    ]
    assert errors([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]) == [
        ("FieldValueDuplicate", "metadata.taints[1]")
    ]
    assert strategy_for("", "Node").smp_lists["spec.taints"] == "atomic"
    assert (
        strategy_for("", "Node").field_selectors["spec.unschedulable"]({"spec": {"unschedulable": True}})
        == "true"
    )


def test_secret_string_data_merged_and_type_defaulted() -> None:
    s = strategy_for("", "Secret")
    secret = {
        "metadata": {"name": "s"},
        "data": {"a": base64.b64encode(b"old").decode()},
        "stringData": {"a": "new", "b": "x"},
    }
    out = s.defaults(s.normalize(secret))
    assert "stringData" not in out
    assert base64.b64decode(out["data"]["a"]) == b"new"
    assert base64.b64decode(out["data"]["b"]) == b"x"
    assert out["type"] == "Opaque"
    with pytest.raises(DecodeError):
        s.normalize({"metadata": {"name": "s"}, "data": {"a": "not base64!"}})


def test_namespace_defaults_on_create_only() -> None:
    s = strategy_for("", "Namespace")
    created = s.defaults({"metadata": {"name": "team"}})
    assert created["spec"]["finalizers"] == ["kubernetes"]
    assert created["status"]["phase"] == "Active"
    assert created["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team"
    finalized = {**created, "spec": {}, "status": {"phase": "Terminating"}}
    assert s.defaults(finalized)["spec"] == {}


def test_lease_microtime_rules() -> None:
    s = strategy_for("coordination.k8s.io", "Lease")
    ok = s.normalize({"spec": {"renewTime": "2026-01-01T01:00:00.123456+01:00"}})
    assert ok["spec"]["renewTime"] == "2026-01-01T00:00:00.123456Z"
    with pytest.raises(DecodeError):
        s.normalize({"spec": {"renewTime": "2026-01-01T00:00:00+00:00"}})
    errors = s.validate({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}, None)
    assert [e.field for e in errors] == ["spec.leaseDurationSeconds", "spec.leaseTransitions"]


def test_event_validation_normalisation_and_selectors() -> None:
    s = strategy_for("", "Event")
    assert [e.field for e in s.validate({"metadata": {"name": "e"}}, None)] == ["involvedObject"]
    event = {
        "involvedObject": {"kind": "Machine", "name": "m"},
        "source": {"component": "mcm"},
        "eventTime": "2026-01-01T00:00:00.000001Z",
        "firstTimestamp": "2026-01-01T00:00:00.9Z",
    }
    assert s.validate(event, None) == []
    out = s.normalize(event)
    assert out["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert s.field_selectors["involvedObject.kind"](event) == "Machine"
    assert s.field_selectors["source"](event) == "mcm"
    v1 = strategy_for("events.k8s.io", "Event")
    assert {e.field for e in v1.validate({}, None)} == {
        "eventTime",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    }


def test_pdb_validation_and_zero_status() -> None:
    s = strategy_for("policy", "PodDisruptionBudget")
    out = s.defaults({"spec": {"minAvailable": 1}})
    assert out["status"] == {
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "disruptionsAllowed": 0,
        "expectedPods": 0,
    }

    def fields(spec: dict[str, Any]) -> list[str]:
        return [e.field for e in s.validate({"spec": spec}, None)]

    assert fields({"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}) == []
    assert fields({"maxUnavailable": "25%"}) == []
    assert fields({"minAvailable": 1, "maxUnavailable": 1}) == ["spec"]
    assert fields({"minAvailable": "x%"}) == ["spec.minAvailable"]
    assert fields({"minAvailable": -1}) == ["spec.minAvailable"]
    assert fields(
        {"minAvailable": 1, "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}
    ) == ["spec.selector.matchExpressions[0].values"]
    assert fields({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"}) == [
        "spec.unhealthyPodEvictionPolicy"
    ]
    normalized = s.normalize({"status": {"disruptedPods": {"p": "2026-01-01T00:00:00.5+00:00"}}})
    assert normalized["status"]["disruptedPods"] == {"p": "2026-01-01T00:00:00Z"}


def test_volume_attachment_spec_immutable() -> None:
    s = strategy_for("storage.k8s.io", "VolumeAttachment")
    va = {"spec": {"attacher": "csi", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}}
    assert s.validate(va, None) == []
    changed = {"spec": {**va["spec"], "nodeName": "m"}}
    assert [e.detail for e in s.validate(changed, va)] == ["field is immutable"]
    assert [
        e.field for e in s.validate({"spec": {"attacher": "csi", "nodeName": "n", "source": {}}}, None)
    ] == ["spec.source"]


def crd(**overrides: Any) -> dict[str, Any]:
    spec = {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
        ],
    }
    spec.update(overrides)
    return {"metadata": {"name": "widgets.example.com"}, "spec": spec}


def test_crd_validation() -> None:
    s = strategy_for("apiextensions.k8s.io", "CustomResourceDefinition")
    assert s.validate(crd(), None) == []
    bad_name = {**crd(), "metadata": {"name": "gadgets.example.com"}}
    assert [e.field for e in s.validate(bad_name, None)] == ["metadata.name"]
    assert [e.field for e in s.validate(crd(scope="Galaxy"), None)] == ["spec.scope"]
    assert [e.field for e in s.validate(crd(versions=[]), None)] == ["spec.versions"]
    two = [
        {"name": "v1", "storage": True, "schema": {"openAPIV3Schema": {}}},
        {"name": "v2", "storage": True, "schema": {"openAPIV3Schema": {}}},
    ]
    assert [e.field for e in s.validate(crd(versions=two), None)] == ["spec.versions"]
    no_schema = [{"name": "v1", "served": True, "storage": True}]
    assert [e.field for e in s.validate(crd(versions=no_schema), None)] == [
        "spec.versions[0].schema.openAPIV3Schema"
    ]
    upper = crd(names={"plural": "Widgets", "kind": "Widget"})
    upper["metadata"]["name"] = "Widgets.example.com"
    assert "spec.names.plural" in [e.field for e in s.validate(upper, None)]
    assert [e.field for e in s.validate(crd(scope="Cluster"), crd())] == ["spec.scope"]


def test_crd_defaults_establish_on_create_only() -> None:
    s = strategy_for("apiextensions.k8s.io", "CustomResourceDefinition")
    out = s.defaults(crd())
    assert out["metadata"]["finalizers"] == [CLEANUP_FINALIZER]
    assert out["status"]["acceptedNames"] == {
        "plural": "widgets",
        "kind": "Widget",
        "singular": "widget",
        "listKind": "WidgetList",
    }
    assert out["status"]["storedVersions"] == ["v1"]
    conditions = {c["type"]: c for c in out["status"]["conditions"]}
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["Established"]["message"] == "the initial names have been accepted"
    assert is_established(out)
    released = {**out, "metadata": {**out["metadata"], "finalizers": []}}
    assert s.defaults(released)["metadata"]["finalizers"] == []
    assert schemas_by_version(out) == {"v1": {"type": "object"}}


def test_custom_strategy_prunes_defaults_and_validates() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {"size": {"type": "integer"}, "mode": {"type": "string", "default": "fast"}},
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    s = custom_strategy({"v1": schema}, status_subresource=True)
    assert s.status_subresource and s.reset_status_on_create
    assert s.tracks_generation == "non_metadata"
    assert s.unconditional_update is False
    assert s.smp_allowed is False
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1, "junk": True},
    }
    normalized, dropped = s.prune(obj)
    assert normalized["spec"] == {"size": 1} and dropped == ["spec.junk"]
    assert obj["spec"] == {"size": 1, "junk": True}  # pruning copies
    assert s.normalize(normalized) is normalized  # after pruning, nothing is left to normalize
    assert s.defaults(normalized)["spec"]["mode"] == "fast"
    bad = {**obj, "spec": {"size": "big"}}
    assert [e.field for e in s.validate(bad, None)] == ["spec.size"]
    generic = strategy_for("example.com", "Unknown")
    assert generic.normalize(obj) == obj

"""Upstream v0.47.0 ``machine_util_test.go`` (node templates, labels, annotations, taints, status
similarity, node template validation), ``machineclass_test.go`` and ``secret_test.go``
(MachineClass and Secret finalizers)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import NodeTemplate
from mcm.apis.machine.validation import validate_node_template
from mcm.controller.classes import (
    ClassInUse,
    reconcile_machine_class,
    reconcile_secret,
    update_finalizers,
)
from mcm.controller.nodesync import sync_annotations_or_labels, sync_node_templates, sync_taints
from mcm.controller.status import is_machine_status_similar
from mcm.runtime.client.rest import RESTClient

from .builders import mk_class, mk_machine, mk_node, mk_secret
from .fakes import NS, START, make_world

# --- syncMachineNodeTemplates ---------------------------------------------------------------------

TEMPLATE = {
    "metadata": {"labels": {"key1": "value1"}, "annotations": {"anno1": "anno1"}},
    "spec": {"taints": [{"key": "key1", "value": "value1", "effect": "NoSchedule"}]},
}


def _template_machine(template: dict[str, Any]) -> dict[str, Any]:
    world_clock = make_world().clock
    machine = mk_machine(world_clock, node="test-node-0", phase=c.PHASE_RUNNING)
    machine["spec"]["nodeTemplate"] = template
    return machine


@pytest.mark.parametrize(
    ("name", "node_extra"),
    [
        (
            "1 nodeTemplate is not updated in node-object",
            {
                "metadata": {"labels": {"key1": "value1"}, "annotations": {"anno1": "anno1"}},
                "spec": {"taints": [{"key": "key1", "value": "value1", "effect": "NoSchedule"}]},
            },
        ),
        ("2 nodeTemplate is updated in node-object", {}),
    ],
)
def test_8_5_1_2_node_templates_are_synced(name: str, node_extra: dict[str, Any]) -> None:
    world = make_world()
    world.nodes.put(mk_node("test-node-0", **node_extra))
    assert sync_node_templates(world.deps, _template_machine(TEMPLATE)) is None
    node = world.nodes.get("test-node-0")
    assert node["metadata"]["labels"]["key1"] == "value1"
    assert node["metadata"]["annotations"]["anno1"] == "anno1"
    assert node["spec"]["taints"] == [{"key": "key1", "value": "value1", "effect": "NoSchedule"}]
    if not node_extra:  # a node already matching the template keeps its annotations as they are
        applied = json.loads(node["metadata"]["annotations"][c.ANNOTATION_LAST_APPLIED_ALT])
        assert applied["metadata"]["labels"] == {"key1": "value1"}
    assert node["metadata"]["labels"][c.LABEL_NODE_MACHINE_NAME] == "machine-0"
    assert world.nodes.writes == [("update", "test-node-0")]


def test_8_5_3_node_object_does_not_exist() -> None:
    world = make_world()
    assert sync_node_templates(world.deps, _template_machine(TEMPLATE)) is None
    assert world.nodes.writes == []


def test_8_5_4_multiple_taints_with_same_key_and_value() -> None:
    world = make_world()
    world.nodes.put(mk_node("test-node-0"))
    taints = [
        {"key": "key1", "value": "value1", "effect": "NoExecute"},
        {"key": "key1", "value": "value1", "effect": "NoSchedule"},
    ]
    sync_node_templates(world.deps, _template_machine({"spec": {"taints": taints}}))
    assert sorted(world.nodes.get("test-node-0")["spec"]["taints"], key=lambda t: t["effect"]) == taints


def test_node_sync_without_changes_does_not_write() -> None:
    world = make_world()
    world.nodes.put(mk_node("test-node-0"))
    machine = _template_machine(TEMPLATE)
    sync_node_templates(world.deps, machine)
    sync_node_templates(world.deps, machine)
    assert world.nodes.writes == [("update", "test-node-0")]


# --- SyncMachineLabels / SyncMachineAnnotations ---------------------------------------------------

SEVEN = [
    ("1 not updated", {"k1": "v1"}, {"k1": "v1"}, {"k1": "v1"}, {"k1": "v1"}, False),
    ("2 value changed in template", {"k1": "v1"}, {"k1": "v2"}, {"k1": "v1"}, {"k1": "v2"}, True),
    (
        "3 new key in template",
        {"k1": "v1"},
        {"k1": "v1", "kNew": "vNew"},
        {"k1": "v1"},
        {"k1": "v1", "kNew": "vNew"},
        True,
    ),
    (
        "4 key removed from template",
        {"k1": "v1", "k2": "v2"},
        {"k1": "v1"},
        {"k1": "v1", "k2": "v2"},
        {"k1": "v1"},
        True,
    ),
    ("5 value changed manually on node", {"k1": "manual"}, {"k1": "v1"}, {"k1": "v1"}, {"k1": "v1"}, True),
    (
        "6 extra key added on node",
        {"k1": "v1", "extra": "x"},
        {"k1": "v1"},
        {"k1": "v1"},
        {"k1": "v1", "extra": "x"},
        False,
    ),
    (
        "7 managed keys deleted from node",
        {},
        {"k1": "v1", "k2": "v2"},
        {"k1": "v1", "k2": "v2"},
        {"k1": "v1", "k2": "v2"},
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "node", "template", "last", "expected", "changed"), SEVEN, ids=[s[0] for s in SEVEN]
)
@pytest.mark.parametrize("kind", ["8.6 SyncMachineLabels", "8.7 SyncMachineAnnotations"])
def test_8_6_8_7_labels_and_annotations(
    kind: str,
    name: str,
    node: dict[str, str],
    template: dict[str, str],
    last: dict[str, str],
    expected: dict[str, str],
    changed: bool,
) -> None:
    values = dict(node)
    assert sync_annotations_or_labels(values, template, last) is changed
    assert values == expected


# --- SyncMachineTaints ----------------------------------------------------------------------------


def t(key: str, value: str, effect: str = "NoSchedule") -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


TAINTS = [
    (
        "1 not updated",
        [t("Key1", "Value1")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1")],
        False,
    ),
    (
        "2 value changed",
        [t("Key1", "OldValue")],
        [t("Key1", "NewValue")],
        [t("Key1", "OldValue")],
        [t("Key1", "NewValue")],
        True,
    ),
    (
        "3 new taint",
        [t("Key1", "Value1")],
        [t("Key1", "Value1"), t("Key2", "Value2")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1"), t("Key2", "Value2")],
        True,
    ),
    (
        "4 taint removed from template",
        [t("Key1", "Value1"), t("Key2", "Value2")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1"), t("Key2", "Value2")],
        [t("Key1", "Value1")],
        True,
    ),
    (
        "5 manual overwrite and same key with NoExecute",
        [t("Key1", "Manual")],
        [t("Key1", "Value1"), t("Key1", "Value1", "NoExecute")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1"), t("Key1", "Value1", "NoExecute")],
        True,
    ),
    (
        "6 extra taint on node",
        [t("Key1", "Value1"), t("Extra", "x")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1"), t("Extra", "x")],
        False,
    ),
    (
        "7 managed taints deleted",
        [],
        [t("Key1", "Value1")],
        [t("Key1", "Value1")],
        [t("Key1", "Value1")],
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "node", "template", "last", "expected", "changed"), TAINTS, ids=[s[0] for s in TAINTS]
)
def test_8_8_sync_machine_taints(
    name: str,
    node: list[dict[str, Any]],
    template: list[dict[str, Any]],
    last: list[dict[str, Any]],
    expected: list[dict[str, Any]],
    changed: bool,
) -> None:
    result, did_change = sync_taints(node, template, last)
    assert did_change is changed

    def key(taint: dict[str, Any]) -> tuple[str, str]:
        return taint["key"], taint["effect"]

    assert sorted(result, key=key) == sorted(expected, key=key)


# --- isMachineStatusSimilar -----------------------------------------------------------------------

AWS = (
    "Cloud provider message - machine codes error: code = [Internal] message = [InvalidParameterValue: "
    "Value (abc) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name "
    "status code: 400, request id: {rid}]"
)


def status(description: str, ago: float = 0.0) -> dict[str, Any]:
    when = (START - _dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "lastOperation": {
            "description": description,
            "state": "Failed",
            "type": "Create",
            "lastUpdateTime": when,
        },
        "currentStatus": {"phase": "CrashLoopBackOff", "lastUpdateTime": when},
    }


@pytest.mark.parametrize(
    ("name", "first", "second", "similar"),
    [
        ("1 identical long descriptions", status(AWS.format(rid="1")), status(AWS.format(rid="1")), True),
        ("2 one updated 1 h ago", status(AWS.format(rid="1")), status(AWS.format(rid="1"), 3600), False),
        ("3 one updated 1 min ago", status(AWS.format(rid="1")), status(AWS.format(rid="1"), 60), True),
        (
            "4 long, differing request id",
            status(AWS.format(rid="aaaa-1111")),
            status(AWS.format(rid="bbbb-2222")),
            True,
        ),
        (
            "5 short, differing request id",
            status("Cloud provider message - request id: 1234"),
            status("Cloud provider message - request id: 5678"),
            True,
        ),
        (
            "6 different markers",
            status(c.MARKER_INITIATE_NODE_DELETION),
            status(c.MARKER_INITIATE_FINALIZER_REMOVAL),
            False,
        ),
    ],
)
def test_8_9_is_machine_status_similar(
    name: str, first: dict[str, Any], second: dict[str, Any], similar: bool
) -> None:
    assert is_machine_status_similar(first, second, START) is similar


# --- validateNodeTemplate -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "template", "messages"),
    [
        (
            "1 complete",
            {
                "capacity": {"cpu": "1", "gpu": "0", "memory": "1Gi"},
                "instanceType": "m",
                "region": "r",
                "zone": "z",
            },
            [],
        ),
        (
            "2 missing cpu",
            {"capacity": {"gpu": "0", "memory": "1Gi"}, "instanceType": "m", "region": "r", "zone": "z"},
            [c.MSG_NODE_TEMPLATE_CAPACITY],
        ),
        (
            "3 missing region",
            {"capacity": {"cpu": "1", "gpu": "0", "memory": "1Gi"}, "instanceType": "m", "zone": "z"},
            [c.MSG_NODE_TEMPLATE_PLACEMENT],
        ),
    ],
)
def test_8_10_validate_node_template(name: str, template: dict[str, Any], messages: list[str]) -> None:
    errors = validate_node_template(NodeTemplate.from_dict(template))
    assert [e.detail for e in errors] == messages


# --- reconcileClusterMachineClass -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "finalizer", "deleting", "machine_class", "expected", "error"),
    [
        ("1 Add finalizer to machine class", False, False, "test-mc", [c.MCM_FINALIZER], None),
        ("2 Do not add finalizer because no machines use it", False, False, None, [], None),
        ("3 Finalizer exists, so do nothing", True, False, "test-mc", [c.MCM_FINALIZER], None),
        (
            "4 Class deletion fails as machines still refer to it",
            True,
            True,
            "test-mc",
            [c.MCM_FINALIZER],
            c.ERR_CLASS_IN_USE,
        ),
        ("5 Class deletion succeeds with removal of finalizer", True, True, "DifferentClassName", [], None),
        ("6 Class deletion succeeds as no finalizer exists", False, True, "DifferentClassName", [], None),
    ],
)
def test_7_3_reconcile_cluster_machine_class(
    name: str,
    finalizer: bool,
    deleting: bool,
    machine_class: str | None,
    expected: list[str],
    error: str | None,
) -> None:
    world = make_world()
    world.classes.put(mk_class("test-mc", finalizer=finalizer, deleting=deleting))
    if machine_class is not None:
        world.machines.put(mk_machine(world.clock, "test-machine", class_name=machine_class))
    cls = world.classes.get("test-mc")
    if error is None:
        reconcile_machine_class(world.deps, cls)
    else:
        with pytest.raises(ClassInUse, match=error):
            reconcile_machine_class(world.deps, cls)
    stored = world.classes.objects.get("test-mc")
    if stored is None:  # the last finalizer of a deleting class went: the API server removed it
        assert deleting and expected == []
    else:
        assert stored["metadata"].get("finalizers", []) == expected


def test_class_in_use_enqueues_its_machines_head() -> None:
    world = make_world()
    world.classes.put(mk_class("test-mc", finalizer=False))
    world.machines.put(mk_machine(world.clock, "test-machine", class_name="test-mc"))
    reconcile_machine_class(world.deps, world.classes.get("test-mc"))
    assert ("machine", f"{NS}/test-machine") in world.enqueued


# --- Secret finalizers ----------------------------------------------------------------------------


def test_7_4_add_secret_finalizers() -> None:
    world = make_world()
    world.secrets.put(mk_secret("test-secret"))
    world.classes.put(mk_class("test-mc", secret="test-secret"))
    reconcile_secret(world.deps, world.secrets.get("test-secret"))
    assert world.secrets.get("test-secret")["metadata"]["finalizers"] == [c.MC_FINALIZER]


def test_7_4_delete_secret_finalizers() -> None:
    world = make_world()
    world.secrets.put(mk_secret("test-secret", finalizers=[c.MC_FINALIZER]))
    reconcile_secret(world.deps, world.secrets.get("test-secret"))
    assert world.secrets.get("test-secret")["metadata"]["finalizers"] == []


def test_7_4_should_not_delete_the_wrong_finalizer() -> None:
    world = make_world()
    world.secrets.put(mk_secret("test-secret", finalizers=[c.MCM_FINALIZER]))
    reconcile_secret(world.deps, world.secrets.get("test-secret"))
    assert world.secrets.get("test-secret")["metadata"]["finalizers"] == [c.MCM_FINALIZER]


def test_7_4_update_secret_finalizers() -> None:
    world = make_world()
    world.secrets.put(mk_secret("test-secret", finalizers=["finalizer2"]))
    client: RESTClient = world.deps.writers.secrets
    update_finalizers(client, NS, "test-secret", add="finalizer1")
    assert world.secrets.get("test-secret")["metadata"]["finalizers"] == ["finalizer1", "finalizer2"]

"""Node taints and cluster-autoscaler annotations of a roll-out: upstream's
``deployment_rolling_test.go``, ``deployment_rollback_test.go`` and the node-annotation cases of
``controller_utils_test.go``; HEAD #989 and defect 21."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.nodes import (
    CA_ANNOTATIONS,
    annotate_nodes,
    change_node,
    remove_ca_annotations,
    remove_taint,
    scaled_to_zero,
    taint_old_sets,
)
from mcm.manager.options import ManagerOptions
from mcm.runtime import errors
from mcm.runtime.client.errors import Conflict, ConnectionFailed, InternalError

from .builders import deployment, machine, machine_set, node
from .fakes import NS, FakeMachineController, World

BY_MCM = c.ANNOTATION_CA_SCALE_DOWN_DISABLED_BY_MCM
DISABLED = c.ANNOTATION_CA_SCALE_DOWN_DISABLED
TAINT = {"key": k.ANNOTATION_PREFER_NO_SCHEDULE, "value": "True", "effect": "PreferNoSchedule"}


def _world(
    node_annotations: dict[str, str] | None = None, *, with_node: bool = True
) -> tuple[World, DeploymentPass, dict[str, Any]]:
    world = World()
    md = world.add(world.machine_deployments, deployment(replicas=1))
    ms = world.add(world.machine_sets, machine_set("old", 1, labels={"name": "pool"}, owner=md))
    world.add(
        world.machines,
        machine("m0", owner=ms, labels={"name": "pool", c.LABEL_NODE: "node-0"}, phase=c.PHASE_RUNNING),
    )
    if with_node:
        world.add(world.nodes, node("node-0", annotations=node_annotations or {}))
    return world, DeploymentPass(world.deps, md, [ms]), ms


def test_taints_on_nodes_backing_machine_set() -> None:
    world, p, ms = _world()
    taint_old_sets(p, [ms])
    assert world.nodes["node-0"]["spec"]["taints"] == [TAINT]
    assert world.machine_sets["old"]["metadata"]["annotations"][k.ANNOTATION_PREFER_NO_SCHEDULE] == "True"
    world.nodes.writes.clear()
    taint_old_sets(p, [world.machine_sets["old"]])
    assert world.nodes.writes == []  # a marked set is skipped


def test_removed_taints_on_nodes_backing_machine_set() -> None:
    world, p, ms = _world()
    taint_old_sets(p, [ms])
    remove_taint(p, world.machine_sets["old"])
    assert world.nodes["node-0"]["spec"].get("taints") == []
    assert k.ANNOTATION_PREFER_NO_SCHEDULE not in world.machine_sets["old"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"other": "x"}, {"other": "x", **CA_ANNOTATIONS}),
        ({}, dict(CA_ANNOTATIONS)),
        (dict(CA_ANNOTATIONS), dict(CA_ANNOTATIONS)),
        ({DISABLED: "false", BY_MCM: "false"}, dict(CA_ANNOTATIONS)),
    ],
    ids=[
        "annotations present",
        "no other annotations",
        "same annotations",
        "same annotations but different value",
    ],
)
def test_annotate_nodes_backing_machine_sets(before: dict[str, str], after: dict[str, str]) -> None:
    world, p, ms = _world(before)
    annotate_nodes(p, [ms, None])
    assert world.nodes["node-0"]["metadata"].get("annotations", {}) == after


def test_annotate_when_there_are_no_nodes_backing_the_machine_sets() -> None:
    world, p, ms = _world(with_node=False)
    annotate_nodes(p, [ms])
    assert world.nodes.objects == {}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({**CA_ANNOTATIONS, "other": "x"}, {"other": "x"}),
        ({DISABLED: "true"}, {DISABLED: "true"}),
        ({}, {}),
    ],
    ids=["by-mcm annotation is present", "by-mcm annotation is not present", "no autoscaler annotations"],
)
def test_remove_autoscaler_annotations_if_required(before: dict[str, str], after: dict[str, str]) -> None:
    world, p, ms = _world(before)
    remove_ca_annotations(p, [ms])
    assert world.nodes["node-0"]["metadata"].get("annotations", {}) == after


def test_removing_ca_annotations_tries_every_node_and_raises_the_failure() -> None:
    """Upstream stopped at the first Node it could not write, leaving the rest annotated."""
    world, p, ms = _world(dict(CA_ANNOTATIONS))
    world.add(
        world.machines,
        machine("m1", owner=ms, labels={"name": "pool", c.LABEL_NODE: "node-1"}, phase=c.PHASE_RUNNING),
    )
    world.add(world.nodes, node("node-1", annotations=dict(CA_ANNOTATIONS)))
    world.nodes.fail("patch", InternalError({"message": "cannot write", "code": 500}), times=1000)
    with pytest.raises(InternalError, match="cannot write"):
        remove_ca_annotations(p, [ms])
    assert len(world.nodes.failures["patch"]) == 998  # one attempt on each Node


def test_a_broken_connection_on_a_node_write_is_an_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writes run on threads of their own: what escapes one goes to handle_crash, which
    ends the command's process; a broken connection must come back as an error instead."""
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", lambda: pytest.fail("a broken connection ended the process"))
    world, p, ms = _world(dict(CA_ANNOTATIONS))
    world.nodes.fail("patch", ConnectionFailed("connection reset"), times=1)
    with pytest.raises(ConnectionFailed):
        remove_ca_annotations(p, [ms])
    annotate_nodes(p, [ms])


def test_a_node_write_conflict_is_retried_on_a_fresh_node() -> None:
    world, _, _ = _world({"kept": "yes"})
    world.nodes.fail("update", Conflict({"message": "conflict", "code": 409}), times=2)
    seen: list[Mapping[str, Any]] = []

    def add_new(node: Mapping[str, Any]) -> dict[str, Any]:
        seen.append(node)
        meta = node["metadata"]
        return {**node, "metadata": {**meta, "annotations": {**meta["annotations"], "new": "1"}}}

    change_node(world.deps, "node-0", add_new)
    assert world.nodes["node-0"]["metadata"]["annotations"] == {"kept": "yes", "new": "1"}
    assert len(seen) == 4  # the cached copy, then a fresh read before each write
    assert all(node["metadata"]["annotations"] == {"kept": "yes"} for node in seen)


def _other_writer(world: World, label: str, annotation: str) -> None:
    """Another writer (the machine controller registering the Node, say) adds a label and an
    annotation to node-0; the manager's cache does not see it while the world lags."""
    current = world.nodes["node-0"]
    meta = current["metadata"]
    world.nodes.update(
        {
            **current,
            "metadata": {
                **meta,
                "labels": {**(meta.get("labels") or {}), label: "controller"},
                "annotations": {**(meta.get("annotations") or {}), annotation: "controller"},
            },
        }
    )


def test_annotations_are_added_by_one_merge_patch_without_a_read() -> None:
    world, p, ms = _world({"kept": "yes"})
    annotate_nodes(p, [ms])
    assert world.nodes.requests == [("patch", "node-0")]
    assert world.nodes.patches == [{"metadata": {"annotations": dict(CA_ANNOTATIONS)}}]
    assert world.nodes["node-0"]["metadata"]["annotations"] == {"kept": "yes", **CA_ANNOTATIONS}


def test_annotations_are_removed_by_one_merge_patch_of_nulls_without_a_read() -> None:
    world, p, ms = _world({**CA_ANNOTATIONS, "kept": "yes"})
    remove_ca_annotations(p, [ms])
    assert world.nodes.requests == [("patch", "node-0")]
    assert world.nodes.patches == [{"metadata": {"annotations": {DISABLED: None, BY_MCM: None}}}]
    assert world.nodes["node-0"]["metadata"]["annotations"] == {"kept": "yes"}


def test_a_node_another_writer_changes_right_before_the_managers_write_costs_no_conflict() -> None:
    """Regression: the machine controller writes a new Node as it registers, at the moment a
    roll-out pass annotates it. The manager's GET-then-PUT met a 409 there and wrote again (4.09
    target writes a machine at N = 100 against upstream's 4.00); one merge patch has nothing
    to conflict with."""
    world, p, ms = _world({"kept": "yes"})
    world.nodes.before(("update", "patch"), lambda: _other_writer(world, "registered", "by-controller"))
    annotate_nodes(p, [ms])
    assert world.nodes.requests == [("patch", "node-0")]
    metadata = world.nodes["node-0"]["metadata"]
    assert metadata["labels"] == {"registered": "controller"}
    assert metadata["annotations"] == {"kept": "yes", "by-controller": "controller", **CA_ANNOTATIONS}


def test_a_concurrent_writers_label_and_annotation_stay_when_the_cache_lags() -> None:
    """The cache has not seen the other writer's change: the patches (on and off) keep it."""
    world, p, ms = _world({"kept": "yes"})
    with world.lag():
        _other_writer(world, "first", "first")
        annotate_nodes(p, [ms])
        _other_writer(world, "second", "second")
        remove_ca_annotations(p, [ms])
    assert world.nodes.requests == [("patch", "node-0"), ("patch", "node-0")]
    metadata = world.nodes["node-0"]["metadata"]
    assert metadata["labels"] == {"first": "controller", "second": "controller"}
    assert metadata["annotations"] == {"kept": "yes", "first": "controller", "second": "controller"}


def test_a_conflict_is_never_an_answer_to_the_annotation_patches() -> None:
    """The patch names no resourceVersion: whatever the Node's version, it applies."""
    world, p, ms = _world()
    for _ in range(3):
        _other_writer(world, "busy", "busy")
    with world.lag():
        _other_writer(world, "late", "late")
        annotate_nodes(p, [ms])
    assert all("resourceVersion" not in body["metadata"] for body in world.nodes.patches)
    assert world.nodes.requests == [("patch", "node-0")]


def test_a_missing_node_is_nothing_to_do_for_the_annotation_patch() -> None:
    world, p, ms = _world({**CA_ANNOTATIONS})
    with world.lag():
        world.nodes.delete("node-0")
        remove_ca_annotations(p, [ms])
    assert world.nodes.requests == [("patch", "node-0")]
    assert "node-0" not in world.nodes.objects


def test_a_taint_another_writer_adds_between_the_read_and_the_write_is_kept() -> None:
    """Taints are one list: the taint write carries the read's resourceVersion, so a taint added
    meanwhile makes it conflict, and it is made again on a fresh read that has that taint."""
    world, p, ms = _world()
    other = {"key": "other", "value": "x", "effect": "NoSchedule"}

    def add_other_taint() -> None:
        current = world.nodes["node-0"]
        world.nodes.update({**current, "spec": {**current["spec"], "taints": [other]}})

    world.nodes.before("update", add_other_taint)
    taint_old_sets(p, [ms])
    assert world.nodes["node-0"]["spec"]["taints"] == [other, TAINT]
    assert world.nodes.requests == [
        ("get", "node-0"),
        ("update", "node-0"),
        ("get", "node-0"),
        ("update", "node-0"),
    ]


def test_a_missing_node_is_nothing_to_do() -> None:
    world, _, _ = _world(with_node=False)
    change_node(world.deps, "node-0", dict)
    assert world.nodes.writes == []


def test_scaled_to_zero_means_no_set_wants_or_has_machines() -> None:
    """Defect 21: upstream required all five counters of a set to be non-zero before it counted
    as not scaled to zero, so a set without ready machines suppressed the annotations."""
    unready = machine_set("a", 2)
    unready["status"] = {"replicas": 2, "availableReplicas": 0, "readyReplicas": 0, "fullyLabeledReplicas": 2}
    assert scaled_to_zero([unready]) is False
    empty = machine_set("b", 0)
    empty["status"] = {"replicas": 0}
    assert scaled_to_zero([empty, None]) is True
    draining = machine_set("c", 0)
    draining["status"] = {"replicas": 1}
    assert scaled_to_zero([draining]) is False


def test_a_roll_out_annotates_nodes_and_cleans_up_at_the_end() -> None:
    world = World()
    controller = FakeMachineController(world)
    world.add(world.machine_deployments, deployment(replicas=2))
    world.settle(controller)
    body = world.machine_deployments.read("pool")
    body["spec"]["template"]["spec"]["class"]["name"] = "class-b"
    world.machine_deployments.update(body)
    seen: list[bool] = []
    world.listeners.append(
        lambda w: seen.append(
            any((n["metadata"].get("annotations") or {}).get(BY_MCM) for n in w.nodes.objects.values())
        )
    )
    world.settle(controller)
    assert any(seen)
    assert all(not (n["metadata"].get("annotations") or {}) for n in world.nodes.objects.values())
    assert all(not n["spec"].get("taints") for n in world.nodes.objects.values())


def test_the_taint_is_removed_when_the_roll_out_returns_to_an_old_template() -> None:
    """HEAD #989 (defect 32): the taint stuck after returning to an old template."""
    world = World()
    controller = FakeMachineController(world)
    world.add(world.machine_deployments, deployment(replicas=1, max_surge=0, max_unavailable=1))
    world.settle(controller)
    first = next(iter(world.nodes.objects))
    controller.hold.add(next(iter(world.machines.objects)))
    for class_name in ("class-b", "class-a"):
        body = world.machine_deployments.read("pool")
        body["spec"]["template"]["spec"]["class"]["name"] = class_name
        world.machine_deployments.update(body)
        world.reconcile_deployment("pool")
    controller.hold.clear()
    world.settle(controller)
    assert world.nodes[first]["spec"].get("taints") == []
    annotations = [ms["metadata"].get("annotations", {}) for ms in world.machine_sets.objects.values()]
    assert all(
        k.ANNOTATION_PREFER_NO_SCHEDULE not in a for a in annotations if a.get(k.ANNOTATION_REVISION) == "3"
    )


def test_without_a_target_cluster_nodes_are_left_alone() -> None:
    world = World(ManagerOptions(namespace=NS), target=False)
    controller = FakeMachineController(world, with_nodes=False)
    world.add(world.machine_deployments, deployment(replicas=1))
    world.settle(controller)
    body = world.machine_deployments.read("pool")
    body["spec"]["template"]["spec"]["class"]["name"] = "class-b"
    world.machine_deployments.update(body)
    world.settle(controller)
    assert world.nodes.writes == [] and len(world.machines.objects) == 1

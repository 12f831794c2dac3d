"""The MachineDeployment reconcile: upstream v0.47.0's ``deployment_test.go``,
``deployment_sync_test.go`` and ``deployment_util_test.go`` cases, and the fixes of defects 3,
4, 12, 17, 18, 25, 26 and 27."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.newset import find_new_set, sets_and_sync_revision
from mcm.manager.revisions import set_new_set_annotations
from mcm.runtime.client.errors import Conflict, InternalError
from mcm.runtime.worker import Result

from .builders import deployment, machine, machine_set
from .fakes import FakeMachineController, World


def _settled(md: dict[str, Any], *, with_controller: bool = True) -> tuple[World, FakeMachineController]:
    world = World()
    controller = FakeMachineController(world)
    world.add(world.machine_deployments, md)
    world.settle(controller if with_controller else None)
    return world, controller


def _change(world: World, change: Any, name: str = "pool") -> None:
    body = world.machine_deployments.read(name)
    change(body)
    world.machine_deployments.update(body)


def _sets(world: World) -> dict[str, int]:
    return {name: ms["spec"]["replicas"] for name, ms in world.machine_sets.objects.items()}


def _class(name: str) -> Any:
    return lambda d: d["spec"]["template"]["spec"]["class"].update(name=name)


# --- #reconcileClusterMachineDeployment --------------------------------------------------------------


def test_reconcile_the_machine_deployment_and_return_nil() -> None:
    world = World()
    world.add(world.machine_deployments, deployment(replicas=1))
    assert world.reconcile_deployment("pool") == Result.after(600.0)
    assert world.errors == []


def test_create_a_machine_set_while_reconciling() -> None:
    world = World()
    world.add(world.machine_deployments, deployment(replicas=3))
    world.reconcile_deployment("pool")
    assert len(world.machine_sets.objects) == 1
    ms = next(iter(world.machine_sets.objects.values()))
    hash_value = ms["metadata"]["labels"][c.LABEL_MACHINE_TEMPLATE_HASH]
    assert ms["spec"]["selector"]["matchLabels"] == {
        "name": "pool",
        c.LABEL_MACHINE_TEMPLATE_HASH: hash_value,
    }
    assert ms["spec"]["template"]["metadata"]["labels"][c.LABEL_MACHINE_TEMPLATE_HASH] == hash_value
    assert ms["spec"]["replicas"] == 3
    ref = ms["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"], ref["blockOwnerDeletion"]) == (
        "MachineDeployment",
        "pool",
        True,
        True,
    )
    assert ms["metadata"]["annotations"] == {
        k.ANNOTATION_REVISION: "1",
        k.ANNOTATION_DESIRED_REPLICAS: "3",
        k.ANNOTATION_MAX_REPLICAS: "4",
    }
    assert (
        "MachineDeployment",
        "pool",
        "Normal",
        "ScalingMachineSet",
        f"Scaled up machine set {ms['metadata']['name']} to 3",
    ) in world.events.recorded


def test_should_not_create_new_machine_set_if_label_selector_is_empty() -> None:
    world = World()
    body = deployment(replicas=1)
    body["spec"]["selector"] = {}
    body["spec"]["template"]["metadata"]["labels"] = {"name": "pool"}
    world.add(world.machine_deployments, body)
    world.reconcile_deployment("pool")
    assert world.machine_sets.objects == {}
    assert ("Warning", "SelectingAll", k.MSG_SELECTING_ALL) in [r[2:] for r in world.events.recorded]
    assert world.machine_deployments["pool"]["status"]["observedGeneration"] == 1


def test_should_remove_the_finalizer_from_deployment_when_deleted_and_no_machine_sets_are_available() -> None:
    world = World()
    world.add(world.machine_deployments, deployment(replicas=0))
    world.reconcile_deployment("pool")
    world.machine_sets.objects.clear()
    world.machine_deployments.delete("pool")
    world.reconcile_deployment("pool")
    assert world.machine_deployments.objects == {}


def test_should_not_create_new_machine_set_with_dummy_unknown_strategy() -> None:
    world = World()
    world.add(world.machine_deployments, deployment(replicas=1, strategy="dummy-unknown"))
    assert world.reconcile_deployment("pool") == Result()
    assert world.machine_sets.objects == {}
    condition = world.machine_deployments["pool"]["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Progressing",
        "False",
        "InvalidSpec",
    )
    assert "Type can either be RollingUpdate or Recreate" in condition["message"]


def test_recreate_case_should_create_new_machine_set() -> None:
    world, _ = _settled(deployment(replicas=2, strategy="Recreate"))
    assert len(world.machine_sets.objects) == 1 and len(world.machines.objects) == 2


def test_recreate_case_should_completely_scale_down_the_old_set_then_fully_scale_up_the_new_one() -> None:
    world, controller = _settled(deployment(replicas=2, strategy="Recreate"))
    old = next(iter(world.machine_sets.objects))
    _change(world, _class("class-b"))
    world.reconcile_deployment("pool")
    assert _sets(world) == {old: 0}  # no new set while old machines exist
    world.settle(controller)
    new = next(name for name in world.machine_sets.objects if name != old)
    assert _sets(world) == {old: 0, new: 2}
    assert {m["spec"]["class"]["name"] for m in world.machines.objects.values()} == {"class-b"}


def test_rolling_update_case_should_create_new_machine_set_with_rolling_update() -> None:
    world, _ = _settled(deployment(replicas=3, max_surge=1, max_unavailable=1))
    _change(world, _class("class-b"))
    world.reconcile_deployment("pool")
    assert len(world.machine_sets.objects) == 2


def test_rolling_update_case_new_and_old_sets_get_the_desired_replicas_without_overshooting() -> None:
    """Upstream's test expects new = maxSurge + 1 here: its second scale-up of the pass counted the
    new set's machines by a status that had not caught up yet. mcm counts the larger of spec and
    status, and stays within replicas + maxSurge."""
    world, _ = _settled(deployment(replicas=3, max_surge=1, max_unavailable=1))
    old = next(iter(world.machine_sets.objects))
    _change(world, _class("class-b"))
    with world.lag():  # the caches do not see the new set's machines yet
        world.reconcile_deployment("pool")
        world.reconcile_deployment("pool")
    new = next(name for name in world.machine_sets.objects if name != old)
    assert _sets(world)[new] == 1  # maxSurge
    assert _sets(world)[old] == 2  # replicas - maxUnavailable


def test_rolling_back_case_points_to_the_old_class_and_clears_rollback_to() -> None:
    world, controller = _settled(deployment(replicas=2))
    _change(world, _class("class-b"))
    world.settle(controller)
    _change(world, lambda d: d["spec"].update(rollbackTo={"revision": 0}))
    world.reconcile_deployment("pool")
    md = world.machine_deployments["pool"]
    assert "rollbackTo" not in md["spec"]
    assert md["spec"]["template"]["spec"]["class"]["name"] == "class-a"
    assert c.LABEL_MACHINE_TEMPLATE_HASH not in md["spec"]["template"]["metadata"]["labels"]
    assert ("Normal", "DeploymentRollback", 'Rolled back deployment "pool" to revision 1') in [
        r[2:] for r in world.events.recorded
    ]
    world.settle(controller)
    assert {m["spec"]["class"]["name"] for m in world.machines.objects.values()} == {"class-a"}
    revisions = {
        ms["spec"]["template"]["spec"]["class"]["name"]: ms["metadata"]["annotations"]
        for ms in world.machine_sets.objects.values()
    }
    assert revisions["class-a"][k.ANNOTATION_REVISION] == "3"
    assert revisions["class-a"][k.ANNOTATION_REVISION_HISTORY] == "1"


@pytest.mark.parametrize(
    ("revision", "event"),
    [
        (0, ("Warning", "DeploymentRollbackRevisionNotFound", "Unable to find last revision.")),
        (7, ("Warning", "DeploymentRollbackRevisionNotFound", "Unable to find the revision to rollback to.")),
        (
            1,
            (
                "Warning",
                "DeploymentRollbackTemplateUnchanged",
                'The rollback revision contains the same template as current deployment "pool"',
            ),
        ),
    ],
)
def test_rollback_that_cannot_roll_back_clears_rollback_to(
    revision: int, event: tuple[str, str, str]
) -> None:
    world, _ = _settled(deployment(replicas=1))
    _change(world, lambda d: d["spec"].update(rollbackTo={"revision": revision}))
    world.reconcile_deployment("pool")
    assert "rollbackTo" not in world.machine_deployments["pool"]["spec"]
    assert event in [r[2:] for r in world.events.recorded]


def test_paused_case_replicas_of_the_machine_set_should_not_change_after_the_paused_field_is_set() -> None:
    world, controller = _settled(deployment(replicas=2))
    _change(world, lambda d: (d["spec"].update(paused=True), _class("class-b")(d)))
    world.settle(controller)
    assert list(_sets(world).values()) == [2]
    assert {m["spec"]["class"]["name"] for m in world.machines.objects.values()} == {"class-a"}


def test_a_paused_deployment_still_scales() -> None:
    world, controller = _settled(deployment(replicas=2))
    _change(world, lambda d: d["spec"].update(paused=True, replicas=4))
    world.settle(controller)
    assert list(_sets(world).values()) == [4] and len(world.machines.objects) == 4


def test_paused_and_resumed_conditions_with_a_progress_deadline() -> None:
    world, _ = _settled(deployment(replicas=1, progressDeadlineSeconds=600))
    _change(world, lambda d: d["spec"].update(paused=True))
    world.reconcile_deployment("pool")
    progressing = _condition(world, "Progressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "Unknown",
        "DeploymentPaused",
        "Deployment is paused",
    )
    _change(world, lambda d: d["spec"].update(paused=False))
    world.reconcile_deployment("pool")
    assert _condition(world, "Progressing")["reason"] in ("DeploymentResumed", "NewMachineSetAvailable")


def _condition(world: World, kind: str, name: str = "pool") -> dict[str, Any]:
    conditions = world.machine_deployments[name]["status"]["conditions"]
    return next(c for c in conditions if c["type"] == kind)


# --- deletion -----------------------------------------------------------------------------------


def test_terminate_machine_sets_deletes_all_the_machine_sets() -> None:
    world, controller = _settled(deployment(replicas=2))
    world.machine_deployments.delete("pool")
    world.settle(controller)
    assert world.machine_sets.objects == {} and world.machines.objects == {}
    assert world.machine_deployments.objects == {}


def test_delete_machine_deployment_finalizers_removes_only_ours() -> None:
    world = World()
    body = deployment(replicas=0)
    body["metadata"]["finalizers"] = ["other.example.com/keep"]
    world.add(world.machine_deployments, body)
    world.reconcile_deployment("pool")
    assert world.machine_deployments["pool"]["metadata"]["finalizers"] == [
        "other.example.com/keep",
        c.MCM_FINALIZER,
    ]
    world.machine_sets.objects.clear()
    world.machine_deployments.delete("pool")
    world.reconcile_deployment("pool")
    assert world.machine_deployments["pool"]["metadata"]["finalizers"] == ["other.example.com/keep"]


def test_a_failing_finalizer_update_is_an_error_not_an_endless_retry() -> None:
    """Defect 12: upstream retried recursively without limit and ignored the outcome."""
    world = World()
    world.add(world.machine_deployments, deployment(replicas=1))
    world.machine_deployments.fail("update", InternalError({"message": "down", "code": 500}), times=3)
    with pytest.raises(InternalError):
        world.reconcile_deployment("pool")
    assert len(world.machine_deployments.failures["update"]) == 2
    assert world.machine_sets.objects == {}


def test_the_first_pass_of_a_new_deployment_does_not_conflict_with_itself() -> None:
    """Defect 27: upstream went on with the copy from before its finalizer write."""
    world = World()
    world.add(world.machine_deployments, deployment(replicas=1, progressDeadlineSeconds=60))
    assert world.reconcile_deployment("pool") != Result.after(c.CONFLICT_RETRY)
    assert len(world.machine_sets.objects) == 1
    md = world.machine_deployments["pool"]
    assert md["metadata"]["annotations"][k.ANNOTATION_REVISION] == "1"
    assert _condition(world, "Progressing")["reason"] in ("NewMachineSetCreated", "MachineSetUpdated")


# --- #getMachineSetsForMachineDeployment / #getMachineMapForMachineDeployment ----------------------


def _pass(world: World) -> DeploymentPass:
    from mcm.manager.deployment import _claim

    p = DeploymentPass(world.deps, world.machine_deployments.read("pool"))
    _claim(p)
    return p


@pytest.mark.parametrize(
    ("labels", "claimed"),
    [
        ([{"name": "pool"}, {"name": "pool"}], 2),
        ([{"name": "x"}, {"name": "y"}], 0),
        ([{"name": "pool"}, {"name": "x"}], 1),
    ],
    ids=[
        "return both machineSets as selector matches.",
        "return no machineSets as selector matches none.",
        "return only one machineSet as other one doesnt match the selector",
    ],
)
def test_get_machine_sets_for_machine_deployment(labels: list[dict[str, str]], claimed: int) -> None:
    world = World()
    world.add(world.machine_deployments, deployment(replicas=0))
    for i, label in enumerate(labels):
        world.add(world.machine_sets, machine_set(f"s{i}", 0, labels=label))
    assert len(_pass(world).machine_sets) == claimed


def test_return_no_machine_sets_as_selector_is_invalid() -> None:
    world = World()
    body = deployment(replicas=0)
    body["spec"]["selector"] = {"matchExpressions": [{"key": "name", "operator": "Bogus"}]}
    world.add(world.machine_deployments, body)
    world.add(world.machine_sets, machine_set("s0", 0, labels={"name": "pool"}))
    world.reconcile_deployment("pool")
    assert "ownerReferences" not in world.machine_sets["s0"]["metadata"]
    assert "spec.selector" in _condition(world, "Progressing")["message"]


@pytest.mark.parametrize(
    ("matching", "mapped"),
    [(True, 2), (False, 0)],
    ids=["return all the machines in the map", "return none as selector doesnt match"],
)
def test_get_machine_map_for_machine_deployment(matching: bool, mapped: int) -> None:
    world = World()
    md = world.add(world.machine_deployments, deployment(replicas=0))
    ms = world.add(world.machine_sets, machine_set("s0", 0, labels={"name": "pool"}, owner=md))
    labels = {"name": "pool"} if matching else {"name": "other"}
    for i in range(2):
        world.add(world.machines, machine(f"m{i}", owner=ms, labels=labels))
    assert len(_pass(world).machine_map[ms["metadata"]["uid"]]) == mapped


# --- #getNewMachineSet --------------------------------------------------------------------------------


def test_when_new_machine_set_is_not_found_a_new_one_is_created_with_a_different_name() -> None:
    world, _ = _settled(deployment(replicas=1))
    old = next(iter(world.machine_sets.objects))
    _change(world, _class("class-b"))
    p = _pass(world)
    new_set, old_sets = sets_and_sync_revision(p, create=True)
    assert new_set is not None and new_set["metadata"]["name"] not in (old, "")
    assert [s["metadata"]["name"] for s in old_sets] == [old]


@pytest.mark.parametrize("change", ["nodeTemplate is added", "nodeTemplate is modified"])
def test_when_new_machine_set_is_found_it_gets_the_deployment_s_node_template(change: str) -> None:
    world, controller = _settled(deployment(replicas=1))
    if change == "nodeTemplate is modified":
        _change(
            world,
            lambda d: d["spec"]["template"]["spec"].update(nodeTemplate={"metadata": {"labels": {"a": "1"}}}),
        )
        world.settle(controller)
    name = next(iter(world.machine_sets.objects))
    node_template = {
        "metadata": {"labels": {"a": "2"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
    }
    _change(world, lambda d: d["spec"]["template"]["spec"].update(nodeTemplate=node_template))
    world.settle(controller)
    assert list(world.machine_sets.objects) == [name]
    assert world.machine_sets[name]["spec"]["template"]["spec"]["nodeTemplate"] == node_template
    assert all(m["spec"]["nodeTemplate"] == node_template for m in world.machines.objects.values())


def test_set_new_machine_set_node_template_and_configuration_report_changes() -> None:
    world, _ = _settled(deployment(replicas=1))
    name = next(iter(world.machine_sets.objects))
    world.machine_sets.writes.clear()
    world.reconcile_deployment("pool")
    assert ("update", name) not in world.machine_sets.writes  # nothing changed: nothing written
    _change(world, lambda d: d["spec"]["template"]["spec"].update(drainTimeout="3h", maxEvictRetries=5))
    world.reconcile_deployment("pool")
    spec = world.machine_sets[name]["spec"]["template"]["spec"]
    assert (spec["drainTimeout"], spec["maxEvictRetries"]) == ("3h", 5)


def test_annotations_are_copied_to_the_new_set_except_the_skipped_ones() -> None:
    world, _ = _settled(deployment(replicas=1))
    _change(
        world,
        lambda d: d["metadata"].update(
            annotations={
                **d["metadata"].get("annotations", {}),
                "team": "a",
                k.ANNOTATION_LAST_APPLIED_CONFIGURATION: "{}",
                k.ANNOTATION_UNFREEZE: "True",
            }
        ),
    )
    world.reconcile_deployment("pool")
    annotations = next(iter(world.machine_sets.objects.values()))["metadata"]["annotations"]
    assert annotations["team"] == "a"
    assert (
        k.ANNOTATION_LAST_APPLIED_CONFIGURATION not in annotations
        and k.ANNOTATION_UNFREEZE not in annotations
    )


def test_the_revision_history_collects_no_duplicates() -> None:
    """Defect 18: any annotation or template-field change appended the revision again."""
    ms = {"metadata": {"name": "s", "annotations": {k.ANNOTATION_REVISION: "2"}}}
    md = {"metadata": {"annotations": {"team": "a"}}}
    assert set_new_set_annotations(md, ms, 2, None) is True
    assert k.ANNOTATION_REVISION_HISTORY not in ms["metadata"]["annotations"]
    assert set_new_set_annotations(md, ms, 3, None) is True
    assert set_new_set_annotations({"metadata": {"annotations": {"team": "b"}}}, ms, 3, None) is True
    assert ms["metadata"]["annotations"][k.ANNOTATION_REVISION_HISTORY] == "2"
    assert set_new_set_annotations(md, ms, 5, None) is True
    assert ms["metadata"]["annotations"][k.ANNOTATION_REVISION_HISTORY] == "2,3"


def test_the_deployment_revision_annotation_is_written_in_the_pass_that_creates_the_set() -> None:
    """Defect 17: it went out with a status write, which drops annotations, and lagged a pass."""
    world = World()
    world.add(world.machine_deployments, deployment(replicas=1))
    world.reconcile_deployment("pool")
    assert world.machine_deployments["pool"]["metadata"]["annotations"][k.ANNOTATION_REVISION] == "1"


def test_a_name_taken_by_another_template_raises_the_collision_count() -> None:
    world = World()
    md = world.add(world.machine_deployments, deployment(replicas=1))
    p = DeploymentPass(world.deps, md)
    with world.lag():
        name = sets_and_sync_revision(p, create=True)[0]["metadata"]["name"]  # type: ignore[index]
    taken = world.machine_sets.read(name)
    world.machine_sets.objects.clear()
    taken["spec"]["template"]["spec"]["class"]["name"] = "somebody-elses"
    taken["metadata"]["ownerReferences"] = []
    world.machine_sets.create({**taken, "metadata": {**taken["metadata"], "labels": {"other": "x"}}})
    result = world.reconcile_deployment("pool")
    assert result == Result.after(c.CONFLICT_RETRY)
    assert world.machine_deployments["pool"]["status"]["collisionCount"] == 1
    world.reconcile_deployment("pool")
    assert len(world.machine_sets.objects) == 2


def test_an_existing_set_of_the_same_name_and_template_is_taken_over() -> None:
    """Another manager (upstream's) created the set the same way: it is used, not duplicated."""
    world = World()
    md = world.add(world.machine_deployments, deployment(replicas=2))
    p = DeploymentPass(world.deps, md)
    with world.lag():
        created = sets_and_sync_revision(p, create=True)[0]
        assert created is not None
        world.reconcile_deployment("pool")
    assert len(world.machine_sets.objects) == 1


def test_find_new_set_takes_the_oldest_equal_template() -> None:
    md = deployment(replicas=1)
    a, b = machine_set("a", 1, labels={"name": "pool"}), machine_set("b", 1, labels={"name": "pool"})
    a["metadata"]["creationTimestamp"], b["metadata"]["creationTimestamp"] = (
        "2026-01-02T00:00:00Z",
        "2026-01-01T00:00:00Z",
    )
    assert find_new_set(md, [a, b])["metadata"]["name"] == "b"  # type: ignore[index]


# --- hash back-fill (defect 25) ----------------------------------------------------------------------


def test_a_set_without_the_hash_label_is_back_filled_step_by_step_without_blocking() -> None:
    world = World()
    md = world.add(world.machine_deployments, deployment(replicas=1))
    legacy = machine_set("legacy", 1, labels={"name": "pool"}, owner=md)
    ms = world.add(world.machine_sets, legacy)
    world.add(world.machines, machine("m0", owner=ms, labels={"name": "pool"}, phase=c.PHASE_RUNNING))
    results = []
    for _ in range(8):
        results.append(world.reconcile_deployment("pool"))
        world.reconcile_set("legacy")
    assert Result.after(k.HASH_BACKFILL_POLL) in results
    ms = world.machine_sets["legacy"]
    value = ms["spec"]["selector"]["matchLabels"][c.LABEL_MACHINE_TEMPLATE_HASH]
    assert ms["metadata"]["labels"][c.LABEL_MACHINE_TEMPLATE_HASH] == value
    assert world.machines["m0"]["metadata"]["labels"][c.LABEL_MACHINE_TEMPLATE_HASH] == value
    assert len(world.machine_sets.objects) == 1


# --- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["spec"].pop("selector"), "spec.selector: selector is required"),
        (
            lambda d: d["spec"]["selector"].update(matchLabels={"name": "other"}),
            "spec.selector.matchLabels: is not matching with spec.template.metadata.labels",
        ),
        (lambda d: d["spec"].update(replicas=-1), "spec.replicas: Replicas has to be a whole number"),
        (
            lambda d: d["spec"]["template"]["spec"].pop("class"),
            "spec.template.spec.class.kind: Kind is required",
        ),
        (
            lambda d: d["spec"]["strategy"].pop("rollingUpdate"),
            "spec.strategy.rollingUpdate: RollingUpdate parameter cannot be nil for rolling update strategy",
        ),
        (
            lambda d: d["spec"]["strategy"].update(type="InPlaceUpdate"),
            "InPlaceUpdate strategy is not supported",
        ),
        (
            lambda d: d["spec"]["strategy"]["rollingUpdate"].update(maxSurge="x%"),
            "spec.strategy.rollingUpdate.maxSurge: unable to convert maxSurge to int32",
        ),
        (
            lambda d: d["spec"]["strategy"]["rollingUpdate"].update(maxUnavailable=-1),
            "spec.strategy.rollingUpdate.maxUnavailable: must be greater than or equal to 0",
        ),
    ],
    ids=[
        "nil selector",
        "selector not matching the template",
        "negative replicas",
        "missing class",
        "RollingUpdate without rollingUpdate",
        "InPlaceUpdate",
        "maxSurge not a number",
        "negative maxUnavailable",
    ],
)
def test_bad_input_is_a_condition_and_an_event_and_valid_deployments_keep_working(
    change: Any, message: str
) -> None:
    """Defects 3 and 4: a nil selector or rollingUpdate crashed upstream."""
    world = World()
    controller = FakeMachineController(world)
    bad = deployment("bad", replicas=2)
    change(bad)
    world.add(world.machine_deployments, bad)
    world.add(world.machine_deployments, deployment("good", replicas=2))
    world.settle(controller)
    condition = _condition(world, "Progressing", "bad")
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert message in condition["message"]
    assert [r[3] for r in world.events.recorded if r[1] == "bad"] == ["InvalidSpec"]
    good_sets = [
        ms for ms in world.machine_sets.objects.values() if ms["metadata"]["labels"]["name"] == "good"
    ]
    assert [ms["spec"]["replicas"] for ms in good_sets] == [2] and len(world.machines.objects) == 2
    _change(world, lambda d: d["spec"].update(deployment("bad", replicas=2)["spec"]), "bad")
    world.settle(controller)
    assert "InvalidSpec" not in [
        c["reason"] for c in world.machine_deployments["bad"]["status"]["conditions"]
    ]
    assert len(world.machines.objects) == 4


def test_a_write_conflict_is_retried_shortly_not_as_an_error() -> None:
    world = World()
    world.add(world.machine_deployments, deployment(replicas=1))
    world.machine_sets.fail("create", Conflict({"message": "conflict", "code": 409}), times=1)
    assert world.reconcile_deployment("pool") == Result.after(c.CONFLICT_RETRY)


def test_status_fields() -> None:
    world, controller = _settled(deployment(replicas=3))
    status = world.machine_deployments["pool"]["status"]
    assert {
        f: status[f]
        for f in (
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "observedGeneration",
        )
    } == {
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "unavailableReplicas": 0,
        "observedGeneration": 1,
    }
    available = _condition(world, "Available")
    assert (available["status"], available["reason"], available["message"]) == (
        "True",
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )
    controller.fail(next(iter(world.machines.objects)))
    controller.paused = True  # the replacement does not come up
    world.settle(controller)
    status = world.machine_deployments["pool"]["status"]
    assert status["availableReplicas"] == 2 and _condition(world, "Available")["status"] == "False"
    assert status["failedMachines"][0]["lastOperation"]["state"] == "Failed"


def test_helpers_do_not_adopt_machines_as_a_side_effect() -> None:
    """Defect 26: tainting and annotating claimed (adopted or released) machines."""
    world, controller = _settled(deployment(replicas=1))
    world.add(
        world.machines,
        machine("stray", labels=dict(next(iter(world.machines.objects.values()))["metadata"]["labels"])),
    )
    _change(world, _class("class-b"))
    controller.hold.add("stray")
    world.reconcile_deployment("pool")
    assert "ownerReferences" not in world.machines["stray"]["metadata"]

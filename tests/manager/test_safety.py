"""The overshoot safety loop: upstream v0.47.0's ``machine_safety_test.go`` overshooting cases
(a deployment of 1 replica, maxSurge 1, maxUnavailable 1: the freeze limit is 1 + 1 + safetyUp 2
= 4, the unfreeze limit 3) and the fixes of defects 4-8."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.safety import overshoot_limits, reconcile_overshooting
from mcm.runtime.client.errors import InternalError
from mcm.runtime.worker import Result

from .builders import deployment, machine, machine_set
from .fakes import NS, World


def _frozen_condition(kind: str) -> dict[str, Any]:
    return {
        "type": "Frozen",
        "status": "True",
        "reason": "OverShootingReplicaCount",
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    } | ({"lastUpdateTime": "2026-01-01T00:00:00Z"} if kind == "md" else {})


def _setup(
    machines: int,
    *,
    ms_label: bool = False,
    ms_condition: bool = False,
    md_label: bool = False,
    md_condition: bool = False,
    replicas: int = 1,
    owned: bool = True,
) -> World:
    world = World()
    md_body = deployment("pool", replicas=1, max_surge=1, max_unavailable=1)
    if md_label:
        md_body["metadata"]["labels"] = {"freeze": "True"}
    if md_condition:
        md_body["status"] = {"conditions": [_frozen_condition("md")]}
    md = world.add(world.machine_deployments, md_body)
    ms_body = machine_set("pool-a", replicas, labels={"name": "pool"}, owner=md if owned else None)
    if ms_label:
        ms_body["metadata"]["labels"]["freeze"] = "True"
    if ms_condition:
        ms_body["status"] = {"machineSetCondition": [_frozen_condition("ms")]}
    ms = world.add(world.machine_sets, ms_body)
    for i in range(machines):
        world.add(world.machines, machine(f"m{i}", owner=ms, labels={"name": "pool"}, phase=c.PHASE_RUNNING))
    return world


def _frozen(world: World, store: str, name: str) -> tuple[bool, bool]:
    obj = getattr(world, store)[name]
    key = "machineSetCondition" if store == "machine_sets" else "conditions"
    conditions = (obj.get("status") or {}).get(key) or []
    return (
        (obj["metadata"].get("labels") or {}).get("freeze") == "True",
        any(cond["type"] == "Frozen" for cond in conditions),
    )


def _ms(world: World) -> tuple[bool, bool]:
    return _frozen(world, "machine_sets", "pool-a")


def _md(world: World) -> tuple[bool, bool]:
    return _frozen(world, "machine_deployments", "pool")


@pytest.mark.parametrize(
    ("replicas", "machines", "frozen"),
    [(1, 1, False), (1, 5, True), (5, 2, False)],
    ids=[
        "MachineSet with 1 replica & 1 machine object",
        "MachineSet with 1 replica & 5 machine object",
        "MachineSet with 5 replica & 2 machine object",
    ],
)
def test_check_and_freeze_or_unfreeze_machine_sets(replicas: int, machines: int, frozen: bool) -> None:
    world = _setup(machines, replicas=replicas)
    reconcile_overshooting(world.deps)
    assert _ms(world)[0] is frozen


def test_freeze_a_machine_set_and_its_machine_deployment() -> None:
    world = _setup(4)
    assert reconcile_overshooting(world.deps) == Result.after(
        world.deps.options.machine_safety_overshooting_period
    )
    assert _ms(world) == (True, True) and _md(world) == (True, True)
    condition = world.machine_sets["pool-a"]["status"]["machineSetCondition"][0]
    assert (condition["reason"], condition["message"]) == (
        "OverShootingReplicaCount",
        "The number of machines backing MachineSet: pool-a is 4 >= 4 which is the Max-ScaleUp-Limit",
    )
    assert (
        "MachineSet",
        "pool-a",
        "Normal",
        "FrozeMachineSet",
        "SafetyController: Froze MachineSet pool-a due to replica overshooting",
    ) in world.events.recorded


def test_unfreeze_a_machine_set_and_its_machine_deployment() -> None:
    world = _setup(3, ms_label=True, ms_condition=True, md_label=True, md_condition=True)
    reconcile_overshooting(world.deps)
    assert _ms(world) == (False, False) and _md(world) == (False, False)
    assert (
        "MachineSet",
        "pool-a",
        "Normal",
        "UnfrozeMachineSet",
        "SafetyController: Unfroze MachineSet pool-a",
    ) in (world.events.recorded)


def test_continue_to_be_frozen_for_machine_set_and_its_machine_deployment() -> None:
    world = _setup(4, ms_label=True, ms_condition=True, md_label=True, md_condition=True)
    world.machine_sets.writes.clear()
    reconcile_overshooting(world.deps)
    assert _ms(world) == (True, True) and _md(world) == (True, True)
    assert world.machine_sets.writes == []


@pytest.mark.parametrize(
    "state",
    [
        dict(ms_condition=True),
        dict(ms_label=True),
        dict(ms_label=True, md_label=True),
        dict(ms_condition=True, md_condition=True),
    ],
    ids=[
        "freeze conditions and none on machinedeployment",
        "freeze label and none on machinedeployment",
        "freeze label and freeze label on machinedeployment",
        "freeze conditions on machineset and machinedeployment",
    ],
)
def test_unfreezing_machine_set_with_three_machines(state: dict[str, bool]) -> None:
    world = _setup(3, **state)
    reconcile_overshooting(world.deps)
    assert _ms(world) == (False, False) and _md(world) == (False, False)


def _annotate(world: World, store: str, name: str) -> None:
    target = getattr(world, store)
    body = target.read(name)
    body["metadata"].setdefault("annotations", {})[k.ANNOTATION_UNFREEZE] = "True"
    target.update(body)


def test_unfreeze_machine_set_manually_and_let_machine_deployment_continue_to_be_frozen() -> None:
    world = _setup(4, ms_label=True, ms_condition=True, md_label=True, md_condition=True)
    _annotate(world, "machine_sets", "pool-a")
    reconcile_overshooting(world.deps)
    assert _ms(world) == (False, False) and _md(world) == (True, True)
    assert k.ANNOTATION_UNFREEZE not in world.machine_sets["pool-a"]["metadata"].get("annotations", {})
    reconcile_overshooting(world.deps)  # the overshoot is still there: frozen again
    assert _ms(world) == (True, True)


@pytest.mark.parametrize("both", [False, True], ids=["machineDeployment manually", "both manually"])
def test_unfreeze_machine_deployment_manually_also_unfreezes_its_machine_sets(both: bool) -> None:
    world = _setup(3, ms_label=True, ms_condition=True, md_label=True, md_condition=True)
    _annotate(world, "machine_deployments", "pool")
    if both:
        _annotate(world, "machine_sets", "pool-a")
    reconcile_overshooting(world.deps)
    assert _ms(world) == (False, False) and _md(world) == (False, False)
    for obj in (world.machine_sets["pool-a"], world.machine_deployments["pool"]):
        assert k.ANNOTATION_UNFREEZE not in (obj["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    "state",
    [dict(md_condition=True), dict(md_label=True)],
    ids=["with freeze condition", "with freeze label"],
)
def test_unfreeze_a_machine_deployment_with_no_machine_sets_frozen(state: dict[str, bool]) -> None:
    world = _setup(1, **state)
    reconcile_overshooting(world.deps)
    assert _md(world) == (False, False)


@pytest.mark.parametrize(
    "state", [dict(md_condition=True), dict()], ids=["with freeze condition", "that is not frozen"]
)
def test_freeze_a_machine_deployment_whose_machine_set_is_frozen(state: dict[str, bool]) -> None:
    world = _setup(4, ms_label=True, ms_condition=True, **state)
    reconcile_overshooting(world.deps)
    assert _md(world) == (True, True)
    condition = next(
        cond for cond in world.machine_deployments["pool"]["status"]["conditions"] if cond["type"] == "Frozen"
    )
    if not state:
        assert (condition["reason"], condition["message"]) == ("MachineDeploymentStateSync", k.MSG_STATE_SYNC)


# --- the fixes --------------------------------------------------------------------------------------


def test_a_recreate_deployment_has_no_surge_and_does_not_stop_the_pass() -> None:
    """Defects 4 and 5: v0.47.0 crashed on a nil rollingUpdate; HEAD gave up the whole pass."""
    world = World()
    recreate = world.add(world.machine_deployments, deployment("re", replicas=1, strategy="Recreate"))
    rolling = world.add(
        world.machine_deployments, deployment("ru", replicas=1, max_surge=1, max_unavailable=0)
    )
    for md, name in ((recreate, "re"), (rolling, "ru")):
        ms = world.add(world.machine_sets, machine_set(f"{name}-a", 1, labels={"name": name}, owner=md))
        for i in range(4):
            world.add(world.machines, machine(f"{name}-{i}", owner=ms, labels={"name": name}))
    assert overshoot_limits(world.deps, world.machine_sets["re-a"]) == (3, 2)
    reconcile_overshooting(world.deps)
    assert _frozen(world, "machine_sets", "re-a")[0] and _frozen(world, "machine_sets", "ru-a")[0]


def test_every_overshooting_set_is_frozen_in_one_pass() -> None:
    """Defect 6: upstream returned after the first freeze or unfreeze."""
    world = World()
    for name in ("a", "b", "c"):
        ms = world.add(world.machine_sets, machine_set(name, 1, labels={"name": name}))
        for i in range(4):
            world.add(world.machines, machine(f"{name}{i}", owner=ms, labels={"name": name}))
    reconcile_overshooting(world.deps)
    assert [_frozen(world, "machine_sets", n)[0] for n in ("a", "b", "c")] == [True, True, True]


def test_machines_are_counted_by_owner_uid_not_name() -> None:
    """Defect 7: an owner reference with the set's name but another UID counted."""
    world = _setup(2)
    impostor = {"metadata": {"name": "pool-a", "uid": "another-uid"}}
    for i in range(5):
        world.add(world.machines, machine(f"x{i}", owner=impostor, labels={"name": "pool"}))
    reconcile_overshooting(world.deps)
    assert _ms(world) == (False, False)


def test_the_deployment_is_found_by_controller_reference_not_selector() -> None:
    world = _setup(4, owned=False)
    high, _ = overshoot_limits(world.deps, world.machine_sets["pool-a"])
    assert high == 2 * 1 + 2  # not the deployment's 1 + 1 + 2
    reconcile_overshooting(world.deps)
    assert _ms(world)[0] is True and _md(world) == (False, False)


def test_a_frozen_deployment_stops_creations_in_all_its_sets() -> None:
    """Defect 8: the freeze gated only the frozen set itself."""
    world = _setup(0, md_label=True, md_condition=True)
    world.reconcile_set("pool-a")
    assert world.machines.objects == {}
    body = world.machine_deployments.read("pool")
    body["metadata"]["labels"] = {}
    world.machine_deployments.update(body)
    world.reconcile_set("pool-a")
    assert len(world.machines.objects) == 1


def test_a_failing_write_does_not_stop_the_pass_and_the_pass_is_repeated_soon() -> None:
    world = World()
    for name in ("a", "b"):
        ms = world.add(world.machine_sets, machine_set(name, 1, labels={"name": name}))
        for i in range(4):
            world.add(world.machines, machine(f"{name}{i}", owner=ms, labels={"name": name}))
    world.machine_sets.fail("update_status", InternalError({"message": "down", "code": 500}), times=1)
    assert reconcile_overshooting(world.deps) == Result.after(5.0)
    assert [_frozen(world, "machine_sets", n)[0] for n in ("a", "b")] == [False, True]
    reconcile_overshooting(world.deps)
    assert [_frozen(world, "machine_sets", n)[0] for n in ("a", "b")] == [True, True]


def test_frozen_is_a_metric() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from mcm.manager.metrics import ManagerMetrics

    world = _setup(4)
    reconcile_overshooting(world.deps)
    registry = CollectorRegistry()
    ManagerMetrics(registry).register_collectors(
        world.deps.machine_sets.list, world.deps.machine_deployments.list
    )
    text = generate_latest(registry).decode()
    assert (
        f'mcm_machine_set_status_condition{{condition="Frozen",name="pool-a",namespace="{NS}"}} 1.0' in text
    )
    assert (
        f'mcm_machine_deployment_status_condition{{condition="Frozen",name="pool",namespace="{NS}"}} 1.0'
        in text
    )

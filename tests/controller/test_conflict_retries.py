"""Read-modify-write steps retry a 409 as client-go's ``retry.RetryOnConflict(retry.DefaultRetry)``
does: five tries about 10 ms apart, slept on the controller's clock, each from a fresh read."""

from __future__ import annotations

import pytest

from mcm.apis.machine import constants as c
from mcm.controller.classes import FinalizerUpdateError, update_finalizers
from mcm.controller.nodedrain import update_node_termination_condition
from mcm.runtime.client.errors import Conflict
from tests.clocks import SelfSteppingClock

from .builders import mk_class, mk_machine, mk_node
from .fakes import NS, START, World, make_world


def conflict() -> Conflict:
    return Conflict({"message": "the object has been modified", "code": 409})


def world_with_stepping_clock() -> tuple[World, SelfSteppingClock]:
    world = make_world()
    clock = SelfSteppingClock(START)
    world.deps.clock = clock
    return world, clock


@pytest.mark.parametrize("conflicts", [0, 1, 4])
def test_a_finalizer_write_is_retried_on_conflict(conflicts: int) -> None:
    world, clock = world_with_stepping_clock()
    world.classes.put(mk_class("class-0"))
    world.classes.fail("update", conflict(), times=conflicts)
    update_finalizers(world.deps.writers.classes, NS, "class-0", add="example.com/test", clock=clock)
    assert "example.com/test" in world.classes.get("class-0")["metadata"]["finalizers"]
    assert len(clock.slept) == conflicts
    assert all(0.010 <= slept < 0.011 for slept in clock.slept)


def test_a_finalizer_write_gives_up_after_five_conflicts() -> None:
    world, clock = world_with_stepping_clock()
    world.classes.put(mk_class("class-0"))
    world.classes.fail("update", conflict(), times=5)
    with pytest.raises(FinalizerUpdateError, match="has been modified"):
        update_finalizers(world.deps.writers.classes, NS, "class-0", add="example.com/test", clock=clock)
    assert len(clock.slept) == 4


@pytest.mark.parametrize(("conflicts", "written"), [(0, True), (4, True), (5, False)])
def test_the_node_termination_condition_is_retried_on_conflict(conflicts: int, written: bool) -> None:
    world, clock = world_with_stepping_clock()
    world.nodes.put(mk_node("node-0"))
    world.nodes.fail("update_status", conflict(), times=conflicts)
    machine = mk_machine(world.clock, phase=c.PHASE_TERMINATING, node="node-0", provider_id="id-0")
    error = update_node_termination_condition(world.deps, machine)
    types = [cond["type"] for cond in world.nodes.get("node-0")["status"].get("conditions", [])]
    assert (c.NODE_TERMINATION_CONDITION in types) is written
    assert (error is None) is written
    if not written:
        assert error == 'failed to create update conditions for node "node-0": the object has been modified'
    assert len(clock.slept) == min(conflicts, 4)

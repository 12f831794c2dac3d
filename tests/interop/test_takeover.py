"""One manager takes over the objects the other created: upstream's Go manager is killed and
mcm's starts on its MachineDeployment, MachineSets and Machines, and the reverse.

- After a roll-out: the second manager keeps every MachineSet and Machine (no new set, no
  machine replaced), scales the current set when asked, and rolls back to the first template by
  reusing the old set the first manager created (same name, so the same machine-template-hash).
- In the middle of a roll-out (the new set's first machine created, not yet Running): the second
  manager finishes it with the two sets the first created and exactly the three new machines
  the roll-out needs, never fewer Running machines than replicas.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcm.runtime import objects as o

from .env import HASH_LABEL, NS, InteropEnv, eventually, machine_deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DIRECTIONS = [
    # (first manager, second manager, machine controller)
    pytest.param("go", "mcm", "mcm", id="go-to-mcm"),
    pytest.param("mcm", "go", "go", id="mcm-to-go"),
]


def sets_by_name(env: InteropEnv) -> dict[str, dict[str, Any]]:
    return {o.name_of(s): s for s in env.all_sets()}


def identity(machine_set: dict[str, Any]) -> tuple[str, str, str | None]:
    return o.name_of(machine_set), str(o.meta(machine_set).get("uid")), o.label(machine_set, HASH_LABEL)


def class_of(machine: dict[str, Any]) -> str:
    return o.text(machine, "spec", "class", "name")


@pytest.mark.parametrize(("first", "second", "controller"), DIRECTIONS)
def test_takeover_after_a_rollout(env: InteropEnv, first: str, second: str, controller: str) -> None:
    env.start_controller(controller)
    env.start_manager(first)
    env.deployments.create(machine_deployment(replicas=3), namespace=NS)
    eventually(lambda: env.settled(3), what=f"3 Running machines\n{env.logs()}")
    env.roll_to("class-b")
    eventually(lambda: env.settled(3, "class-b"), what=f"rolled to class-b\n{env.logs()}")
    env.kill_manager()
    sets_before = {identity(s) for s in env.all_sets()}
    machines_before = {str(o.meta(m).get("uid")) for m in env.all_machines()}

    env.start_manager(second)
    env.scale(4)
    eventually(lambda: env.settled(4, "class-b"), what=f"scaled to 4 by {second}\n{env.logs()}")
    machines_after = {str(o.meta(m).get("uid")) for m in env.all_machines()}
    assert machines_before < machines_after and len(machines_after - machines_before) == 1
    assert {identity(s) for s in env.all_sets()} == sets_before

    env.history.reset_bounds()
    env.roll_to("class-a")
    eventually(lambda: env.settled(4, "class-a"), what=f"rolled back to class-a by {second}\n{env.logs()}")
    assert {identity(s) for s in env.all_sets()} == sets_before, "the old set is reused"
    with env.history.lock:
        assert env.history.min_running is not None and env.history.min_running >= 4
        assert len(env.history.machine_set_uids) == 2


@pytest.mark.parametrize(("first", "second", "controller"), DIRECTIONS)
def test_takeover_in_the_middle_of_a_rollout(
    env: InteropEnv, first: str, second: str, controller: str
) -> None:
    env.start_controller(controller)
    env.start_manager(first)
    env.deployments.create(machine_deployment(replicas=3), namespace=NS)
    eventually(lambda: env.settled(3), what=f"3 Running machines\n{env.logs()}")
    env.history.reset_bounds()
    env.vms.hold()  # new machines do not boot: the roll-out stops at its first new machine
    env.roll_to("class-b")

    def first_new_machine() -> bool:
        return any(class_of(m) == "class-b" for m in env.all_machines())

    eventually(first_new_machine, what=f"the roll-out's first machine\n{env.logs()}")
    env.kill_manager()
    sets_before = {identity(s) for s in env.all_sets()}
    assert len(sets_before) == 2
    # upstream's manager may have gone past maxSurge already, in machines or in its sets'
    # spec.replicas (its caches lag behind its writes): the second keeps within what it found
    left = max(len(env.all_machines()), sum(s["spec"].get("replicas") or 0 for s in env.all_sets()))
    env.history.reset_bounds()

    env.start_manager(second)
    env.vms.release()
    eventually(lambda: env.settled(3, "class-b"), what=f"rolled to class-b by {second}\n{env.logs()}")
    assert {identity(s) for s in env.all_sets()} <= sets_before, "no set of its own"
    with env.history.lock:
        classes = [class_of(m) for m in env.history.machines.values()]
        assert len(env.history.machine_uids) == 6, "3 old machines and exactly 3 new ones"
        assert classes == ["class-b"] * 3
        assert env.history.min_running is not None and env.history.min_running >= 3
        if second == "mcm":
            assert env.history.max_machines <= max(4, left), env.history.at_max

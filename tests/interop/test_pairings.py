"""Each manager on the other's machine controller: upstream's Go manager on mcm's
``machine-controller``, mcm's manager on upstream's Go machine controller. A MachineDeployment is
created, scaled up and rolled to another class with maxSurge 1 / maxUnavailable 0; at the end
every machine is Running on the new class, and during the roll-out there were never fewer than
replicas Running machines (seen on a watch of our own). mcm's manager also never has more than
replicas + 1 Machines at once; upstream's does not promise that: it bounds the sum of its
MachineSets' ``spec.replicas``, and an old set's machines linger until its own reconcile deletes
them, while the new set already grows."""

from __future__ import annotations

import pytest

from mcm.runtime import objects as o

from .env import InteropEnv, eventually, machine_deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.parametrize(
    ("manager", "controller"),
    [
        pytest.param("go", "mcm", id="go-manager-mcm-controller"),
        pytest.param("mcm", "go", id="mcm-manager-go-controller"),
    ],
)
def test_create_scale_and_roll(env: InteropEnv, manager: str, controller: str) -> None:
    env.start_controller(controller)
    env.start_manager(manager)
    env.deployments.create(machine_deployment(replicas=2), namespace="default")
    eventually(lambda: env.settled(2), what=f"2 Running machines\n{env.logs()}")
    env.scale(3)
    eventually(lambda: env.settled(3), what=f"scaled to 3\n{env.logs()}")
    before = {o.name_of(m) for m in env.all_machines()}
    env.history.reset_bounds()
    env.roll_to("class-b")
    eventually(lambda: env.settled(3, "class-b"), what=f"rolled to class-b\n{env.logs()}")
    with env.history.lock:
        assert env.history.min_running is not None and env.history.min_running >= 3
        if manager == "mcm":
            assert env.history.max_machines <= 4, env.history.at_max
    after = {o.name_of(m) for m in env.all_machines()}
    assert not before & after
    new_sets = [s for s in env.all_sets() if (s["spec"].get("replicas") or 0) > 0]
    assert len(new_sets) == 1 and new_sets[0]["spec"]["template"]["spec"]["class"]["name"] == "class-b"

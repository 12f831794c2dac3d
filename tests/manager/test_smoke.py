from __future__ import annotations

from mcm.apis.machine import constants as c

from .builders import deployment
from .fakes import FakeMachineController, World


def test_deployment_creates_running_machines() -> None:
    world = World()
    controller = FakeMachineController(world)
    world.add(world.machine_deployments, deployment(replicas=3))
    world.settle(controller)
    assert len(world.machine_sets.objects) == 1
    machines = list(world.machines.objects.values())
    assert len(machines) == 3
    assert all(m["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING for m in machines)
    md = world.machine_deployments["pool"]
    print(md["status"])
    print(world.errors)
    assert md["status"]["availableReplicas"] == 3


def test_debug_rollout() -> None:
    import json

    world = World()
    controller = FakeMachineController(world)
    world.add(world.machine_deployments, deployment(replicas=3))
    print("rounds", world.settle(controller))
    md = world.machine_deployments["pool"]
    md["spec"]["template"]["spec"]["class"]["name"] = "class-b"
    world.machine_deployments.update(md)
    print("rounds", world.settle(controller))
    print(json.dumps(world.machine_deployments["pool"], indent=1))
    for ms in world.machine_sets.objects.values():
        print(
            ms["metadata"]["name"],
            ms["metadata"].get("annotations"),
            ms["spec"]["replicas"],
            ms.get("status", {}).get("replicas"),
        )
    print(world.events.recorded)
    print(world.errors)
    print(len(world.machines.objects), sorted(world.machines.objects))
    assert False

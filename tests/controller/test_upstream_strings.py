"""lastOperation descriptions that must read exactly as upstream's (issue 36, item 4): the node
conditions of the Unknown and Failed health descriptions are Go's ``%+v`` of the machine's
``[]v1.NodeCondition``; a deletion without a target cluster says HEAD's "Running without target
cluster" (``updateMachineStatusAndNodeLabel``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mcm.apis.machine import constants as c
from mcm.controller.deletion import dispatch
from mcm.controller.health import FailedMarks, format_conditions, reconcile_machine_health

from .builders import mk_machine, mk_node
from .fakes import World, make_world
from .test_deletion_table import inputs, terminating, world_for

CONDITIONS: list[dict[str, Any]] = [
    {
        "type": "Ready",
        "status": "False",
        "lastHeartbeatTime": "2024-01-01T10:00:00Z",
        "lastTransitionTime": "2024-01-01T09:58:07Z",
        "reason": "KubeletNotReady",
        "message": "container runtime is down, PLEG is not healthy",
    },
    {"type": "DiskPressure", "status": "Unknown"},
    {
        "type": "KernelDeadlock",
        "status": "True",
        "lastHeartbeatTime": "2024-06-30T23:59:59+02:00",
        "reason": "",
        "message": 'a"b{c}',
    },
]
GO_PRINTED = (
    "[{Type:Ready Status:False LastHeartbeatTime:2024-01-01 10:00:00 +0000 UTC "
    "LastTransitionTime:2024-01-01 09:58:07 +0000 UTC Reason:KubeletNotReady "
    "Message:container runtime is down, PLEG is not healthy} "
    "{Type:DiskPressure Status:Unknown LastHeartbeatTime:0001-01-01 00:00:00 +0000 UTC "
    "LastTransitionTime:0001-01-01 00:00:00 +0000 UTC Reason: Message:} "
    "{Type:KernelDeadlock Status:True LastHeartbeatTime:2024-06-30 21:59:59 +0000 UTC "
    'LastTransitionTime:0001-01-01 00:00:00 +0000 UTC Reason: Message:a"b{c}}]'
)
"""What ``fmt.Sprintf("%+v", conditions)`` prints in Go 1.26 (k8s.io/api v0.22.9, TZ=UTC) for
:data:`CONDITIONS` decoded by ``encoding/json``."""


def test_conditions_render_as_go_prints_them() -> None:
    assert format_conditions(CONDITIONS) == GO_PRINTED
    assert format_conditions([]) == "[]"


def last_description(world: World, name: str) -> str:
    return str(world.machines.get(name)["status"]["lastOperation"]["description"])


def test_a_running_machine_turning_unknown_prints_the_node_conditions_as_upstream() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", CONDITIONS))
    machine = mk_machine(world.clock, "machine-0", phase=c.PHASE_RUNNING, node="node-0", conditions=[])
    world.machines.put(machine)
    reconcile_machine_health(world.deps, world.machines.get("machine-0"), FailedMarks())
    assert last_description(world, "machine-0") == (
        f"Machine machine-0 is unhealthy - changing MachinePhase to Unknown. Node conditions: {GO_PRINTED}"
    )


def test_an_unknown_machine_marked_failed_prints_the_node_conditions_as_upstream() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", CONDITIONS))
    machine = mk_machine(
        world.clock,
        "machine-0",
        phase=c.PHASE_UNKNOWN,
        node="node-0",
        conditions=CONDITIONS,
        phase_ago=15 * 60,
    )
    world.machines.put(machine)
    reconcile_machine_health(world.deps, world.machines.get("machine-0"), FailedMarks())
    assert last_description(world, "machine-0") == (
        "Machine machine-0 health checks failing since last 10m0s minutes. Updating machine phase to "
        f"Failed. Node Conditions: {GO_PRINTED}"
    )


def without_target(world: World) -> None:
    deps = world.deps
    deps.listers = dataclasses.replace(deps.listers, nodes=None)
    deps.writers = dataclasses.replace(deps.writers, nodes=None)
    assert not deps.has_target


NO_TARGET = (
    "Running without target cluster, skipping node drain and volume attachment deletion. Initiate VM deletion"
)


def test_without_a_target_cluster_the_vm_status_step_goes_to_vm_deletion_as_head_says() -> None:
    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=""))
    without_target(world)
    outcome = dispatch(machine)(world.deps, machine, inputs())
    assert outcome.result is None
    assert last_description(world, "machine-0") == NO_TARGET
    assert world.driver.calls_to("get_machine_status") == []
    assert dispatch(outcome.machine).__name__ == "delete_vm"
    assert drainer.drained == []


def test_a_drain_step_resumed_without_a_target_cluster_says_the_same() -> None:
    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_DRAIN, node="node-0"))
    without_target(world)
    outcome = dispatch(machine)(world.deps, machine, inputs())
    assert outcome.result is None
    assert last_description(world, "machine-0") == NO_TARGET
    assert drainer.cordoned == [] and drainer.drained == []

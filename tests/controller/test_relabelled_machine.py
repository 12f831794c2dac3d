"""Issue 26 #9: a Machine relabelled to point at another VM's Node cannot drain or delete it.

The deletion flow used to trust the machine's ``node`` label alone: whoever may write Machines
could set it to a control-plane Node and delete the Machine, and that Node was cordoned,
drained and deleted. Now a Node whose ``spec.providerID`` is set and is not the
machine's is left alone (Warning Event ``NodeProviderIDMismatch``) while the VM is deleted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.controller.common import FlowInputs
from mcm.controller.deletion import dispatch, trigger_deletion_flow
from mcm.controller.handlers import EventHandlers
from mcm.controller.node import reconcile_node_key
from mcm.controller.nodesync import sync_node_templates
from mcm.runtime.cache.keys import DeletedFinalStateUnknown
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import DONE

from .builders import mk_class, mk_machine, mk_node
from .fakes import World, make_world
from .fixtures import NS, Env, StubDrainer, eventually, machine, ready_node

CONTROL_PLANE = "control-plane-0"
FOREIGN_ID = "aws:///eu-1a/i-control-plane"


def world_with(
    node_provider_id: str, machine_provider_id: str = "fakeID-0"
) -> tuple[World, StubDrainer, list[dict[str, Any]]]:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    world.nodes.put(mk_node(CONTROL_PLANE, spec={"providerID": node_provider_id}))
    world.machines.put(
        mk_machine(
            world.clock,
            phase=c.PHASE_TERMINATING,
            description=c.MARKER_GET_VM_STATUS,
            provider_id=machine_provider_id,
            node=CONTROL_PLANE,
            deleting_ago=0.0,
        )
    )
    world.driver.add_vm("fakeID-0", "machine-0", node_name="machine-0")
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(lambda e: events.append(e) or True, "mc", clock=world.clock)
    return world, drainer, events


def inputs() -> FlowInputs:
    klass = MachineClass.from_dict(mk_class())
    return FlowInputs(klass, {}, klass.to_dict())


def warnings(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events if e["type"] == "Warning"]


def test_the_whole_deletion_leaves_a_foreign_node_alone_and_deletes_the_vm() -> None:
    world, drainer, events = world_with(FOREIGN_ID)
    klass = MachineClass.from_dict(mk_class())
    trigger_deletion_flow(world.deps, world.machines.get("machine-0"), klass, {})
    assert "machine-0" not in world.machines.objects, "the finalizer is removed, the Machine goes"
    assert world.driver.vms == {}, "the VM is deleted"
    assert drainer.cordoned == [] and drainer.drained == []
    node = world.nodes.get(CONTROL_PLANE)
    assert node["status"] == {}, "no Terminating condition was written"
    assert [verb for verb, name in world.nodes.writes if name == CONTROL_PLANE] == []
    assert warnings(events).count("NodeProviderIDMismatch") == 2  # drain and Node deletion


def test_clearing_the_machines_provider_id_does_not_get_round_the_check() -> None:
    """A Machine writer who empties ``spec.providerID`` in the edit that relabels it: a Node that
    has a providerID is not the machine's."""
    world, drainer, events = world_with(FOREIGN_ID, machine_provider_id="")
    klass = MachineClass.from_dict(mk_class())
    trigger_deletion_flow(world.deps, world.machines.get("machine-0"), klass, {})
    assert "machine-0" not in world.machines.objects
    assert drainer.cordoned == [] and drainer.drained == []
    assert CONTROL_PLANE in world.nodes.objects
    assert [verb for verb, name in world.nodes.writes if name == CONTROL_PLANE] == []
    assert warnings(events).count("NodeProviderIDMismatch") == 2


def test_the_drain_step_says_why_it_skipped() -> None:
    world, drainer, _ = world_with(FOREIGN_ID)
    stored = world.machines.get("machine-0")
    stored["status"]["lastOperation"]["description"] = c.MARKER_INITIATE_DRAIN
    outcome = dispatch(stored)(world.deps, stored, inputs())
    description = outcome.machine["status"]["lastOperation"]["description"]
    assert description.endswith(c.MARKER_INITIATE_VM_DELETION)
    assert FOREIGN_ID in description and CONTROL_PLANE in description
    assert drainer.cordoned == []


def test_a_node_without_provider_id_is_still_drained_and_deleted() -> None:
    world, drainer, events = world_with("")
    klass = MachineClass.from_dict(mk_class())
    trigger_deletion_flow(world.deps, world.machines.get("machine-0"), klass, {})
    assert drainer.cordoned == [CONTROL_PLANE]
    assert CONTROL_PLANE not in world.nodes.objects
    assert "NodeProviderIDMismatch" not in warnings(events)


def test_the_node_template_is_not_written_to_a_foreign_node() -> None:
    world, _, events = world_with(FOREIGN_ID)
    running = mk_machine(
        world.clock, "machine-1", phase=c.PHASE_RUNNING, provider_id="fakeID-1", node=CONTROL_PLANE
    )
    running["spec"]["nodeTemplate"] = {"spec": {"taints": [{"key": "evil", "effect": "NoSchedule"}]}}
    assert sync_node_templates(world.deps, running) is None
    assert world.nodes.writes == []
    assert "NodeProviderIDMismatch" in warnings(events)


def test_end_to_end_a_relabelled_machine_does_not_drain_a_control_plane_node(tmp_path: Path) -> None:
    from mcm.runtime.client.resources import PODS

    env = Env(tmp_path, real_drain=True)
    try:
        env.setup_class()
        env.nodes.create(ready_node(CONTROL_PLANE, provider_id=FOREIGN_ID))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "etcd", "namespace": NS},
            "spec": {"nodeName": CONTROL_PLANE, "containers": [{"name": "c", "image": "etcd:3"}]},
        }
        pods = env.target.resource(PODS)
        pods.create(pod, namespace=NS)
        env.start()
        env.machines.create(machine("machine-five"), namespace=NS)
        eventually(lambda: env.phase("machine-five") == c.PHASE_PENDING, what="Pending")
        stored = env.get_machine("machine-five")
        assert stored is not None
        stored["metadata"]["labels"][c.LABEL_NODE] = CONTROL_PLANE
        env.machines.update(stored, namespace=NS)
        env.machines.delete("machine-five", namespace=NS)
        eventually(lambda: env.get_machine("machine-five") is None, what="machine gone")
        node = env.nodes.get(CONTROL_PLANE)
        assert not (node.get("spec") or {}).get("unschedulable")
        assert c.NODE_FINALIZER not in (node["metadata"].get("finalizers") or [])
        assert [p["metadata"]["name"] for p in pods.list(namespace=NS)["items"]] == ["etcd"]
        assert env.driver.vms == {}
    finally:
        env.close()


def _delete_node_as_the_informer_reports_it(
    node_provider_id: str, machine_provider_id: str, tombstone: bool
) -> World:
    """A Running Machine labelled with a Node's name; the informer reports the Node deleted (or
    its tombstone, after a relist); the node queue's worker runs for every key enqueued."""
    world = make_world()
    world.machines.put(
        mk_machine(
            world.clock,
            phase=c.PHASE_RUNNING,
            description="",
            provider_id=machine_provider_id,
            node=CONTROL_PLANE,
        )
    )
    keys: list[str] = []
    handlers = EventHandlers(world.deps, lambda queue, key, after: keys.append(key))
    node = mk_node(CONTROL_PLANE, spec={"providerID": node_provider_id})
    handlers.node_deleted(DeletedFinalStateUnknown(CONTROL_PLANE, node) if tombstone else node)
    assert keys, "the deleted Node was not enqueued"
    for key in keys:
        assert reconcile_node_key(world.deps, key) == DONE
    return world


@pytest.mark.parametrize("tombstone", [False, True], ids=["deleted", "tombstone"])
def test_a_deleted_foreign_node_does_not_delete_the_relabelled_machine(tombstone: bool) -> None:
    """Issue 36 #3: a Node *being deleted* whose providerID is not the machine's was ignored, but
    the same Node *deleted outright* deleted the Machine, and with it the machine's own VM."""
    world = _delete_node_as_the_informer_reports_it(FOREIGN_ID, "fakeID-0", tombstone)
    assert world.machines.writes == [], "the Machine was deleted for another VM's Node"
    assert not world.machines.get("machine-0")["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize("tombstone", [False, True], ids=["deleted", "tombstone"])
@pytest.mark.parametrize("node_provider_id", ["fakeID-0", ""], ids=["its-own-node", "no-provider-id"])
def test_a_deleted_node_of_the_machine_still_deletes_it(node_provider_id: str, tombstone: bool) -> None:
    world = _delete_node_as_the_informer_reports_it(node_provider_id, "fakeID-0", tombstone)
    assert world.machines.get("machine-0")["metadata"].get("deletionTimestamp")

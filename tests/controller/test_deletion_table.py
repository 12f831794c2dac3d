"""Upstream v0.47.0 ``machine_test.go`` ``#triggerDeletionFlow``, one step per entry, adapted to HEAD
where mcm follows HEAD (said in the entry). Plus: chaining and restart resumption."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.controller import ControllerOptions
from mcm.controller.common import FlowInputs
from mcm.controller.deletion import dispatch, trigger_deletion_flow
from mcm.driver import Code, GetMachineStatusResponse, MachineError
from mcm.runtime.cache.listers import new_not_found
from mcm.runtime.client.errors import Conflict, InternalError
from mcm.runtime.worker import DONE, Result

from .builders import condition, mk_class, mk_machine, mk_node
from .fakes import NS, World, make_world, ts
from .fixtures import StubDrainer

MIN = 60.0


@dataclass
class Case:
    machine: dict[str, Any] = field(default_factory=dict)
    node: str | None = "fakeNode-0"
    node_conditions_fail: bool = False
    drain_fails: str | None = None


def world_for(case_builder: Any) -> tuple[World, StubDrainer, dict[str, Any]]:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    machine = case_builder(world)
    world.machines.put(machine)
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0")
    return world, drainer, world.machines.get("machine-0")


def inputs() -> FlowInputs:
    klass = MachineClass.from_dict(mk_class())
    return FlowInputs(klass, {}, klass.to_dict())


def step(world: World, machine: dict[str, Any]) -> tuple[Result | None, dict[str, Any] | None]:
    outcome = dispatch(machine)(world.deps, machine, inputs())
    stored = world.machines.objects.get("machine-0")
    return outcome.result, stored


def op(machine: dict[str, Any] | None) -> tuple[str, str, str]:
    assert machine is not None
    last = machine["status"]["lastOperation"]
    return last["description"], last["state"], last["type"]


def terminating(world: World, description: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("provider_id", "fakeID-0")
    kw.setdefault("node", "fakeNode-0")
    kw.setdefault("deleting_ago", 0.0)
    kw.setdefault("annotations", {c.ANNOTATION_MACHINE_PRIORITY: "3"})
    return mk_machine(world.clock, phase=c.PHASE_TERMINATING, description=description, **kw)


def test_1_do_not_process_machine_deletion_for_object_without_finalizer() -> None:
    world, _, machine = world_for(
        lambda w: mk_machine(w.clock, phase=c.PHASE_RUNNING, finalizer=False, deleting_ago=0)
    )
    klass = MachineClass.from_dict(mk_class())
    result = trigger_deletion_flow(world.deps, machine, klass, {})
    assert result == Result.after(c.LONG_RETRY)
    assert world.machines.writes == []


def test_2_change_machine_phase_to_termination_successfully() -> None:
    world, _, machine = world_for(
        lambda w: mk_machine(
            w.clock,
            phase=c.PHASE_RUNNING,
            description="Machine machine-0 successfully joined the cluster",
            deleting_ago=0,
        )
    )
    result, stored = step(world, machine)
    assert result is None  # HEAD chaining: the next step follows in the same pass
    assert stored is not None and stored["status"]["currentStatus"]["phase"] == c.PHASE_TERMINATING
    assert op(stored) == (c.MARKER_GET_VM_STATUS, c.STATE_PROCESSING, c.OPERATION_DELETE)


def test_3_checking_existance_of_vm_at_provider_successfully() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.MARKER_INITIATE_DRAIN, c.STATE_PROCESSING, c.OPERATION_DELETE)


def test_3b_vm_not_found_still_goes_to_drain_head() -> None:
    """HEAD: NotFound goes through the drain (upstream v0.47.0 jumped to node deletion)."""
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS))
    world.driver.remove_vm("fakeID-0")
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_VM_NOT_FOUND


def test_4_drain_machine_successfully() -> None:
    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_DRAIN))
    world.nodes.put(mk_node("fakeNode-0"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_DRAIN_SUCCESSFUL, c.STATE_PROCESSING, c.OPERATION_DELETE)
    conditions = world.nodes.get("fakeNode-0")["status"]["conditions"]
    assert [(cd["type"], cd["status"], cd["reason"]) for cd in conditions] == [
        ("Terminating", "True", "ScaleDown")
    ]
    assert drainer.cordoned == ["fakeNode-0"]
    assert drainer.drained[0].options.force is False


def test_5_drain_skipping_as_nodename_is_not_valid() -> None:
    world, drainer, machine = world_for(
        lambda w: terminating(
            w, c.MARKER_INITIATE_DRAIN, node="", conditions=[{"type": "Ready", "status": "Unknown"}]
        )
    )
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_DRAIN_SKIPPED_NO_NODE, c.STATE_PROCESSING, c.OPERATION_DELETE)
    assert drainer.drained == []


def _cond(world: World, kind: str, status: str, ago: float) -> dict[str, Any]:
    from .builders import condition

    return condition(kind, status, world.clock, ago)


@pytest.mark.parametrize(
    ("name", "conditions"),
    [
        ("6 NotReady for over 5 minutes", [("Ready", "Unknown", 6 * MIN)]),
        (
            "7 ReadonlyFilesystem for over 5 minutes",
            [("Ready", "True", 0), ("ReadonlyFilesystem", "True", 6 * MIN)],
        ),
        (
            "8 NotReady and ReadonlyFilesystem",
            [("Ready", "Unknown", 6 * MIN), ("ReadonlyFilesystem", "True", 6 * MIN)],
        ),
    ],
)
def test_6_7_8_long_not_ready_forces_the_drain_head(
    name: str, conditions: list[tuple[str, str, float]]
) -> None:
    """HEAD: no drain skipping; a long NotReady/ReadonlyFilesystem forces the drain, then
    the VolumeAttachments step."""
    world, drainer, machine = world_for(
        lambda w: terminating(w, c.MARKER_INITIATE_DRAIN, conditions=[_cond(w, *cd) for cd in conditions])
    )
    world.nodes.put(mk_node("fakeNode-0"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_FORCE_DRAIN_SUCCESSFUL
    assert drainer.drained[0].options.force is True and drainer.drained[0].options.max_evict_retries == 1


@pytest.mark.parametrize(
    ("name", "status", "ago"),
    [
        ("9 ReadonlyFilesystem true for a short time", "True", 2 * MIN),
        ("10 ReadonlyFilesystem false", "False", 6 * MIN),
    ],
)
def test_9_10_no_drain_skipping(name: str, status: str, ago: float) -> None:
    world, drainer, machine = world_for(
        lambda w: terminating(
            w,
            c.MARKER_INITIATE_DRAIN,
            conditions=[_cond(w, "Ready", "True", 0), _cond(w, "ReadonlyFilesystem", status, ago)],
        )
    )
    world.nodes.put(mk_node("fakeNode-0"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_DRAIN_SUCCESSFUL
    assert drainer.drained[0].options.force is False


@pytest.mark.parametrize(
    ("name", "labels", "deleting_ago"),
    [
        ("11 force deletion label present", {c.LABEL_FORCE_DELETION: "True"}, 0.0),
        ("13 failure after drain timeout", {}, 3 * 3600.0),
    ],
)
def test_11_13_forced_drain_failure_continues(name: str, labels: dict[str, str], deleting_ago: float) -> None:
    world, drainer, machine = world_for(
        lambda w: terminating(w, c.MARKER_INITIATE_DRAIN, labels=labels, deleting_ago=deleting_ago)
    )
    world.nodes.put(mk_node("fakeNode-0"))
    world.nodes.fail("update_status", InternalError({"message": "Failed to update node", "code": 500}))
    drainer.fail_with = "Failed to update node"
    result, stored = step(world, machine)
    assert result is None
    description, state, _ = op(stored)
    assert description == (
        "Drain failed due to - Failed to update node. However, since it's a force deletion shall continue "
        "deletion of VM. Delete Volume Attachments"
    )  # HEAD: the forced path goes on to the VolumeAttachments step
    assert state == c.STATE_PROCESSING


@pytest.mark.parametrize(
    ("name", "node"), [("12 before drain timeout", "fakeID-0"), ("14 node update failure", "fakeNode-0")]
)
def test_12_14_drain_failure_before_drain_timeout(name: str, node: str) -> None:
    world, drainer, machine = world_for(
        lambda w: terminating(w, c.MARKER_INITIATE_DRAIN, node=node, deleting_ago=3 * MIN)
    )
    world.nodes.put(mk_node(node))
    world.nodes.fail("update_status", InternalError({"message": "Failed to update node", "code": 500}))
    result, stored = step(world, machine)
    assert result == Result.after(c.SHORT_RETRY)
    description, state, _ = op(stored)
    assert description == (
        "Drain failed due to failure in update of node conditions - "
        f'failed to create update conditions for node "{node}": '
        "Failed to update node. Will retry in next sync. Initiate node drain"
    )
    assert state == c.STATE_FAILED
    assert drainer.drained == []


def test_15_delete_vm_successfully() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_DRAIN_SUCCESSFUL))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_VM_DELETED, c.STATE_PROCESSING, c.OPERATION_DELETE)
    assert world.driver.vms == {}


def test_16_delete_node_object_successfully() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_VM_DELETED, node="fakeID-0"))
    world.nodes.put(mk_node("fakeID-0", metadata={"finalizers": [c.NODE_FINALIZER]}))
    result, stored = step(world, machine)
    assert result is None
    assert (
        op(stored)[0]
        == 'Deletion of Node Object "fakeID-0" is successful. Initiate machine object finalizer removal'
    )
    assert "fakeID-0" not in world.nodes.objects  # node finalizer removed first (HEAD), then deleted


def test_17_delete_machine_finalizer_successfully() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_NODE_DELETED.format(node="fakeNode-0")))
    result, stored = step(world, machine)
    assert result == DONE  # upstream: Long; the object is gone either way
    assert stored is None


def test_18_unable_to_decode_deletion_flow_state() -> None:
    world, _, machine = world_for(lambda w: terminating(w, "Some random last op description"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.MARKER_GET_VM_STATUS, c.STATE_PROCESSING, c.OPERATION_DELETE)


def test_whole_flow_in_one_pass_and_resume_at_every_step() -> None:
    """Steps chain in one pass; a pass that starts from any stored marker finishes the flow."""
    markers = [
        None,
        c.MARKER_GET_VM_STATUS,
        c.DESC_VM_FOUND,
        c.DESC_DRAIN_SUCCESSFUL,
        c.DESC_VM_DELETED,
        c.DESC_NODE_DELETED.format(node="fakeNode-0"),
    ]
    for marker in markers:
        world, drainer, machine = world_for(
            lambda w, m=marker: (
                terminating(w, m)
                if m
                else mk_machine(
                    w.clock, phase=c.PHASE_RUNNING, node="fakeNode-0", provider_id="fakeID-0", deleting_ago=0
                )
            )
        )
        world.nodes.put(mk_node("fakeNode-0"))
        klass = MachineClass.from_dict(mk_class())
        assert trigger_deletion_flow(world.deps, machine, klass, {}) == DONE
        assert "machine-0" not in world.machines.objects
        drained = marker in (None, c.MARKER_GET_VM_STATUS, c.DESC_VM_FOUND)
        assert bool(drainer.drained) == drained, marker
        assert ("fakeNode-0" in world.nodes.objects) == (
            marker == c.DESC_NODE_DELETED.format(node="fakeNode-0")
        )


def test_deletion_waits_while_machine_is_in_creation_flow() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS))
    klass = MachineClass.from_dict(mk_class())
    with world.deps.creation.creating("test-ns/machine-0"):
        assert trigger_deletion_flow(world.deps, machine, klass, {}) == Result.after(c.MEDIUM_RETRY)


def test_volume_attachments_are_deleted_then_step_moves_on() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_FORCE_DRAIN_SUCCESSFUL))
    world.nodes.put(mk_node("fakeNode-0", status={"volumesAttached": [{"name": "vol-1", "devicePath": ""}]}))
    world.volume_attachments.put({"metadata": {"name": "va-1"}, "spec": {"nodeName": "fakeNode-0"}})
    result, stored = step(world, machine)
    assert result == Result.after(c.SHORT_RETRY)
    assert world.volume_attachments.objects == {}
    result, stored = step(world, stored or machine)
    assert result is None
    assert (
        op(stored)[0]
        == "No Live VolumeAttachments for node: fakeNode-0. Moving to VM Deletion. Initiate VM deletion"
    )


def test_only_the_nodes_volume_attachments_are_deleted_and_one_already_gone_is_fine() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_FORCE_DRAIN_SUCCESSFUL))
    world.nodes.put(mk_node("fakeNode-0", status={"volumesAttached": [{"name": "vol-1", "devicePath": ""}]}))
    for name, node in (("va-mine", "fakeNode-0"), ("va-other", "otherNode"), ("va-gone", "fakeNode-0")):
        world.volume_attachments.put({"metadata": {"name": name}, "spec": {"nodeName": node}})
    real_delete = world.volume_attachments.delete

    def delete(name: str, **kwargs: Any) -> Any:
        if name == "va-gone":
            real_delete(name, **kwargs)  # someone else deleted it first: this call answers 404
        return real_delete(name, **kwargs)

    world.volume_attachments.delete = delete  # type: ignore[method-assign]
    result, _ = step(world, machine)
    assert result == Result.after(c.SHORT_RETRY)
    assert list(world.volume_attachments.objects) == ["va-other"]


def test_get_vm_status_fills_a_missing_node_label_head() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None))
    world.nodes.put(mk_node("fakeNode-0", metadata={"labels": {c.LABEL_NODE_MACHINE_NAME: "machine-0"}}))
    world.driver.always("get_machine_status", GetMachineStatusResponse("fakeID-0", "fakeNode-0"))
    result, stored = step(world, machine)
    assert result is None
    assert stored is not None and stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"


def test_get_vm_status_finds_the_node_of_an_uninitialized_vm_by_its_provider_id() -> None:
    """Found by the chaos suite: a CreateMachine still running in the gRPC sidecar when the
    controller was killed made the VM; the Machine, deleted meanwhile, never got a provider ID
    or node label, GetMachineStatus said Uninitialized, and the VM's Node was left for ever. The
    driver's list of the class's VMs gives the VM's provider ID, and the Node carrying it is
    the Machine's."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None, provider_id=None)
    )
    world.driver.remove_vm("fakeID-0")
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0", initialized=False)
    world.driver.add_vm("fakeID-9", "machine-9", node_name="fakeNode-9")
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    world.nodes.put(mk_node("fakeNode-9", spec={"providerID": "fakeID-9"}))
    result, stored = step(world, machine)
    assert result is None
    assert stored is not None and stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"
    assert op(stored)[0] == c.DESC_VM_UNINITIALIZED


def test_a_failed_vm_listing_is_retried_before_the_node_of_an_uninitialized_vm_is_given_up() -> None:
    """Found by the chaos suite (long profile, driver-errors): CreateMachine made the VM but its
    answer was lost; the Machine, deleted at once, had no provider ID or node label; the
    listing that finds the VM's provider ID failed with a retryable code, the flow went on
    without the Node, deleted the VM and left the Node for ever. The step is now retried."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None, provider_id=None)
    )
    world.driver.remove_vm("fakeID-0")
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0", initialized=False)
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    world.driver.always("list_machines", MachineError(Code.Unavailable, "cloud API down"))
    result, stored = step(world, machine)
    assert result == Result.after(c.SHORT_RETRY)
    assert stored is not None and c.LABEL_NODE not in stored["metadata"].get("labels", {})
    assert op(stored)[0] == c.DESC_GET_VM_RETRYABLE
    assert world.driver.calls_to("get_machine_status") == []

    world.driver.always("list_machines", None)
    result, stored = step(world, stored)
    assert result is None
    assert stored is not None and stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"
    assert op(stored)[0] == c.DESC_VM_UNINITIALIZED


def test_a_driver_that_cannot_list_vms_does_not_hold_up_the_deletion() -> None:
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None, provider_id=None)
    )
    world.driver.always("list_machines", MachineError(Code.Unimplemented, "no listing"))
    world.driver.always("get_machine_status", MachineError(Code.NotFound, "gone"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_VM_NOT_FOUND


def test_the_node_of_an_uninitialized_vm_not_in_the_cache_yet_is_found_on_the_api_server() -> None:
    """Found by the chaos suite (long profile, mixed): the creation flow, reading a cache that
    had not seen the deletion yet, made the VM; its Node registered while the target's watches
    were re-established, so the Node cache had no Node with the VM's provider ID; the deletion
    went on without it and left it for ever. The API server is now asked before giving up."""
    import dataclasses
    from typing import cast

    from .fakes import FakeResource

    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None, provider_id=None)
    )
    world.driver.remove_vm("fakeID-0")
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0", initialized=False)
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    empty_cache = FakeResource("nodes", namespaced=False)
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=cast(Any, empty_cache))
    world.nodes.fail("list", InternalError({"message": "etcd leader changed", "code": 500}), times=1)
    result, stored = step(world, machine)
    assert result == Result.after(c.SHORT_RETRY)
    result, stored = step(world, stored or machine)
    assert result is None
    assert stored is not None and stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"


def test_the_node_found_by_the_listed_provider_id_is_drained_and_deleted() -> None:
    """Found by the chaos suite (long profile, mixed): the Node found by the provider ID the
    driver listed got the node label, but the Machine still had no provider ID, so the drain
    and node steps took the Node for another VM's and left it for ever. The listed provider ID
    is written to the Machine with the label."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None, provider_id=None)
    )
    world.driver.remove_vm("fakeID-0")
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0", initialized=False)
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    stored: Any = machine
    for _ in range(8):
        _result, after = step(world, stored)
        stored = after or stored
        if "fakeNode-0" not in world.nodes.objects:
            break
    assert stored["spec"]["providerID"] == "fakeID-0"
    assert "fakeNode-0" not in world.nodes.objects


def test_get_vm_status_matches_a_node_by_the_machines_own_provider_id() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None))
    world.nodes.put(mk_node("other", spec={"providerID": "fakeID-other"}))
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    world.driver.always("get_machine_status", MachineError(Code.Uninitialized, "not yet"))
    result, stored = step(world, machine)
    assert result is None
    assert stored is not None and stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"
    assert world.driver.calls_to("list_machines") == []


def test_a_node_the_cache_has_not_seen_yet_is_still_deleted() -> None:
    """Found by the chaos suite: the Node registered a moment before the deletion reached the
    node step, while the target's watches were being re-established; the cache had no Node, the
    step said "No node object found" and the Node stayed for ever. Absence is now confirmed
    with the API server before the flow moves on (upstream always sends the DELETE)."""
    import dataclasses
    from typing import cast

    from .fakes import FakeResource

    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_NODE_DELETION))
    world.nodes.put(mk_node("fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER, "other/keep"]}))
    empty_cache = FakeResource("nodes", namespaced=False)
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=cast(Any, empty_cache))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_NODE_DELETED.format(node="fakeNode-0")
    assert world.nodes.patches == [
        ("fakeNode-0", {"metadata": {"finalizers": ["other/keep"], "resourceVersion": "1"}})
    ]
    assert ("delete", "fakeNode-0") in world.nodes.writes


def test_a_node_finalizer_the_cache_had_not_seen_is_removed_from_the_delete_answer() -> None:
    """Found by the chaos suite's 30-minute run: the node loop had just added the node
    finalizer, the cached Node (its watch re-established after a blackhole) did not show it, so
    the step deleted the Node without removing it; the Machine went, and the Node stayed
    (deleting) until the unmanaged-node sweep released it minutes later. The DELETE's answer
    is the live Node: a node finalizer on it is removed at once."""
    import dataclasses
    from typing import cast

    from .fakes import FakeResource

    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_NODE_DELETION))
    live = world.nodes.put(mk_node("fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER, "other/keep"]}))
    stale_cache = FakeResource("nodes", namespaced=False)
    stale_cache.put(mk_node("fakeNode-0", metadata={"finalizers": ["other/keep"]}))
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=cast(Any, stale_cache))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_NODE_DELETED.format(node="fakeNode-0")
    assert ("delete", "fakeNode-0") in world.nodes.writes
    answer_version = str(int(live["metadata"]["resourceVersion"]) + 1)  # the DELETE's answer
    assert world.nodes.patches == [
        ("fakeNode-0", {"metadata": {"finalizers": ["other/keep"], "resourceVersion": answer_version}})
    ]
    assert world.nodes.objects["fakeNode-0"]["metadata"]["finalizers"] == ["other/keep"]


def test_a_failed_removal_of_the_node_finalizer_after_the_delete_is_retried() -> None:
    import dataclasses
    from typing import cast

    from mcm.runtime.client.errors import ConnectionFailed

    from .fakes import FakeResource

    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_NODE_DELETION))
    world.nodes.put(mk_node("fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER]}))
    stale_cache = FakeResource("nodes", namespaced=False)
    stale_cache.put(mk_node("fakeNode-0"))
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=cast(Any, stale_cache))
    world.nodes.fail("patch", ConnectionFailed("PATCH nodes/fakeNode-0: connection reset"), times=1)
    _, stored = step(world, machine)
    description, state, _ = op(stored)
    assert description.startswith(c.DESC_NODE_FINALIZER_FAILED.split("{")[0])
    assert state == c.STATE_FAILED


def test_a_node_gone_from_cache_and_server_moves_on() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_NODE_DELETION))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_NODE_NOT_FOUND.format(node="fakeNode-0")


def test_a_similar_description_never_hides_a_step_transition() -> None:
    """A long drain error makes the not-forced and forced descriptions >75 % similar; the marker
    changes, so the write happens (upstream's similarity check would have skipped it)."""
    error = "pods left behind: " + ", ".join(f"default/pod-{i}" for i in range(40))
    failed = c.DESC_DRAIN_FAILED.format(err=error)
    world, drainer, machine = world_for(
        lambda w: terminating(w, failed, state=c.STATE_PROCESSING, deleting_ago=3 * 3600.0)
    )
    world.nodes.put(mk_node("fakeNode-0"))
    drainer.fail_with = error
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_DRAIN_FAILED_FORCED.format(err=error)


def test_deletion_records_terminating_and_failed_step_events() -> None:
    """Issue 11: a Normal Event on the phase change to Terminating, a Warning on a failed step."""
    from mcm.driver import Code, MachineError
    from mcm.runtime.record import EventRecorder

    world, _, machine = world_for(lambda w: mk_machine(w.clock, phase=c.PHASE_RUNNING, deleting_ago=0))
    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    step(world, machine)
    assert ("Normal", "MachineTerminating") in [(e["type"], e["reason"]) for e in events]

    events.clear()
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_DRAIN_SUCCESSFUL))
    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    world.driver.script("delete_machine", MachineError(Code.Internal, "cloud down"))
    step(world, machine)
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "DeleteVMFailed")]
    assert events[0]["involvedObject"]["name"] == "machine-0"


# --- issue 23 "tests that notice" --------------------------------------------------------------


def test_delete_machine_answering_not_found_goes_on_with_its_last_known_state() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_DRAIN_SUCCESSFUL))
    world.driver.script("delete_machine", MachineError(Code.NotFound, "gone", last_known_state="s9"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_VM_DELETE_NOT_FOUND, c.STATE_PROCESSING, c.OPERATION_DELETE)
    assert stored is not None and stored["status"]["lastKnownState"] == "s9"


@pytest.mark.parametrize(
    ("code", "retry"), [(Code.Unavailable, c.SHORT_RETRY), (Code.Internal, c.LONG_RETRY)]
)
def test_a_failed_delete_machine_stays_at_vm_deletion(code: Code, retry: float) -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_DRAIN_SUCCESSFUL))
    world.driver.always("delete_machine", MachineError(code, "cloud says no"))
    result, stored = step(world, machine)
    assert result == Result.after(retry)
    description, state, _ = op(stored)
    assert state == c.STATE_FAILED and description.endswith(c.MARKER_INITIATE_VM_DELETION)
    assert "fakeID-0" in world.driver.vms


@pytest.mark.parametrize(
    ("spec", "flags", "timeout", "retries"),
    [
        ({}, {"machine_drain_timeout": 300.0, "machine_max_evict_retries": 10}, 300.0, 10),
        ({}, {"machine_drain_timeout": 100.0, "machine_max_evict_retries": 10}, 100.0, 5),  # ≤ timeout/20 s
        ({"drainTimeout": "10m", "maxEvictRetries": 3}, {"machine_drain_timeout": 100.0}, 600.0, 3),
        ({"drainTimeout": "10s", "maxEvictRetries": 3}, {}, 10.0, 1),  # at least one attempt
    ],
)
def test_what_the_controller_hands_the_drain(
    spec: dict[str, Any], flags: dict[str, Any], timeout: float, retries: int
) -> None:
    options = ControllerOptions(
        namespace=NS, machine_pv_detach_timeout=7.0, machine_pv_reattach_timeout=11.0, **flags
    )
    drainer = StubDrainer()
    world = make_world(options, drainer=drainer)
    machine = terminating(world, c.MARKER_INITIATE_DRAIN)
    machine["spec"].update(spec)
    world.machines.put(machine)
    world.nodes.put(mk_node("fakeNode-0"))
    result, stored = step(world, world.machines.get("machine-0"))
    assert result is None
    assert drainer.cordoned == ["fakeNode-0"]
    request = drainer.drained[0]
    drain = request.options
    assert (request.node_name, drain.timeout, drain.max_evict_retries) == ("fakeNode-0", timeout, retries)
    assert (drain.force, drain.pv_detach_timeout, drain.pv_reattach_timeout) == (False, 7.0, 11.0)
    assert request.machine["metadata"]["name"] == "machine-0"
    assert op(stored)[0] == c.DESC_DRAIN_SUCCESSFUL


def test_a_forced_drain_gets_one_minute_and_one_eviction_attempt() -> None:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    world.machines.put(terminating(world, c.MARKER_INITIATE_DRAIN, labels={c.LABEL_FORCE_DELETION: "True"}))
    world.nodes.put(mk_node("fakeNode-0"))
    step(world, world.machines.get("machine-0"))
    request = drainer.drained[0]
    assert (request.options.force, request.options.timeout, request.options.max_evict_retries) == (
        True,
        60.0,
        1,
    )


def test_a_failed_normal_drain_never_goes_on_to_vm_deletion() -> None:
    world, drainer, machine = world_for(lambda w: terminating(w, c.DESC_VM_FOUND))
    world.nodes.put(mk_node("fakeNode-0"))
    drainer.fail_with = "pods left behind: default/app-0"
    result = trigger_deletion_flow(world.deps, machine, MachineClass.from_dict(mk_class()), {})
    assert result == Result.after(c.SHORT_RETRY)
    stored = world.machines.get("machine-0")
    description, state, _ = op(stored)
    assert state == c.STATE_FAILED
    assert description == c.DESC_DRAIN_FAILED.format(err="pods left behind: default/app-0")
    assert description.endswith(c.MARKER_INITIATE_DRAIN)
    assert world.driver.calls_to("delete_machine") == []
    assert "fakeID-0" in world.driver.vms and "fakeNode-0" in world.nodes.objects


def test_a_deleting_machine_without_finalizer_gets_a_deletion_blocked_event() -> None:
    from mcm.runtime.record import EventRecorder

    world, _, machine = world_for(
        lambda w: mk_machine(w.clock, phase=c.PHASE_RUNNING, finalizer=False, deleting_ago=0)
    )
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(
        lambda e: events.append(e) or True, "machine-controller", clock=world.clock
    )
    assert trigger_deletion_flow(world.deps, machine, MachineClass.from_dict(mk_class()), {}) == Result.after(
        c.LONG_RETRY
    )
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "DeletionBlocked")]


def test_a_failed_terminating_status_write_is_retried_before_anything_else() -> None:
    world, drainer, machine = world_for(
        lambda w: mk_machine(w.clock, phase=c.PHASE_RUNNING, node="fakeNode-0", deleting_ago=0)
    )
    world.machines.fail("update_status", InternalError({"message": "etcd timeout", "code": 500}), 1)
    result = trigger_deletion_flow(world.deps, machine, MachineClass.from_dict(mk_class()), {})
    assert result == Result.after(c.SHORT_RETRY)
    assert world.driver.calls == [] and drainer.cordoned == []
    assert world.machines.get("machine-0")["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING


def test_a_node_without_attached_volumes_skips_the_volume_attachment_wait() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_FORCE_DRAIN_SUCCESSFUL))
    world.nodes.put(mk_node("fakeNode-0", status={"volumesAttached": []}))
    world.volume_attachments.put({"metadata": {"name": "va-1"}, "spec": {"nodeName": "fakeNode-0"}})
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_VA_DETACHED.format(node="fakeNode-0")
    assert "va-1" in world.volume_attachments.objects


def test_the_node_of_a_vm_that_appeared_after_the_status_step_is_found_before_deletion() -> None:
    """Found by the chaos suite (30-minute run, mixed): a CreateMachine still running (its
    answer lost to a leader change) when the deletion's status step found no VM; the VM and its
    Node appeared before DeleteMachine, which deleted the VM, and the node step, with no node
    label, left the Node for ever. The VM's Node is now looked for again before DeleteMachine."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_INITIATE_VM_DELETION, node=None, provider_id=None)
    )
    world.driver.remove_vm("fakeID-0")
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0")
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    result, stored = step(world, machine)
    assert result is None
    assert stored is not None and stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"
    assert stored["spec"]["providerID"] == "fakeID-0"
    assert op(stored)[0] == c.DESC_VM_DELETED
    assert len(world.driver.calls_to("delete_machine")) == 1


@pytest.mark.parametrize(
    ("code", "description", "retry"),
    [
        (Code.Unavailable, c.DESC_GET_VM_RETRYABLE, c.SHORT_RETRY),
        (
            Code.Internal,
            c.DESC_GET_VM_FAILED.format(
                err="machine codes error: code = [Internal] message = [cloud says no]"
            ),
            c.MEDIUM_RETRY,
        ),
    ],
)
def test_a_failed_get_machine_status_stops_the_deletion_at_its_step(
    code: Code, description: str, retry: float
) -> None:
    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS))
    world.driver.always("get_machine_status", MachineError(code, "cloud says no"))
    result, stored = step(world, machine)
    assert result == Result.after(retry)
    assert op(stored) == (description, c.STATE_FAILED, c.OPERATION_DELETE)
    assert drainer.drained == [] and "fakeID-0" in world.driver.vms


def _terminating_condition(world: World, reason: str, status: str) -> dict[str, Any]:
    return {
        **condition("Terminating", status, world.clock, 300),
        "reason": reason,
        "message": f"{reason} earlier",
    }


@pytest.mark.parametrize(
    ("existing", "reason", "message", "transition_kept"),
    [
        (None, c.NODE_SCALED_DOWN_REASON, c.NODE_SCALED_DOWN_MESSAGE, False),
        # a deletion resumed (or begun by an earlier controller) keeps the node's reason
        (("Unhealthy", "True"), "Unhealthy", "Unhealthy earlier", True),
        (("Unhealthy", "False"), "Unhealthy", "Unhealthy earlier", False),  # True again: a transition
    ],
)
def test_the_drain_step_sets_the_nodes_terminating_condition(
    existing: tuple[str, str] | None, reason: str, message: str, transition_kept: bool
) -> None:
    """Other conditions stay; the transition time moves only when the condition changes."""
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_DRAIN))
    ready = condition("Ready", "False", world.clock, 600)
    before = [ready] + ([_terminating_condition(world, *existing)] if existing else [])
    world.nodes.put(mk_node("fakeNode-0", conditions=before))
    result, stored = step(world, machine)
    assert result is None and op(stored)[0] == c.DESC_DRAIN_SUCCESSFUL
    conditions = world.nodes.get("fakeNode-0")["status"]["conditions"]
    assert [cd["type"] for cd in conditions] == ["Ready", "Terminating"]
    assert conditions[0] == ready
    after = conditions[1]
    assert (after["status"], after["reason"], after["message"]) == ("True", reason, message)
    assert after["lastHeartbeatTime"] == ts(world.clock)
    assert after["lastTransitionTime"] == (ts(world.clock, 300) if transition_kept else ts(world.clock))


def test_a_conflicting_node_finalizer_removal_is_retried_without_a_status_write() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_VM_DELETED))
    world.nodes.put(mk_node("fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER]}))
    world.nodes.fail("patch", Conflict({"message": "the object has been modified", "code": 409}), times=1)
    writes_before = list(world.machines.writes)
    result, stored = step(world, machine)
    assert result == Result.after(c.CONFLICT_RETRY)
    assert op(stored)[0] == c.DESC_VM_DELETED
    assert world.machines.writes == writes_before
    assert "fakeNode-0" in world.nodes.objects
    assert stored is not None
    result, stored = step(world, stored)  # the next pass removes it and deletes the Node
    assert op(stored)[0] == c.DESC_NODE_DELETED.format(node="fakeNode-0")
    assert "fakeNode-0" not in world.nodes.objects


def test_a_late_vms_node_label_that_cannot_be_written_holds_the_vm_deletion() -> None:
    """The Node of a VM that appeared late was found, but writing its label conflicted: the VM is
    not deleted in this pass (deleting it now would leave its Node behind)."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_INITIATE_VM_DELETION, node=None, provider_id=None)
    )
    world.driver.remove_vm("fakeID-0")
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0")
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    world.machines.fail("update", Conflict({"message": "the object has been modified", "code": 409}), times=1)
    result, stored = step(world, machine)
    assert result is not None and result.requeue_after is not None
    assert op(stored)[0] == c.MARKER_INITIATE_VM_DELETION
    assert world.driver.calls_to("delete_machine") == [] and "fakeID-0" in world.driver.vms


_GONE = new_not_found("", "nodes", "fakeNode-0")
_DOWN = InternalError({"message": "etcd down", "code": 500})


@pytest.mark.parametrize(
    ("verb", "error", "description", "state"),
    [
        # the Node went away between the cache read and the call: the step moves on
        ("patch", _GONE, c.DESC_NODE_DELETED.format(node="fakeNode-0"), c.STATE_PROCESSING),
        ("delete", _GONE, c.DESC_NODE_NOT_FOUND.format(node="fakeNode-0"), c.STATE_PROCESSING),
        # any other error stops the step; the Node is not deleted without its finalizer removed
        (
            "patch",
            _DOWN,
            c.DESC_NODE_FINALIZER_FAILED.format(node="fakeNode-0", err="etcd down"),
            c.STATE_FAILED,
        ),
        (
            "delete",
            _DOWN,
            c.DESC_NODE_DELETE_FAILED.format(node="fakeNode-0", err="etcd down"),
            c.STATE_FAILED,
        ),
    ],
)
def test_node_deletion_errors(verb: str, error: Exception, description: str, state: str) -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_VM_DELETED))
    world.nodes.put(mk_node("fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER]}))
    world.nodes.fail(verb, error, times=1)
    result, stored = step(world, machine)
    assert op(stored)[:2] == (description, state)
    if state == c.STATE_FAILED:
        assert result == Result.after(c.SHORT_RETRY)
        assert "fakeNode-0" in world.nodes.objects
        assert [v for v, _ in world.nodes.writes if v == "delete"] == []
    else:
        assert result is None


def test_a_deletion_pass_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass chains at most MAX_STEPS_PER_PASS steps, then comes back soon for the rest."""
    from mcm.controller import deletion

    monkeypatch.setattr(deletion, "MAX_STEPS_PER_PASS", 2)
    world, _, machine = world_for(lambda w: terminating(w, c.MARKER_GET_VM_STATUS))
    world.nodes.put(mk_node("fakeNode-0"))
    result = deletion.run_deletion_steps(world.deps, machine, inputs())
    assert result == Result.after(c.SHORT_RETRY)
    assert op(world.machines.objects["machine-0"])[0] == c.DESC_DRAIN_SUCCESSFUL


def test_a_marker_inside_a_longer_description_resumes_that_step() -> None:
    """A description another controller wrote may carry text after the marker: the flow resumes
    at the marker's step (upstream's substring test), not from the start."""
    described = f"{c.MARKER_INITIATE_VM_DELETION} (left by an older controller)"
    world, _, machine = world_for(lambda w: terminating(w, described))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_VM_DELETED, c.STATE_PROCESSING, c.OPERATION_DELETE)
    assert world.driver.vms == {}


def test_the_drain_step_without_a_target_cluster_goes_on_to_the_vm_deletion() -> None:
    """A machine that reached the drain step before the target cluster went away (a restart
    without --target-kubeconfig) skips the drain and goes on."""
    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_DRAIN))
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=None)
    world.deps.writers = dataclasses.replace(world.deps.writers, nodes=None)
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_NO_TARGET_SKIP_DRAIN, c.STATE_PROCESSING, c.OPERATION_DELETE)
    assert (drainer.cordoned, drainer.drained) == ([], [])


class _NodeGetFails:
    """The Node REST client whose GET answers 500 (the Node is not in the cache)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def get(self, name: str, **_: Any) -> dict[str, Any]:
        raise _DOWN

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_failed_node_read_stops_the_node_deletion_step() -> None:
    """A Node missing from the cache is read from the API server; when that read fails (not a
    404) the step fails and retries, and deletes nothing."""
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_VM_DELETED))
    world.deps.writers = dataclasses.replace(world.deps.writers, nodes=_NodeGetFails(world.nodes))
    result, stored = step(world, machine)
    description = c.DESC_NODE_GET_FAILED.format(node="fakeNode-0", err="etcd down")
    assert op(stored) == (description, c.STATE_FAILED, c.OPERATION_DELETE)
    assert result == Result.after(c.SHORT_RETRY)
    assert [v for v, _ in world.nodes.writes if v in ("patch", "delete")] == []


def test_the_vm_deletion_without_a_target_cluster_deletes_a_vm_it_knows_no_node_of() -> None:
    """Without a target cluster there is no Node to look for: a machine with neither a ``node``
    label nor a provider ID still gets its VM deleted, and the flow goes on."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.DESC_NO_TARGET_SKIP_DRAIN, node=None, provider_id=None)
    )
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=None)
    world.deps.writers = dataclasses.replace(world.deps.writers, nodes=None)
    result, stored = step(world, machine)
    assert result is None
    assert op(stored) == (c.DESC_VM_DELETED, c.STATE_PROCESSING, c.OPERATION_DELETE)
    assert world.driver.vms == {}


@pytest.mark.parametrize("machine_provider_id", ["fakeID-0", None])
def test_a_node_found_by_its_machine_name_label_never_changes_the_machines_provider_id(
    machine_provider_id: str | None,
) -> None:
    """The provider ID is taken from the Node only when the driver's listing found it; a Node
    found by its machine-name label gives the node label and nothing else."""
    world, _, machine = world_for(
        lambda w: terminating(w, c.MARKER_GET_VM_STATUS, node=None, provider_id=machine_provider_id)
    )
    labels = {c.LABEL_NODE_MACHINE_NAME: "machine-0"}
    world.nodes.put(mk_node("fakeNode-0", metadata={"labels": labels}, spec={"providerID": "fakeID-other"}))
    step(world, machine)
    stored = world.machines.get("machine-0")
    assert stored["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"
    assert stored["spec"].get("providerID") == machine_provider_id


def test_a_drain_step_without_deletion_timestamp_is_not_forced() -> None:
    """The drain is forced by a deletion older than the drain timeout; a machine whose deletion
    time cannot be read has no age and is drained normally."""
    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_DRAIN, deleting_ago=None))
    world.nodes.put(mk_node("fakeNode-0"))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_DRAIN_SUCCESSFUL
    assert drainer.drained[0].options.force is False


def test_the_drain_step_leaves_a_node_of_another_vm_alone() -> None:
    """A Node whose providerID is not the machine's is neither cordoned nor drained: the step
    goes on to the VolumeAttachments with the mismatch in its description."""
    from mcm.runtime.record import EventRecorder

    world, drainer, machine = world_for(lambda w: terminating(w, c.MARKER_INITIATE_DRAIN))
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(
        lambda e: events.append(e) or True, "machine-controller", clock=world.clock
    )
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-other"}))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_DRAIN_SKIPPED_FOREIGN_NODE.format(
        node="fakeNode-0", node_provider_id="fakeID-other", provider_id="fakeID-0"
    )
    assert (drainer.cordoned, drainer.drained) == ([], [])
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "NodeProviderIDMismatch")]


def test_the_volume_attachment_step_of_a_machine_without_node_label_names_the_missing_node() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_FORCE_DRAIN_SUCCESSFUL, node=None))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_VA_NODE_MISSING.format(err='nodes "" not found')


def test_the_deletion_time_is_exported_when_the_finalizer_is_removed() -> None:
    world, _, machine = world_for(
        lambda w: terminating(w, c.DESC_NODE_DELETED.format(node="fakeNode-0"), deleting_ago=42.0)
    )
    result, stored = step(world, machine)
    assert (result, stored) == (DONE, None)
    samples = [
        sample.value
        for metric in world.deps.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "mcm_machine_delete_duration_seconds"
    ]
    assert samples == [42.0]


def test_the_node_step_leaves_a_node_of_another_vm_in_place() -> None:
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_VM_DELETED))
    world.nodes.put(
        mk_node(
            "fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER]}, spec={"providerID": "fakeID-other"}
        )
    )
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_NODE_DELETION_SKIPPED_FOREIGN_NODE.format(
        node="fakeNode-0", node_provider_id="fakeID-other", provider_id="fakeID-0"
    )
    assert world.nodes.get("fakeNode-0")["metadata"]["finalizers"] == [c.NODE_FINALIZER]
    assert [v for v, _ in world.nodes.writes] == []


def test_the_vm_deletion_looks_for_no_node_when_the_machine_has_a_provider_id() -> None:
    """Only a machine with neither node label nor provider ID looks for its Node again before
    DeleteMachine; one with a provider ID is deleted as it is."""
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_DRAIN_SUCCESSFUL, node=None))
    world.nodes.put(mk_node("fakeNode-0", metadata={"labels": {c.LABEL_NODE_MACHINE_NAME: "machine-0"}}))
    result, stored = step(world, machine)
    assert result is None
    assert op(stored)[0] == c.DESC_VM_DELETED
    assert stored is not None and c.LABEL_NODE not in stored["metadata"]["labels"]
    assert [verb for verb, _ in world.machines.writes] == ["update_status"]


def test_the_volume_attachment_step_without_a_target_cluster_goes_on_to_the_vm_deletion() -> None:
    """A machine that was force-drained before the target cluster went away (a restart without
    --target-kubeconfig) has no VolumeAttachments to wait for: the step says why and goes on."""
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_FORCE_DRAIN_SUCCESSFUL))
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=None)
    result, stored = step(world, machine)
    assert result is None
    description = c.DESC_VA_NODE_MISSING.format(err="no target cluster")
    assert op(stored) == (description, c.STATE_PROCESSING, c.OPERATION_DELETE)


def test_the_volume_attachment_step_leaves_the_attachments_of_another_vms_node_alone() -> None:
    """A Node whose providerID is not the machine's is another VM's: its VolumeAttachments are
    not deleted, and the step goes on with the mismatch in its description."""
    world, _, machine = world_for(lambda w: terminating(w, c.DESC_FORCE_DRAIN_SUCCESSFUL))
    world.nodes.put(
        mk_node(
            "fakeNode-0",
            spec={"providerID": "fakeID-other"},
            status={"volumesAttached": [{"name": "kubernetes.io/csi/x^vol-1", "devicePath": ""}]},
        )
    )
    result, stored = step(world, machine)
    assert result is None
    reason = "node fakeNode-0 has providerID fakeID-other, not the machine's"
    assert op(stored) == (c.DESC_VA_NODE_MISSING.format(err=reason), c.STATE_PROCESSING, c.OPERATION_DELETE)

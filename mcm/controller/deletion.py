"""The deletion flow as an explicit, ordered step table: upstream v0.47.0
``pkg/util/provider/machinecontroller/machine.go``, ``triggerDeletionFlow``, with HEAD's steps.

The state of a deletion is the next-step marker at the end of ``status.lastOperation.description``
(upstream's exact strings, so upstream MCM and mcm can take over from each other). One pass
dispatches on it (:data:`STEPS`, first match wins), runs the step, writes the step's description
and — when the step succeeded — goes straight on with the next step in the same pass, so a
deletion needs no retry periods when nothing fails. A restart resumes at the step the marker
names. Steps:

========================================  ===============================================
marker                                    step
========================================  ===============================================
(phase not Terminating)                   ``set_machine_termination_status``
``Set machine status to termination...``  ``get_vm_status`` (fills a missing ``node`` label)
``Initiate node drain``                   ``drain_machine_node`` (:mod:`.nodedrain`)
``Delete Volume Attachments``             ``delete_volume_attachments`` (after a forced drain)
``Initiate VM deletion``                  ``delete_vm``
``Initiate node object deletion``         ``delete_node_object`` (node finalizer, then Node)
``Initiate machine object finalizer...``  ``remove_machine_finalizer``
(anything else)                           ``set_machine_termination_status`` (re-initiate)
========================================  ===============================================

Every failure writes a Failed lastOperation, an Event (Warning) and returns its retry period.
A failed request (an error answer or no answer at all) is such a failure, never an exception.

A pass runs only while it holds its Machine in ``deps.creation`` for deletion: while the
creation flow (or a ``CreateMachine`` abandoned at its deadline) or the orphan check has it, the
pass returns MediumRetry (upstream: ``machine "<name>" is in creation flow. Deletion cannot
proceed``), so creation and deletion of one Machine never overlap.

mcm: the ``node`` label alone never makes a Node the machine's. Before the node condition,
cordon, drain, VolumeAttachment deletion and Node deletion, :func:`foreign_node` compares the
Node's ``spec.providerID`` with the machine's; when the Node has one and the machine has another
or none, that Node is left alone with a Warning Event ``NodeProviderIDMismatch`` and the flow
goes on (the VM is deleted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import Machine, MachineClass
from mcm.controller.common import (
    FlowInputs,
    elapsed_since,
    now,
    phase_of,
    record_normal,
    record_warning,
    record_write_failure,
    write_status_or_retry,
)
from mcm.controller.context import Deps
from mcm.controller.metrics import machine_metric_labels
from mcm.controller.node import provider_ids_disagree
from mcm.controller.nodedrain import drain_machine_node
from mcm.controller.status import (
    current_status,
    last_operation,
    write_object,
)
from mcm.controller.steps import Step, StepOutcome, advance, foreign_node, mismatch, node_name_of
from mcm.driver import (
    RETRYABLE_CODES,
    Code,
    DeleteMachineRequest,
    GetMachineStatusRequest,
    ListMachinesRequest,
    MachineError,
)
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.client.errors import ApiError, RequestError, is_conflict, is_not_found
from mcm.runtime.objects import Obj
from mcm.runtime.worker import DONE, Result

__all__ = ["STEPS", "StepOutcome", "dispatch", "trigger_deletion_flow"]

log = structlog.get_logger(__name__)


MAX_STEPS_PER_PASS = 10
"""Steps one pass may chain before it hands the key back to the queue."""


def trigger_deletion_flow(
    deps: Deps, machine: Mapping[str, Any], machine_class: MachineClass, secret_data: Mapping[str, bytes]
) -> Result:
    """Run deletion steps for ``machine`` until one needs to wait or the finalizer is gone."""
    name = o.name_of(machine)
    if c.MCM_FINALIZER not in o.finalizers(machine):
        record_warning(deps, machine, "DeletionBlocked", c.ERR_MISSING_FINALIZERS.format(machine=name))
        return Result.after(c.LONG_RETRY)
    key = object_key(machine)
    with deps.creation.deleting(key) as taken:
        if not taken:
            log.info(
                "deletion_waits",
                machine=key,
                held_by=deps.creation.holder(key),
                message=f'machine "{name}" is in creation flow. Deletion cannot proceed',
            )
            return Result.after(c.MEDIUM_RETRY)
        return run_deletion_steps(deps, machine, FlowInputs.of(machine_class, secret_data))


def run_deletion_steps(deps: Deps, machine: Mapping[str, Any], inputs: FlowInputs) -> Result:
    """Chain steps until one needs to wait (at most :data:`MAX_STEPS_PER_PASS`)."""
    current = dict(machine)
    for _ in range(MAX_STEPS_PER_PASS):
        outcome = dispatch(current)(deps, current, inputs)
        if outcome.result is not None:
            return outcome.result
        current = outcome.machine
    return Result.after(c.SHORT_RETRY)


def dispatch(machine: Mapping[str, Any]) -> Step:
    """The step for the machine's phase and next-step marker (``triggerDeletionFlow``, HEAD order)."""
    if phase_of(machine) != c.PHASE_TERMINATING:
        return set_machine_termination_status
    description = o.text(machine, "status", "lastOperation", "description")
    for marker, step in STEPS:
        if description.endswith(marker):
            return step
    for marker, step in STEPS:  # descriptions written by other controllers: upstream's substring test
        if marker in description:
            return step
    return _reinitiate


# --- steps ------------------------------------------------------------------------------------


def set_machine_termination_status(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """Phase Terminating with the GetVMStatus marker (its time is the start of the deletion)."""
    when = now(deps)
    status = o.clone(o.sub(machine, "status"))
    status["lastOperation"] = last_operation(
        c.MARKER_GET_VM_STATUS, c.STATE_PROCESSING, c.OPERATION_DELETE, when
    )
    status["currentStatus"] = current_status(c.PHASE_TERMINATING, when)
    new = o.clone(machine)
    new["status"] = status
    write = write_status_or_retry(deps, machine, new["status"])
    if isinstance(write, Result):
        return StepOutcome(machine, write)
    if phase_of(machine) != c.PHASE_TERMINATING:
        record_normal(deps, machine, "MachineTerminating", f"Machine {o.name_of(machine)} is being deleted")
    return StepOutcome(write)


def _reinitiate(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    log.warning("undecodable_deletion_state", machine=object_key(machine))
    return set_machine_termination_status(deps, machine, inputs)


def get_vm_status(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """Does the VM still exist? Every answer but a driver failure moves on to the drain; without a
    target cluster there is nothing to drain and the flow goes on to the VM's deletion (HEAD's
    ``updateMachineStatusAndNodeLabel``, which asks the driver nothing then)."""
    if not deps.has_target:
        return advance(deps, machine, c.DESC_NO_TARGET_SKIP_DRAIN)
    filled = fill_node_label(deps, machine, inputs)
    if isinstance(filled, Result):
        return StepOutcome(machine, filled)
    if isinstance(filled, MachineError):
        return _vm_status_error(deps, machine, filled)
    machine = filled
    request = GetMachineStatusRequest(Machine.from_dict(machine), inputs.machine_class, inputs.secret_data)
    try:
        deps.calls.call(
            "get_machine_status",
            lambda ctx: deps.driver.get_machine_status(ctx, request),
            provider=inputs.machine_class.provider,
        )
    except MachineError as err:
        return _vm_status_error(deps, machine, err)
    return advance(deps, machine, c.DESC_VM_FOUND)


def _vm_status_error(deps: Deps, machine: Obj, err: MachineError) -> StepOutcome:
    if err.code == Code.NotFound:
        return advance(deps, machine, c.DESC_VM_NOT_FOUND)
    if err.code == Code.Uninitialized:
        return advance(deps, machine, c.DESC_VM_UNINITIALIZED)
    if err.code == Code.Unimplemented:
        return advance(deps, machine, c.DESC_VM_FOUND)
    if err.code in RETRYABLE_CODES:
        return advance(
            deps, machine, c.DESC_GET_VM_RETRYABLE, state=c.STATE_FAILED, reason="GetVMStatusFailed"
        )
    description = c.DESC_GET_VM_FAILED.format(err=str(err))
    return advance(
        deps, machine, description, state=c.STATE_FAILED, retry=c.MEDIUM_RETRY, reason="GetVMStatusFailed"
    )


def fill_node_label(deps: Deps, machine: Obj, inputs: FlowInputs) -> Obj | Result | MachineError:
    """A machine without ``node`` label gets it from its Node: the one labelled with its name
    (HEAD), else the one carrying its VM's provider ID (``spec.providerID``, or, when the
    creation never got to write it, the provider ID the driver lists for this machine, which is
    then written to ``spec.providerID`` too so the later steps' provider-ID check agrees). Without
    it the deletion would delete the VM and leave its Node behind, so a listing that failed
    with a retryable code is returned (the step is retried like a failed GetMachineStatus)."""
    nodes = deps.listers.nodes
    if node_name_of(machine) or nodes is None:
        return machine
    every = nodes.list()
    name = o.name_of(machine)
    matches: list[Mapping[str, Any]] = [n for n in every if _labelled_for(n, name)]
    if not matches:
        provider_ids = _provider_ids(deps, machine, inputs)
        if isinstance(provider_ids, MachineError):
            return provider_ids
        matches = _nodes_by_provider_id(every, provider_ids)
        if provider_ids and not matches:
            live = _live_nodes(deps)
            if isinstance(live, Result):
                return live
            matches = _nodes_by_provider_id(live, provider_ids)
    if len(matches) != 1:
        return machine
    new = o.clone(machine)
    new.setdefault("metadata", {})["labels"] = {**o.labels_of(machine), c.LABEL_NODE: o.name_of(matches[0])}
    node_provider_id = o.text(matches[0], "spec", "providerID")
    if not o.text(machine, "spec", "providerID") and node_provider_id and not _labelled_for(matches[0], name):
        # learned from the driver's listing: the later steps' provider-ID check must agree
        new.setdefault("spec", {})["providerID"] = node_provider_id
    write = write_object(deps.writers.machines, machine, new)
    if not write.ok:
        return Result.after(write.retry(c.SHORT_RETRY))
    return write.obj


def _labelled_for(node: Mapping[str, Any], machine_name: str) -> bool:
    return o.labels_of(node).get(c.LABEL_NODE_MACHINE_NAME) == machine_name


def _nodes_by_provider_id(
    nodes: Sequence[Mapping[str, Any]], provider_ids: set[str]
) -> list[Mapping[str, Any]]:
    return [n for n in nodes if provider_ids and o.text(n, "spec", "providerID") in provider_ids]


def _live_nodes(deps: Deps) -> list[Mapping[str, Any]] | Result:
    """Every Node from the API server: a Node that registered a moment ago may not be in the
    cache yet (this runs only for a Machine whose creation never wrote its node label)."""
    assert deps.writers.nodes is not None
    try:
        listed = deps.writers.nodes.list()
    except RequestError as err:
        log.info("node_list_failed", error=str(err))
        return Result.after(c.SHORT_RETRY)
    return list(listed.get("items") or [])


def _provider_ids(deps: Deps, machine: Obj, inputs: FlowInputs) -> set[str] | MachineError:
    """The machine's provider ID, else those of the VMs the driver lists for its name. A listing
    failing with a retryable code is returned; with any other code (``Unimplemented``: a driver
    that cannot list) there are none and the flow goes on without the Node."""
    provider_id = o.text(machine, "spec", "providerID")
    if provider_id:
        return {provider_id}
    request = ListMachinesRequest(inputs.machine_class, inputs.secret_data)
    try:
        listed = deps.calls.call(
            "list_machines",
            lambda ctx: deps.driver.list_machines(ctx, request),
            provider=inputs.machine_class.provider,
        )
    except MachineError as err:
        log.info("list_machines_failed", machine=object_key(machine), error=str(err))
        return err if err.code in RETRYABLE_CODES else set()
    return {pid for pid, owner in listed.machine_list.items() if owner == o.name_of(machine)}


def delete_volume_attachments(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """After a forced drain: delete the node's VolumeAttachments, wait until none is left (HEAD).

    One that already has a deletionTimestamp is gone as far as this step is concerned (HEAD
    counts only the others): its attacher's finalizer must not hold the VM deletion for ever.
    """
    op_type = o.text(machine, "status", "lastOperation", "type") or c.OPERATION_DELETE
    node_name = node_name_of(machine)
    nodes, attachments = deps.listers.nodes, deps.listers.volume_attachments
    if nodes is None or attachments is None or deps.writers.volume_attachments is None:
        return advance(deps, machine, c.DESC_VA_NODE_MISSING.format(err="no target cluster"), op_type=op_type)
    try:
        node = nodes.get(node_name)
    except ApiError as err:
        return advance(deps, machine, c.DESC_VA_NODE_MISSING.format(err=err.message), op_type=op_type)
    if provider_ids_disagree(machine, node):
        reason = f"node {node_name} has providerID {o.text(node, 'spec', 'providerID')}, not the machine's"
        return advance(deps, machine, c.DESC_VA_NODE_MISSING.format(err=reason), op_type=op_type)
    if not o.sub(node, "status").get("volumesAttached"):
        return advance(deps, machine, c.DESC_VA_DETACHED.format(node=node_name), op_type=op_type)
    live = [
        va
        for va in attachments.list()
        if o.text(va, "spec", "nodeName") == node_name and not o.deletion_timestamp(va)
    ]
    if not live:
        return advance(deps, machine, c.DESC_VA_NONE_LIVE.format(node=node_name), op_type=op_type)
    for va in live:
        try:
            deps.writers.volume_attachments.delete(o.name_of(va))
        except RequestError as err:
            if not is_not_found(err):
                log.warning("volume_attachment_delete_failed", machine=object_key(machine), error=err.message)
    return StepOutcome(machine, Result.after(c.SHORT_RETRY))


def delete_vm(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """``DeleteMachine``; the driver's lastKnownState is kept. A machine that still has neither
    a ``node`` label nor a provider ID looks for its VM's Node once more first: a VM whose
    ``CreateMachine`` was still running when the status step found nothing has appeared since,
    and without its Node the node step would leave that Node behind."""
    filled = _node_of_a_late_vm(deps, machine, inputs)
    if isinstance(filled, Result):
        return StepOutcome(machine, filled)
    if isinstance(filled, MachineError):
        return _vm_delete_error(deps, machine, filled)
    machine = filled
    request = DeleteMachineRequest(Machine.from_dict(machine), inputs.machine_class, inputs.secret_data)
    try:
        response = deps.calls.call(
            "delete_machine",
            lambda ctx: deps.driver.delete_machine(ctx, request),
            provider=inputs.machine_class.provider,
        )
    except MachineError as err:
        return _vm_delete_error(deps, machine, err)
    return advance(deps, machine, c.DESC_VM_DELETED, last_known_state=response.last_known_state)


def _node_of_a_late_vm(deps: Deps, machine: Obj, inputs: FlowInputs) -> Obj | Result | MachineError:
    if node_name_of(machine) or o.text(machine, "spec", "providerID"):
        return machine
    return fill_node_label(deps, machine, inputs)


def _vm_delete_error(deps: Deps, machine: Obj, err: MachineError) -> StepOutcome:
    state = err.last_known_state
    if err.code == Code.NotFound:
        return advance(deps, machine, c.DESC_VM_DELETE_NOT_FOUND, last_known_state=state)
    if err.code in RETRYABLE_CODES:
        description = c.DESC_VM_DELETE_RETRYABLE.format(err=str(err))
        return advance(
            deps, machine, description, state=c.STATE_FAILED, reason="DeleteVMFailed", last_known_state=state
        )
    description = c.DESC_VM_DELETE_FAILED.format(err=str(err))
    return advance(
        deps,
        machine,
        description,
        state=c.STATE_FAILED,
        retry=c.LONG_RETRY,
        reason="DeleteVMFailed",
        last_known_state=state,
    )


def delete_node_object(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """Remove the node finalizer, then delete the Node (a missing Node is fine)."""
    node_name = node_name_of(machine)
    nodes, writer = deps.listers.nodes, deps.writers.nodes
    if not node_name or nodes is None or writer is None:
        return advance(deps, machine, c.DESC_NODE_LABEL_MISSING.format(machine=o.name_of(machine)))
    try:
        node = _current_node(deps, node_name)
    except RequestError as err:
        if is_not_found(err):
            return advance(deps, machine, c.DESC_NODE_NOT_FOUND.format(node=node_name))
        description = c.DESC_NODE_GET_FAILED.format(node=node_name, err=err.message)
        return advance(deps, machine, description, state=c.STATE_FAILED, reason="DeleteNodeFailed")
    if foreign_node(deps, machine, node_name, "not deleted") is not None:
        description = c.DESC_NODE_DELETION_SKIPPED_FOREIGN_NODE.format(**mismatch(machine, node))
        return advance(deps, machine, description)
    failed = _remove_node_finalizer(deps, machine, node)
    if failed is not None:
        return failed
    return _delete_node(deps, machine, node_name)


def _remove_node_finalizer(deps: Deps, machine: Obj, node: Mapping[str, Any]) -> StepOutcome | None:
    """Patch the node finalizer out of ``node`` (with its resourceVersion) if it carries it;
    the step's outcome if that failed, else ``None``."""
    if c.NODE_FINALIZER not in o.finalizers(node):
        return None
    assert deps.writers.nodes is not None
    node_name = o.name_of(node)
    finalizers = sorted(set(o.finalizers(node)) - {c.NODE_FINALIZER})
    version = o.meta(node).get("resourceVersion")
    try:
        deps.writers.nodes.patch(
            node_name, {"metadata": {"finalizers": finalizers, "resourceVersion": version}}
        )
    except RequestError as err:
        if is_conflict(err):
            log.debug("node_finalizer_conflict", machine=object_key(machine), node=node_name)
            return StepOutcome(machine, Result.after(c.CONFLICT_RETRY))
        if not is_not_found(err):
            description = c.DESC_NODE_FINALIZER_FAILED.format(node=node_name, err=err.message)
            return advance(deps, machine, description, state=c.STATE_FAILED, reason="DeleteNodeFailed")
    return None


def _current_node(deps: Deps, node_name: str) -> Mapping[str, Any]:
    """The Node from the cache, else from the API server: a Node that registered a moment ago
    may not be in the cache yet, and a deletion that took it for gone would leave it behind."""
    assert deps.listers.nodes is not None and deps.writers.nodes is not None
    try:
        cached: Mapping[str, Any] = deps.listers.nodes.get(node_name)
        return cached
    except ApiError as err:
        if not is_not_found(err):
            raise
    live: Mapping[str, Any] = deps.writers.nodes.get(node_name)
    return live


def _delete_node(deps: Deps, machine: Obj, node_name: str) -> StepOutcome:
    """DELETE the Node. If the answer shows it still held by the node finalizer (the cached
    copy the step read was older than the finalizer), the finalizer is removed from the answer,
    or the Node would stay for ever once the Machine is gone."""
    assert deps.writers.nodes is not None
    try:
        answer = deps.writers.nodes.delete(node_name)
    except RequestError as err:
        if is_not_found(err):
            return advance(deps, machine, c.DESC_NODE_NOT_FOUND.format(node=node_name))
        description = c.DESC_NODE_DELETE_FAILED.format(node=node_name, err=err.message)
        return advance(deps, machine, description, state=c.STATE_FAILED, reason="DeleteNodeFailed")
    if isinstance(answer, Mapping) and o.name_of(answer) == node_name:
        failed = _remove_node_finalizer(deps, machine, answer)
        if failed is not None:
            return failed
    return advance(deps, machine, c.DESC_NODE_DELETED.format(node=node_name))


def remove_machine_finalizer(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """Drop the MCM finalizer; the API server then removes the Machine."""
    write = write_object(deps.writers.machines, machine, o.without_finalizer(machine, c.MCM_FINALIZER))
    if not write.ok:
        message = f"Machine finalizer REMOVAL failed: {write.error}"
        record_write_failure(deps, machine, "FinalizerRemovalFailed", message, write)
        return StepOutcome(machine, Result.after(write.retry(c.SHORT_RETRY)))
    deleting_for = elapsed_since(deps, o.deletion_timestamp(machine))
    if deleting_for is not None:
        deps.metrics.delete_duration.labels(**machine_metric_labels(machine, inputs.class_dict)).set(
            deleting_for
        )
    record_normal(deps, machine, "MachineDeleted", f"Machine {o.name_of(machine)} deleted")
    return StepOutcome(write.obj, DONE)


STEPS: tuple[tuple[str, Step], ...] = (
    (c.MARKER_GET_VM_STATUS, get_vm_status),
    (c.MARKER_INITIATE_DRAIN, drain_machine_node),
    (c.MARKER_DELETE_VOLUME_ATTACHMENTS, delete_volume_attachments),
    (c.MARKER_INITIATE_VM_DELETION, delete_vm),
    (c.MARKER_INITIATE_NODE_DELETION, delete_node_object),
    (c.MARKER_INITIATE_FINALIZER_REMOVAL, remove_machine_finalizer),
)
"""Next-step marker → step, in upstream's dispatch order (HEAD)."""

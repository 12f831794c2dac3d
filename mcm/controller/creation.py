"""The creation flow: from a Machine to a VM and a Pending phase.

Upstream v0.47.0 ``pkg/util/provider/machinecontroller/machine.go``, ``triggerCreationFlow``, with
HEAD's changes (metadata, InitializeMachine and Pending in one pass).

Boxes, in order (each a function below):

0. ``refuse_unlabelable_name`` — mcm: a machine name that is not a valid label value (longer
   than 63 characters) would get a VM whose ``node`` label and Node label cannot be written, so
   such a machine is marked Failed with a Warning Event before any token or VM exists.
1. ``prepare_user_data`` — copy the class secret data, put the bootstrap token and machine name
   into ``userData`` (Short on failure, no status write).
2. ``find_or_create_vm`` — ``GetMachineStatus``; adopt a VM that exists; create one when the
   driver says ``NotFound``/``Unimplemented`` and the machine has no ``spec.providerID``;
   ``Uninitialized`` marks the VM for initialisation; other errors go to
   ``machine_create_error_handler`` (status Failed/CrashLoopBackOff, retry by code).
3. ``check_stale_node`` — right after a create: a Node of another name already exists → delete the
   new VM and mark the machine Failed.
4. ``write_creation_metadata`` — label ``node``, priority annotation, ``spec.providerID``.
5. ``initialize_vm`` — ``InitializeMachine`` once after creation (``Unimplemented`` = nothing to do).
6. ``mark_pending`` — phase Pending (or Available without a target cluster), only from the empty
   phase or CrashLoopBackOff.

Every pass that gets through all boxes ends with at most two Machine writes (metadata, status).
Driver calls are bounded by the per-call deadline; every driver error gets a status and an Event.

No second VM: the flow runs only while it holds its Machine in ``deps.creation`` (never at the
same time as the deletion flow or the orphan check of that Machine; a refused pass retries after
ShortRetry) and only if the cache, read after taking the Machine, shows it neither gone nor
deleting. A ``CreateMachine`` abandoned at ``--driver-call-timeout`` keeps the Machine "in
creation" until the driver returns. The ``lastKnownState`` a ``CreateMachine`` returns is
written whatever comes next (failed InitializeMachine, a phase that needs no Pending write).

No Node left behind: the VM's provider ID and node label reach the Machine even when the
metadata write conflicts or the ``CreateMachine`` was abandoned (``keep_vm_identity``), so a
deletion that began meanwhile deletes the VM's Node too.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import Machine, MachineClass
from mcm.controller.bootstrap import UserDataError, ensure_bootstrap_token, render_user_data
from mcm.controller.common import (
    FlowInputs,
    creation_timeout,
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
from mcm.controller.status import (
    current_status,
    last_operation,
    machine_status_update,
    write_object,
)
from mcm.driver import (
    RETRYABLE_CODES,
    CallContext,
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    GetMachineStatusRequest,
    InitializeMachineRequest,
    MachineError,
    code_name,
)
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.client.errors import RequestError
from mcm.runtime.labels import is_valid_label_value
from mcm.runtime.objects import Obj
from mcm.runtime.worker import DONE, Result

__all__ = ["VM", "create_failure_phase", "trigger_creation_flow"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class VM:
    """The VM backing a machine, as the driver reported it."""

    provider_id: str
    node_name: str
    uninitialized: bool = False
    last_known_state: str = ""
    addresses: tuple[dict[str, str], ...] = field(default=())


def trigger_creation_flow(
    deps: Deps, machine: Mapping[str, Any], machine_class: MachineClass, secret_data: Mapping[str, bytes]
) -> Result:
    """Run the creation flow for ``machine`` (marked "in creation" for the deletion flow)."""
    refused = refuse_unlabelable_name(deps, machine)
    if refused is not None:
        return refused
    key = object_key(machine)
    with deps.creation.creating(key) as taken:
        if not taken:
            log.info("creation_deferred", machine=key, held_by=deps.creation.holder(key))
            return Result.after(c.SHORT_RETRY)
        if not still_to_create(deps, machine):
            return DONE
        prepared = prepare_user_data(deps, machine, secret_data)
        if isinstance(prepared, Result):
            return prepared
        inputs = FlowInputs.of(machine_class, prepared)
        vm = find_or_create_vm(deps, machine, inputs)
        if isinstance(vm, Result):
            return vm
        return _after_vm(deps, machine, inputs, vm)


def still_to_create(deps: Deps, machine: Mapping[str, Any]) -> bool:
    """The cache, read once this flow holds the Machine, shows the same Machine, not deleting.

    A deletion pass only starts once the cache shows the deletionTimestamp, and the cache never
    goes back, so a creation pass that starts after (or between) deletion passes sees it here,
    even when it was handed an older copy.
    """
    cached = o.cached(deps.listers.machines, o.name_of(machine))
    if cached is None:
        log.info("creation_skipped_machine_gone", machine=object_key(machine))
        return False
    if o.meta(cached).get("uid") != o.meta(machine).get("uid"):
        log.info("creation_skipped_machine_replaced", machine=object_key(machine))
        return False
    if o.deletion_timestamp(cached):
        log.info("creation_skipped_machine_deleting", machine=object_key(machine))
        deps.enqueue_termination(object_key(machine), 0.0)
        return False
    return True


def _after_vm(deps: Deps, machine: Mapping[str, Any], inputs: FlowInputs, vm: VM) -> Result:
    if not vm.provider_id or (deps.has_target and not vm.node_name):
        err = MachineError(Code.Internal, "driver returned an empty providerID or node name")
        return machine_create_error_handler(deps, machine, err, reason="CreateFailed")
    written = write_creation_metadata(deps, machine, vm)
    if isinstance(written, Result):
        return written
    if vm.uninitialized:
        failed = initialize_vm(deps, written, inputs, vm.last_known_state)
        if failed is not None:
            return failed
    return mark_pending(deps, written, vm)


# --- 0. the machine name ----------------------------------------------------------------------


def refuse_unlabelable_name(deps: Deps, machine: Mapping[str, Any]) -> Result | None:
    """Failed, with an Event, when the machine's name cannot be a label value; else ``None``."""
    problems = is_valid_label_value(o.name_of(machine))
    if not problems:
        return None
    when = now(deps)
    message = c.ERR_MACHINE_NAME_NOT_LABEL_VALUE.format(machine=o.name_of(machine), err="; ".join(problems))
    operation = last_operation(message, c.STATE_FAILED, c.OPERATION_CREATE, when)
    write = machine_status_update(
        deps.writers.machines, machine, operation, current_status(c.PHASE_FAILED, when), now=when
    )
    record_warning(deps, machine, "InvalidMachineName", message)
    _phase_event(deps, machine, c.PHASE_FAILED)
    return Result.after(write.retry(c.LONG_RETRY))


# --- 1. userData ------------------------------------------------------------------------------


def prepare_user_data(
    deps: Deps, machine: Mapping[str, Any], secret_data: Mapping[str, bytes]
) -> dict[str, bytes] | Result:
    """A copy of ``secret_data`` whose ``userData`` carries the token and the machine name."""
    name = o.name_of(machine)
    data = dict(secret_data)
    raw = data.get(c.USER_DATA_KEY)
    if raw is None:
        record_warning(deps, machine, "UserDataMissing", c.ERR_USER_DATA_MISSING.format(machine=name))
        return Result.after(c.SHORT_RETRY)
    token = None
    if deps.has_target and deps.writers.target_secrets is not None:
        expires = now(deps) + _dt.timedelta(seconds=creation_timeout(deps, machine))
        try:
            token = ensure_bootstrap_token(
                deps.writers.target_secrets,
                name,
                expires=expires,
                extra_groups=deps.options.bootstrap_token_auth_extra_groups,
            )
        except UserDataError as err:
            record_warning(deps, machine, "BootstrapTokenFailed", str(err))
            return Result.after(c.SHORT_RETRY)
    text = raw.decode(errors="surrogateescape")
    data[c.USER_DATA_KEY] = render_user_data(text, name, token).encode(errors="surrogateescape")
    return data


# --- 2. find or create the VM -----------------------------------------------------------------


def find_or_create_vm(deps: Deps, machine: Mapping[str, Any], inputs: FlowInputs) -> VM | Result:
    """Adopt the existing VM or create one (see the module docstring)."""
    typed = Machine.from_dict(machine)
    request = GetMachineStatusRequest(typed, inputs.machine_class, inputs.secret_data)
    provider_id = o.text(machine, "spec", "providerID")
    try:
        response = deps.calls.call(
            "get_machine_status",
            lambda ctx: deps.driver.get_machine_status(ctx, request),
            provider=inputs.machine_class.provider,
        )
    except MachineError as err:
        if err.code in (Code.NotFound, Code.Unimplemented, Code.Uninitialized) and not provider_id:
            return create_vm(deps, machine, inputs, typed)
        if err.code in (Code.NotFound, Code.Unimplemented, Code.Uninitialized):
            node = o.label(machine, c.LABEL_NODE) or ""
            return VM(provider_id, node, uninitialized=err.code == Code.Uninitialized)
        return machine_create_error_handler(deps, machine, err, reason="GetMachineStatusFailed")
    addresses = tuple(a.to_dict() for a in response.addresses)
    return VM(response.provider_id, response.node_name, addresses=addresses)


def create_vm(
    deps: Deps, machine: Mapping[str, Any], inputs: FlowInputs, typed: Machine | None = None
) -> VM | Result:
    """``CreateMachine`` (``typed``: ``machine`` already decoded, as for the status call before);
    then the stale-node check."""
    typed = typed if typed is not None else Machine.from_dict(machine)
    request = CreateMachineRequest(typed, inputs.machine_class, inputs.secret_data)
    started = deps.clock.monotonic()
    log.info("creating_vm", machine=object_key(machine), timeout=creation_timeout(deps, machine))
    key = object_key(machine)
    answers: list[CreateMachineResponse] = []

    def create(ctx: CallContext) -> CreateMachineResponse:
        answer = deps.driver.create_machine(ctx, request)
        answers.append(answer)
        return answer

    def abandon() -> Callable[[], None]:
        release = deps.creation.abandoned(key)

        def returned() -> None:
            """The abandoned call came back: keep what it made on the Machine, then let go."""
            try:
                if answers:
                    keep_vm_identity(deps, machine, VM(answers[0].provider_id, answers[0].node_name))
            finally:
                release()

        return returned

    try:
        response = deps.calls.call(
            "create_machine", create, on_abandon=abandon, provider=inputs.machine_class.provider
        )
    except MachineError as err:
        return machine_create_error_handler(deps, machine, err, reason="CreateFailed")
    deps.metrics.create_duration.labels(**machine_metric_labels(machine, inputs.class_dict)).set(
        deps.clock.since(started)
    )
    vm = VM(
        response.provider_id,
        response.node_name,
        uninitialized=True,
        last_known_state=response.last_known_state,
        addresses=tuple(a.to_dict() for a in response.addresses),
    )
    stale = check_stale_node(deps, machine, inputs, vm)
    return stale if stale is not None else vm


def machine_create_error_handler(
    deps: Deps, machine: Mapping[str, Any], err: MachineError, *, reason: str
) -> Result:
    """Record a failed create/status call: Failed or CrashLoopBackOff, retry by error code."""
    return write_failed_creation(
        deps,
        machine,
        c.DESC_PROVIDER_ERROR.format(err=str(err)),
        phase=create_failure_phase(deps, machine),
        event=(reason, str(err)),
        retry=_create_retry(deps, err.code),
        error_code=code_name(err.code),
        last_known_state=err.last_known_state,  # empty: the stored one is kept
    )


def write_failed_creation(
    deps: Deps,
    machine: Mapping[str, Any],
    description: str,
    *,
    phase: str,
    event: tuple[str, str],
    retry: float,
    error_code: str = "",
    last_known_state: str = "",
) -> Result:
    """A Failed creation step: lastOperation and ``phase`` (upstream ``machineStatusUpdate``),
    the Warning ``event`` (reason, message), a phase Event; ``retry`` (sooner after a failed write)."""
    when = now(deps)
    operation = last_operation(description, c.STATE_FAILED, c.OPERATION_CREATE, when, error_code)
    write = machine_status_update(
        deps.writers.machines,
        machine,
        operation,
        current_status(phase, when),
        now=when,
        last_known_state=last_known_state,
    )
    record_warning(deps, machine, *event)
    _phase_event(deps, machine, phase)
    return Result.after(write.retry(retry))


def _create_retry(deps: Deps, code: Code) -> float:
    if code in RETRYABLE_CODES:
        return c.SHORT_RETRY
    if code == Code.ResourceExhausted:
        return deps.options.resource_exhausted_retry or c.LONG_RETRY
    return c.MEDIUM_RETRY


def create_failure_phase(deps: Deps, machine: Mapping[str, Any]) -> str:
    """Failed once the creation timeout has passed since the machine was created, else CrashLoopBackOff."""
    elapsed = elapsed_since(deps, o.meta(machine).get("creationTimestamp"))
    if elapsed is not None and elapsed > creation_timeout(deps, machine):
        return c.PHASE_FAILED
    return c.PHASE_CRASH_LOOP_BACK_OFF


def _phase_event(deps: Deps, machine: Mapping[str, Any], phase: str) -> None:
    if phase_of(machine) != phase:
        record_normal(deps, machine, f"Machine{phase}", f"Machine {o.name_of(machine)} is now {phase}")


# --- 3. stale node ----------------------------------------------------------------------------


def check_stale_node(deps: Deps, machine: Mapping[str, Any], inputs: FlowInputs, vm: VM) -> Result | None:
    """A Node named differently from the machine already exists: drop the new VM, mark Failed.

    A Node whose ``spec.providerID`` is the VM's own is not stale: the VM registered it before
    ``CreateMachine`` answered (an answer lost and the call retried, a restart), so the VM is
    adopted. Upstream deletes it, and with it the Machine's only VM.
    """
    nodes = deps.listers.nodes
    if nodes is None or vm.node_name == o.name_of(machine) or not vm.node_name:
        return None
    node = o.cached(nodes, vm.node_name)
    if node is None:
        return None
    if vm.provider_id and o.text(node, "spec", "providerID") == vm.provider_id:
        log.info("vm_node_already_registered", machine=object_key(machine), node=vm.node_name)
        return None
    stale = o.clone(machine)
    stale.setdefault("spec", {})["providerID"] = vm.provider_id
    request = DeleteMachineRequest(Machine.from_dict(stale), inputs.machine_class, inputs.secret_data)
    try:
        deps.calls.call(
            "delete_machine",
            lambda ctx: deps.driver.delete_machine(ctx, request),
            provider=inputs.machine_class.provider,
        )
    except MachineError as err:
        log.info("stale_vm_delete_failed", machine=object_key(machine), error=str(err))
    return write_failed_creation(
        deps,
        machine,
        c.DESC_OLD_NODE_OBJECT,
        phase=c.PHASE_FAILED,
        event=("StaleNode", f"VM uses the old node object {vm.node_name}"),
        retry=c.SHORT_RETRY,
    )


# --- 4. metadata ------------------------------------------------------------------------------


def write_creation_metadata(deps: Deps, machine: Mapping[str, Any], vm: VM) -> Obj | Result:
    """Label ``node``, priority annotation and ``spec.providerID``; the stored machine or a retry."""
    new = o.clone(machine)
    metadata = new.setdefault("metadata", {})
    if deps.has_target:
        metadata["labels"] = {**o.labels_of(machine), c.LABEL_NODE: vm.node_name}
    annotations = o.annotations_of(machine)
    if not annotations.get(c.ANNOTATION_MACHINE_PRIORITY):
        metadata["annotations"] = {**annotations, c.ANNOTATION_MACHINE_PRIORITY: c.DEFAULT_MACHINE_PRIORITY}
    new.setdefault("spec", {})["providerID"] = vm.provider_id
    write = write_object(deps.writers.machines, machine, new)
    if not write.ok:
        if write.conflict:
            keep_vm_identity(deps, machine, vm)
        record_write_failure(deps, machine, "UpdateFailed", f"Machine UPDATE failed: {write.error}", write)
        return Result.after(write.retry(c.SHORT_RETRY))
    return write.obj


def keep_vm_identity(deps: Deps, machine: Mapping[str, Any], vm: VM) -> None:
    """After a conflict, put the VM's provider ID and node label on the Machine anyway: a merge
    patch of those fields only (so nothing another writer put there is touched), on the Machine
    with this UID. A deletion that began while ``CreateMachine`` ran then knows the VM's Node;
    without it, it deletes the VM but leaves the Node behind. The next pass writes the rest."""
    patch: dict[str, Any] = {"spec": {"providerID": vm.provider_id}}
    metadata: dict[str, Any] = {"labels": {c.LABEL_NODE: vm.node_name}} if deps.has_target else {}
    uid = o.meta(machine).get("uid")
    if uid:
        metadata["uid"] = uid
    if metadata:
        patch["metadata"] = metadata
    namespace = o.meta(machine).get("namespace") or deps.namespace
    try:
        deps.writers.machines.patch(o.name_of(machine), patch, namespace=namespace)
    except RequestError as err:
        log.info("vm_identity_not_kept", machine=object_key(machine), error=str(err))


# --- 5. initialize ----------------------------------------------------------------------------


def initialize_vm(
    deps: Deps, machine: Mapping[str, Any], inputs: FlowInputs, created_state: str = ""
) -> Result | None:
    """``InitializeMachine``; ``None`` when done or not implemented. A failure is written with
    ``created_state`` (what ``CreateMachine`` returned) unless the error brings its own."""
    request = InitializeMachineRequest(Machine.from_dict(machine), inputs.machine_class, inputs.secret_data)
    started = deps.clock.monotonic()
    try:
        deps.calls.call(
            "initialize_machine",
            lambda ctx: deps.driver.initialize_machine(ctx, request),
            provider=inputs.machine_class.provider,
        )
    except MachineError as err:
        if err.code == Code.Unimplemented:
            return None
        return _initialization_failed(deps, machine, err, err.last_known_state or created_state)
    labels = machine_metric_labels(machine, inputs.class_dict)
    deps.metrics.initialize_duration.labels(**labels).set(deps.clock.since(started))
    return None


def _initialization_failed(
    deps: Deps, machine: Mapping[str, Any], err: MachineError, last_known_state: str
) -> Result:
    return write_failed_creation(
        deps,
        machine,
        c.DESC_INITIALIZE_FAILED.format(err=str(err)),
        phase=create_failure_phase(deps, machine),
        event=("InitializeFailed", str(err)),
        retry=c.SHORT_RETRY,
        error_code=code_name(err.code),
        last_known_state=last_known_state,
    )


# --- 6. pending -------------------------------------------------------------------------------


def keep_last_known_state(deps: Deps, machine: Mapping[str, Any], vm: VM) -> Result:
    """Write ``vm.last_known_state`` when it is new; the phase and lastOperation stay."""
    status = o.sub(machine, "status")
    if not vm.last_known_state or status.get("lastKnownState") == vm.last_known_state:
        return Result.after(c.LONG_RETRY)
    written = write_status_or_retry(deps, machine, {**status, "lastKnownState": vm.last_known_state})
    return written if isinstance(written, Result) else Result.after(c.LONG_RETRY)


def mark_pending(deps: Deps, machine: Mapping[str, Any], vm: VM) -> Result:
    """Phase Pending (Available without a target cluster) from the empty phase or CrashLoopBackOff.

    In any other phase only a new ``lastKnownState`` from ``CreateMachine`` is written.
    """
    if phase_of(machine) not in ("", c.PHASE_CRASH_LOOP_BACK_OFF):
        return keep_last_known_state(deps, machine, vm)
    when = now(deps)
    status = o.clone(o.sub(machine, "status"))
    if deps.has_target:
        phase = c.PHASE_PENDING
        status["lastOperation"] = last_operation(
            c.DESC_CREATING, c.STATE_PROCESSING, c.OPERATION_CREATE, when
        )
        status["currentStatus"] = current_status(phase, when, timeout_active=True)
    else:
        phase = c.PHASE_AVAILABLE
        status["lastOperation"] = last_operation(
            c.DESC_CREATED_NO_TARGET, c.STATE_SUCCESSFUL, c.OPERATION_CREATE, when
        )
        status["currentStatus"] = current_status(phase, when)
        status["addresses"] = [dict(a) for a in vm.addresses]
    if vm.last_known_state:
        status["lastKnownState"] = vm.last_known_state
    written = write_status_or_retry(deps, machine, status)
    if isinstance(written, Result):
        return written
    _phase_event(deps, machine, phase)
    return Result.after(c.SHORT_RETRY if deps.has_target else c.LONG_RETRY)

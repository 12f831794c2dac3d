"""Machine health (upstream v0.47.0 ``machine_util.go``, ``reconcileMachineHealth``, with
HEAD's changes): node conditions → phase.

Boxes: ``copy_node_conditions`` (by condition type), ``is_healthy``, ``decide_phase``
(Running ↔ Unknown, Pending → Running unless the node still carries the
critical-components-not-ready taint), ``check_timeouts`` (Pending from the machine's creation,
Unknown from its last phase change) and ``mark_failed_throttled`` (at most
``max_failed_machines_per_deployment`` machines of one MachineDeployment in replacement at a
time, decided under a per-deployment permit).

All changes are collected into one status write. On success the pass continues with the stored
machine; a timeout not reached yet asks for a recheck when it will be (``HealthOutcome.recheck``)
and the pass goes on (node-template sync): only a failure or a Failed mark ends it
(``HealthOutcome.result``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller.bootstrap import delete_bootstrap_token
from mcm.controller.common import (
    creation_timeout,
    elapsed_since,
    health_timeout,
    machine_node,
    node_condition_types,
    now,
    phase_of,
    record_normal,
    record_warning,
    write_status_or_retry,
)
from mcm.controller.context import Deps
from mcm.controller.metrics import machine_metric_labels
from mcm.controller.status import current_status, last_operation, write_status
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.objects import Obj
from mcm.runtime.worker import Result

__all__ = [
    "FailedMarks",
    "conditions_changed",
    "format_conditions",
    "is_healthy",
    "reconcile_machine_health",
]

log = structlog.get_logger(__name__)


PERMIT_TIMEOUT = 1.0
"""Seconds to wait for the per-deployment permit before trying again later (upstream)."""
TIMEOUT_RECHECK = 60.0
"""A pending timeout is checked again at the latest after this many seconds (upstream: 1 min)."""

_SKIP_HEALTH_PHASES = (c.PHASE_IN_PLACE_UPDATING, c.PHASE_IN_PLACE_UPDATE_FAILED)


@dataclass(frozen=True)
class HealthOutcome:
    """The machine after the health pass, or the result that ends the pass; ``recheck``: the
    pass goes on, but the machine must be looked at again within that many seconds."""

    machine: Obj
    result: Result | None = None
    recheck: float | None = None


class FailedMarks:
    """Machines this process marked Failed that the cache may not show yet (per deployment key).

    Replaces upstream's "poll the cache, else sleep 10 s holding the permit": the count of
    machines in replacement includes these until the cache has caught up.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marks: dict[str, set[str]] = {}

    def add(self, group: str, name: str) -> None:
        with self._lock:
            self._marks.setdefault(group, set()).add(name)

    def discard(self, group: str, name: str) -> None:
        """Drop a mark whose Failed write did not happen."""
        with self._lock:
            self._marks.get(group, set()).discard(name)

    def pending(self, group: str, cached_phases: Mapping[str, str]) -> set[str]:
        """Marked names whose cached phase is not yet Failed/Terminating (others are dropped)."""
        with self._lock:
            names = self._marks.get(group, set())
            still = {
                n
                for n in names
                if cached_phases.get(n, "") not in (c.PHASE_FAILED, c.PHASE_TERMINATING, None)
            }
            still = {n for n in still if n in cached_phases}
            self._marks[group] = still
            return set(still)


# --- conditions -------------------------------------------------------------------------------


def is_healthy(conditions: list[dict[str, Any]], condition_types: list[str]) -> bool:
    """No conditions → unhealthy; Ready ≠ True or a listed condition ≠ False → unhealthy."""
    if not conditions:
        return False
    for cond in conditions:
        kind, status = cond.get("type"), cond.get("status")
        if kind == c.NODE_READY_CONDITION and status != c.CONDITION_TRUE:
            return False
        if kind in condition_types and status != c.CONDITION_FALSE:
            return False
    return True


def conditions_changed(
    machine_conditions: list[dict[str, Any]], node_conditions: list[dict[str, Any]]
) -> bool:
    """HEAD comparison by type: a type added or removed, a status changed, or an
    ``InPlaceUpdate`` reason changed."""
    old = {cond.get("type"): cond for cond in machine_conditions}
    new = {cond.get("type"): cond for cond in node_conditions}
    if old.keys() != new.keys():
        return True
    for kind, cond in new.items():
        if cond.get("status") != old[kind].get("status"):
            return True
        if kind == c.NODE_IN_PLACE_UPDATE_CONDITION and cond.get("reason") != old[kind].get("reason"):
            return True
    return False


def format_conditions(conditions: list[dict[str, Any]]) -> str:
    """The node conditions in descriptions, exactly as upstream prints them: Go's ``%+v`` of a
    ``[]v1.NodeCondition`` (``[{Type:Ready Status:False LastHeartbeatTime:2024-01-01 10:00:00 +0000
    UTC LastTransitionTime:… Reason:KubeletNotReady Message:…} {Type:…}]``; times as
    :func:`~mcm.runtime.objects.format_go_time` prints them, other fields as they are)."""
    return "[" + " ".join(_go_node_condition(cond) for cond in conditions) + "]"


def _go_node_condition(cond: Mapping[str, Any]) -> str:
    def text(key: str) -> str:
        value = cond.get(key)
        return value if isinstance(value, str) else ""

    return (
        f"{{Type:{text('type')} Status:{text('status')} "
        f"LastHeartbeatTime:{o.format_go_time(cond.get('lastHeartbeatTime'))} "
        f"LastTransitionTime:{o.format_go_time(cond.get('lastTransitionTime'))} "
        f"Reason:{text('reason')} Message:{text('message')}}}"
    )


def _has_critical_taint(node: Mapping[str, Any]) -> bool:
    taints = o.sub(node, "spec").get("taints")
    return isinstance(taints, list) and any(
        isinstance(t, Mapping)
        and t.get("key") == c.TAINT_CRITICAL_COMPONENTS_NOT_READY
        and t.get("effect") == c.TAINT_EFFECT_NO_SCHEDULE
        for t in taints
    )


# --- the pass ---------------------------------------------------------------------------------


def reconcile_machine_health(
    deps: Deps, machine: Obj, marks: FailedMarks, class_dict: Mapping[str, Any] | None = None
) -> HealthOutcome:
    """One health pass over ``machine`` (which has a ``node`` label and a phase)."""
    if phase_of(machine) in _SKIP_HEALTH_PHASES:
        return HealthOutcome(machine)
    node = machine_node(deps, machine)
    if isinstance(node, Result):
        return HealthOutcome(machine, node)
    status = o.clone(o.sub(machine, "status"))
    decide_phase(deps, machine, node, status, class_dict)
    if status == o.sub(machine, "status"):
        return check_timeouts(deps, machine, marks)
    written = write_status_or_retry(deps, machine, status)
    if isinstance(written, Result):
        return HealthOutcome(machine, written)
    _phase_events(deps, machine, status)
    return HealthOutcome(written)


def decide_phase(
    deps: Deps,
    machine: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    status: Obj,
    class_dict: Mapping[str, Any] | None,
) -> None:
    """Change ``status`` (a copy) for the node's conditions (``reconcileMachineHealth``, HEAD taint rule)."""
    phase = phase_of(machine)
    name = o.name_of(machine)
    when = now(deps)
    if node is None:
        if o.conditions(machine) and phase == c.PHASE_RUNNING:
            status["currentStatus"] = current_status(c.PHASE_UNKNOWN, when)
            status["lastOperation"] = last_operation(
                c.DESC_NODE_MISSING.format(machine=name), c.STATE_PROCESSING, c.OPERATION_HEALTH_CHECK, when
            )
        return
    node_conditions = o.conditions(node)
    if conditions_changed(o.conditions(machine), node_conditions):
        status["conditions"] = node_conditions
    conditions = o.conditions({"status": status})
    healthy = is_healthy(conditions, node_condition_types(deps, machine))
    if not healthy and phase == c.PHASE_RUNNING:
        status["currentStatus"] = current_status(c.PHASE_UNKNOWN, when)
        description = c.DESC_UNHEALTHY.format(machine=name, conditions=format_conditions(conditions))
        status["lastOperation"] = last_operation(
            description, c.STATE_PROCESSING, c.OPERATION_HEALTH_CHECK, when
        )
    elif healthy and phase != c.PHASE_RUNNING:
        if phase == c.PHASE_PENDING and _has_critical_taint(node):
            return
        _mark_running(deps, machine, status, class_dict)


def _mark_running(
    deps: Deps, machine: Mapping[str, Any], status: Obj, class_dict: Mapping[str, Any] | None
) -> None:
    name = o.name_of(machine)
    when = now(deps)
    operation = o.sub(machine, "status", "lastOperation")
    if operation.get("type") == c.OPERATION_CREATE and operation.get("state") != c.STATE_SUCCESSFUL:
        joined = elapsed_since(deps, o.meta(machine).get("creationTimestamp")) or 0.0
        description = c.DESC_JOINED_IN.format(machine=name, duration=o.format_go_duration(round(joined, 3)))
        op_type = c.OPERATION_CREATE
        deps.metrics.join_duration.labels(**machine_metric_labels(machine, class_dict)).set(joined)
        if deps.writers.target_secrets is not None:
            failed = delete_bootstrap_token(deps.writers.target_secrets, name)
            if failed is not None:
                log.warning(
                    "bootstrap_token_delete_failed", machine=object_key(machine), error=failed.message
                )
    else:
        description = c.DESC_REJOINED.format(machine=name)
        op_type = c.OPERATION_HEALTH_CHECK
    status["lastOperation"] = last_operation(description, c.STATE_SUCCESSFUL, op_type, when)
    status["currentStatus"] = current_status(c.PHASE_RUNNING, when)


def _phase_events(deps: Deps, machine: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    new_phase = o.text(status, "currentStatus", "phase")
    if new_phase == phase_of(machine):
        return
    message = o.text(status, "lastOperation", "description")
    if new_phase == c.PHASE_UNKNOWN:
        record_warning(deps, machine, "MachineUnknown", message)
    else:
        record_normal(deps, machine, f"Machine{new_phase}", message)


# --- timeouts ---------------------------------------------------------------------------------


def check_timeouts(deps: Deps, machine: Obj, marks: FailedMarks) -> HealthOutcome:
    """Pending past its creation timeout → Failed; Unknown past its health timeout → throttled Failed."""
    phase = phase_of(machine)
    if phase == c.PHASE_PENDING:
        timeout = creation_timeout(deps, machine)
        elapsed = elapsed_since(deps, o.meta(machine).get("creationTimestamp"))
    elif phase == c.PHASE_UNKNOWN and o.sub(machine, "spec").get("disableHealthTimeout") is not True:
        timeout = health_timeout(deps, machine)
        elapsed = elapsed_since(deps, o.text(machine, "status", "currentStatus", "lastUpdateTime"))
    else:
        return HealthOutcome(machine)
    if elapsed is None or elapsed <= timeout:
        remaining = timeout - (elapsed or 0.0)
        return HealthOutcome(machine, recheck=max(0.0, min(TIMEOUT_RECHECK, remaining)) + 0.001)
    if phase == c.PHASE_PENDING:
        return _creation_timed_out(deps, machine, timeout)
    return mark_failed_throttled(deps, machine, marks, timeout)


def _failed_status(machine: Mapping[str, Any], description: str, deps: Deps) -> Obj:
    when = now(deps)
    status = o.clone(o.sub(machine, "status"))
    op_type = o.text(machine, "status", "lastOperation", "type")
    status["lastOperation"] = last_operation(description, c.STATE_FAILED, op_type, when)
    status["currentStatus"] = current_status(c.PHASE_FAILED, when)
    return status


def _creation_timed_out(deps: Deps, machine: Obj, timeout: float) -> HealthOutcome:
    description = c.DESC_CREATION_TIMEOUT.format(
        machine=o.name_of(machine), duration=o.format_go_duration(timeout)
    )
    write = write_status(deps.writers.machines, machine, _failed_status(machine, description, deps))
    if not write.ok:
        return HealthOutcome(machine, Result.after(write.retry(c.SHORT_RETRY)))
    deps.metrics.failed_joins.labels(**machine_metric_labels(machine, None)).inc()
    record_warning(deps, machine, "MachineFailed", description)
    return HealthOutcome(write.obj, Result.after(c.SHORT_RETRY))


def mark_failed_throttled(deps: Deps, machine: Obj, marks: FailedMarks, timeout: float) -> HealthOutcome:
    """Mark Failed when few enough machines of its deployment are being replaced.

    The decision is taken under the deployment's permit and reserved as a mark; the permit is
    given back before the status write (no lock across an API call), and a failed write drops
    the reservation.
    """
    name = o.name_of(machine)
    group = o.label(machine, c.LABEL_DEPLOYMENT_NAME) or ""
    deps.permits.register_permits(group, 1)
    if not deps.permits.try_permit(group, PERMIT_TIMEOUT):
        log.warning("permit_timeout", machine=object_key(machine))
        return HealthOutcome(machine, Result.after(c.SHORT_RETRY))
    try:
        allowed = can_mark_machine_failed(deps, machine, marks, group)
        if allowed:
            marks.add(group, name)
    finally:
        deps.permits.release_permit(group)
    if not allowed:
        message = f'machine "{name}" couldn\'t be marked FAILED, other machines are getting replaced'
        log.info("failed_marking_throttled", machine=object_key(machine), message=message)
        return HealthOutcome(machine, Result.after(c.SHORT_RETRY))
    description = c.DESC_HEALTH_TIMEOUT.format(
        machine=name,
        duration=o.format_go_duration(timeout),
        conditions=format_conditions(o.conditions(machine)),
    )
    write = write_status(deps.writers.machines, machine, _failed_status(machine, description, deps))
    if not write.ok:
        marks.discard(group, name)
        return HealthOutcome(machine, Result.after(write.retry(c.SHORT_RETRY)))
    record_warning(deps, machine, "MachineFailed", description)
    return HealthOutcome(write.obj, Result.after(c.SHORT_RETRY))


def can_mark_machine_failed(deps: Deps, machine: Mapping[str, Any], marks: FailedMarks, group: str) -> bool:
    """Machines of ``group`` in replacement (Terminating twice) < the configured maximum."""
    members = [
        m for m in deps.listers.machines.list() if o.labels_of(m).get(c.LABEL_DEPLOYMENT_NAME) == group
    ]
    phases = {o.name_of(m): phase_of(m) for m in members}
    in_progress = 0
    for member in members:
        phase = phases[o.name_of(member)]
        if phase in (c.PHASE_UNKNOWN, c.PHASE_RUNNING):
            continue
        if phase == c.PHASE_FAILED and o.text(member, "status", "currentStatus", "preserveExpiryTime"):
            continue
        in_progress += 2 if phase == c.PHASE_TERMINATING else 1
    in_progress += len(marks.pending(group, phases) - {o.name_of(machine)})
    return in_progress < deps.options.max_failed_machines_per_deployment

"""The deletion step ``Initiate node drain``: the Node's Terminating condition, cordon, drain.

Upstream: ``drainNode`` in ``pkg/util/provider/machinecontroller/machine_util.go`` (v0.47.0, with
HEAD's changes); the drain itself is :mod:`mcm.drain` (upstream's ``RunDrain``), reached through
``deps.drainer``.

- No target cluster, or no ``node`` label: the drain is skipped (``Initiate VM deletion``).
- A Node whose providerID disagrees with the machine's is not touched (:func:`foreign_node`).
- The drain is *forced* by the ``force-deletion`` label (any Go boolean true), a deletion older
  than the drain timeout, or (HEAD) a ``Ready`` condition not True / ``ReadonlyFilesystem`` not
  False for over 5 minutes: then 1 min, one eviction attempt, every pod deleted, and the flow goes
  on to ``Delete Volume Attachments`` whatever the drain's outcome.
- Otherwise the drain gets the machine's (or the flag's) timeout and evict retries, capped at one
  retry per 20 s of timeout; a failed drain or Terminating-condition write is a Failed step retried
  after ShortRetry.
- The drain's duration is exported per machine deployment (``mcm_machine_drain_duration_seconds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcm.apis.machine import constants as c
from mcm.controller.common import (
    FlowInputs,
    drain_timeout,
    elapsed_since,
    max_evict_retries,
    now,
    phase_of,
    record_warning,
)
from mcm.controller.context import Deps
from mcm.controller.metrics import machine_metric_labels
from mcm.controller.steps import StepOutcome, advance, foreign_node, mismatch, node_name_of
from mcm.drain import DrainOptions
from mcm.runtime import objects as o
from mcm.runtime.client.errors import RequestError, is_not_found
from mcm.runtime.objects import Obj
from mcm.runtime.retry import DEFAULT_RETRY, retry_on_conflict

__all__ = ["drain_machine_node", "drain_options", "update_node_termination_condition"]

NOT_READY_FORCE_AFTER = 5 * 60.0
"""NotReady / ReadonlyFilesystem for longer than this forces the drain (HEAD)."""
FORCED_DRAIN_TIMEOUT = 60.0
"""Drain timeout of a forced drain (upstream: 1 min, one eviction attempt)."""
EVICTION_RETRY_PERIOD = 20.0
"""Upstream caps evict retries at drain timeout / 20 s."""


def drain_machine_node(deps: Deps, machine: Obj, inputs: FlowInputs) -> StepOutcome:
    """Termination condition, cordon and drain the node; forced drains go to the VolumeAttachments step."""
    if not deps.has_target:
        return advance(deps, machine, c.DESC_NO_TARGET_SKIP_DRAIN)
    node = node_name_of(machine)
    if not node:
        return advance(deps, machine, c.DESC_DRAIN_SKIPPED_NO_NODE)
    foreign = foreign_node(deps, machine, node, "not cordoned or drained")
    if foreign is not None:
        return advance(deps, machine, c.DESC_DRAIN_SKIPPED_FOREIGN_NODE.format(**mismatch(machine, foreign)))
    force = _force_drain(deps, machine)
    started = deps.clock.monotonic()
    condition_error = update_node_termination_condition(deps, machine)
    if condition_error is not None and not force:
        description = c.DESC_DRAIN_CONDITION_UPDATE_FAILED.format(err=condition_error)
        return advance(deps, machine, description, state=c.STATE_FAILED, reason="DrainFailed")
    failure = _cordon_and_drain(deps, machine, node, force)
    labels = machine_metric_labels(machine, inputs.class_dict)
    deps.metrics.drain_duration.labels(labels["namespace"], labels["machine_deployment"]).set(
        deps.clock.since(started)
    )
    if failure is None:
        return advance(deps, machine, c.DESC_FORCE_DRAIN_SUCCESSFUL if force else c.DESC_DRAIN_SUCCESSFUL)
    if force:
        record_warning(deps, machine, "DrainFailed", failure)
        return advance(deps, machine, c.DESC_DRAIN_FAILED_FORCED.format(err=failure))
    return advance(
        deps, machine, c.DESC_DRAIN_FAILED.format(err=failure), state=c.STATE_FAILED, reason="DrainFailed"
    )


def _cordon_and_drain(deps: Deps, machine: Obj, node: str, force: bool) -> str | None:
    """The failure text, or ``None`` when the node was cordoned and drained."""
    if deps.drainer is None:
        return "no drainer configured"
    try:
        deps.drainer.cordon(node)
        result = deps.drainer.drain(node, drain_options(deps, machine, force), machine_ref=machine)
    except Exception as err:
        return str(err) or type(err).__name__
    return None if result.ok else result.error or "drain failed"


def drain_options(deps: Deps, machine: Mapping[str, Any], force: bool) -> DrainOptions:
    """The drain of this Machine: its (or the flag's) timeout and evict retries, capped at one
    retry per 20 s of timeout; a forced drain gets 1 min and one attempt (upstream ``drainNode``)."""
    timeout = FORCED_DRAIN_TIMEOUT if force else drain_timeout(deps, machine)
    retries = (
        1 if force else max(1, min(max_evict_retries(deps, machine), int(timeout / EVICTION_RETRY_PERIOD)))
    )
    return DrainOptions(
        timeout=timeout,
        max_evict_retries=retries,
        force=force,
        pv_detach_timeout=deps.options.machine_pv_detach_timeout,
        pv_reattach_timeout=deps.options.machine_pv_reattach_timeout,
    )


def _truthy(value: str | None) -> bool:
    return (value or "").strip() in ("1", "t", "T", "TRUE", "true", "True")


def _force_drain(deps: Deps, machine: Mapping[str, Any]) -> bool:
    """Force label, deletion older than the drain timeout, or NotReady/ReadonlyFilesystem > 5 min."""
    if _truthy(o.label(machine, c.LABEL_FORCE_DELETION)):
        return True
    deleting_for = elapsed_since(deps, o.deletion_timestamp(machine))
    if deleting_for is not None and deleting_for > drain_timeout(deps, machine):
        return True
    for cond in o.conditions(machine):
        kind, status = cond.get("type"), cond.get("status")
        bad = (kind == c.NODE_READY_CONDITION and status != c.CONDITION_TRUE) or (
            kind == c.NODE_READONLY_FILESYSTEM_CONDITION and status != c.CONDITION_FALSE
        )
        since = elapsed_since(deps, cond.get("lastTransitionTime"))
        if bad and since is not None and since > NOT_READY_FORCE_AFTER:
            return True
    return False


def update_node_termination_condition(deps: Deps, machine: Mapping[str, Any]) -> str | None:
    """Set the node's ``Terminating`` condition (live read, conflicts retried as client-go's
    ``retry.DefaultRetry``); the error text or ``None``."""
    nodes = deps.writers.nodes
    node_name = node_name_of(machine)
    if nodes is None or phase_of(machine) in ("", c.PHASE_CRASH_LOOP_BACK_OFF):
        return None

    def write_once() -> None:
        node = nodes.get(node_name)
        nodes.update_status(_with_termination_condition(deps, machine, node))

    try:
        retry_on_conflict(DEFAULT_RETRY, write_once, clock=deps.clock)
    except RequestError as err:
        if not is_not_found(err):
            return f'failed to create update conditions for node "{node_name}": {err.message}'
    return None


def _with_termination_condition(deps: Deps, machine: Mapping[str, Any], node: Mapping[str, Any]) -> Obj:
    when = o.format_time(now(deps))
    existing = next((cd for cd in o.conditions(node) if cd.get("type") == c.NODE_TERMINATION_CONDITION), None)
    if existing is not None and phase_of(machine) == c.PHASE_TERMINATING:
        reason, message = existing.get("reason"), existing.get("message")
    elif phase_of(machine) == c.PHASE_FAILED:
        reason, message = c.NODE_UNHEALTHY_REASON, c.NODE_UNHEALTHY_MESSAGE
    else:
        reason, message = c.NODE_SCALED_DOWN_REASON, c.NODE_SCALED_DOWN_MESSAGE
    unchanged = (
        existing is not None
        and existing.get("status") == c.CONDITION_TRUE
        and existing.get("reason") == reason
    )
    condition = {
        "type": c.NODE_TERMINATION_CONDITION,
        "status": c.CONDITION_TRUE,
        "lastHeartbeatTime": when,
        "lastTransitionTime": existing.get("lastTransitionTime") if unchanged and existing else when,
        "reason": reason,
        "message": message,
    }
    new = o.clone(node)
    others = [cd for cd in o.conditions(node) if cd.get("type") != c.NODE_TERMINATION_CONDITION]
    new.setdefault("status", {})["conditions"] = [*others, condition]
    return new

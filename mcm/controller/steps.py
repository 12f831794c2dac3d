"""What every step of the deletion flow shares: its outcome, the status write of its description,
and the check that the machine's ``node`` label names the machine's own Node.

- :func:`advance` writes the step's lastOperation description (its suffix is the next step's
  marker, upstream's exact strings). A Processing write lets the pass go on with the next step
  (``StepOutcome.result`` is ``None``); a Failed one records a Warning Event and stops the pass
  with the step's retry period; a failed write stops it with the write's retry.
- :func:`foreign_node` answers the cached Node the ``node`` label names when its
  ``spec.providerID`` disagrees with the machine's (and records ``NodeProviderIDMismatch``):
  such a Node is left alone by every step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcm.apis.machine import constants as c
from mcm.controller.common import FlowInputs, now, record_warning
from mcm.controller.context import Deps
from mcm.controller.node import foreign_node_message, provider_ids_disagree
from mcm.controller.status import last_operation, machine_status_update
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_not_found
from mcm.runtime.objects import Obj
from mcm.runtime.worker import Result

__all__ = ["Step", "StepOutcome", "advance", "foreign_node", "marker_of", "mismatch", "node_name_of"]


@dataclass(frozen=True)
class StepOutcome:
    """The machine after a step and, unless the flow goes on at once, the pass's result."""

    machine: Obj
    result: Result | None = None


Step = Callable[[Deps, Obj, FlowInputs], StepOutcome]


def advance(
    deps: Deps,
    machine: Obj,
    description: str,
    *,
    state: str = c.STATE_PROCESSING,
    retry: float = c.SHORT_RETRY,
    reason: str = "DeletionStepFailed",
    op_type: str = c.OPERATION_DELETE,
    last_known_state: str = "",
) -> StepOutcome:
    """Write the step's description; go on (Processing) or stop with ``retry`` (Failed)."""
    when = now(deps)
    old = o.text(machine, "status", "lastOperation", "description")
    operation = last_operation(description, state, op_type, when)
    write = machine_status_update(
        deps.writers.machines,
        machine,
        operation,
        None,
        now=when,
        last_known_state=last_known_state,
        exact=marker_of(old) != marker_of(description),
    )
    if not write.ok:
        return StepOutcome(machine, Result.after(write.retry(c.SHORT_RETRY)))
    if state == c.STATE_FAILED:
        record_warning(deps, machine, reason, description)
        return StepOutcome(write.obj, Result.after(retry))
    return StepOutcome(write.obj)


def marker_of(description: str) -> str:
    for marker in c.DELETION_MARKERS:
        if description.endswith(marker):
            return marker
    return ""


def node_name_of(machine: Mapping[str, Any]) -> str:
    return o.label(machine, c.LABEL_NODE) or ""


def foreign_node(deps: Deps, machine: Mapping[str, Any], node_name: str, left_alone: str) -> Obj | None:
    """The cached Node ``node_name`` if its providerID disagrees with the machine's (Event sent)."""
    nodes = deps.listers.nodes
    if nodes is None or not node_name:
        return None
    try:
        node = dict(nodes.get(node_name))
    except ApiError as err:
        if is_not_found(err):
            return None
        raise
    if not provider_ids_disagree(machine, node):
        return None
    record_warning(deps, machine, "NodeProviderIDMismatch", foreign_node_message(machine, node, left_alone))
    return node


def mismatch(machine: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, str]:
    return {
        "node": o.name_of(node),
        "node_provider_id": o.text(node, "spec", "providerID"),
        "provider_id": o.text(machine, "spec", "providerID"),
    }

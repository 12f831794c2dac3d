"""What a Node says about its update, read from the daemon's annotations and its conditions.

The daemon interface's cases: (a) ``desiredConfig == currentConfig``: up to date; (b) they differ
and ``state == working``: updating; (c) they differ and ``state == degraded``: the daemon cannot
apply the desired config. Guarantees of :func:`node_phase` (one phase per node):

- ``updated``: current == desired == the pool's target, the daemon is not working or degraded,
  and the node is ``NodeReady`` (a node counts as updated only once the kubelet reports it Ready).
- ``degraded``: the daemon reports ``degraded`` (whatever the configs say).
- ``updating``: the node is not done with its desired config (desired != current, or the daemon
  still works) — this includes a node whose desired config is set but whose daemon has not
  started yet, which may go unschedulable at any moment (OpenShift's reading).
- ``not-ready``: done with its desired config but not ``NodeReady``.
- ``outdated``: done, Ready, but its config is not the target (or the node has no annotations).

:func:`is_unavailable` is the other axis: a node is *unavailable* while it is ``updating``,
``degraded`` or ``not-ready``, and also whenever it cannot take workloads — cordoned
(``spec.unschedulable``), ``DiskPressure`` or ``NetworkUnavailable`` not False — as
machine-config-operator's ``LayeredNodeState.CheckNodeReady`` and ``IsUnavailableForUpdate``
(``pkg/controller/common/layered_node_state.go``) count it. A cordoned node that runs the target
is both updated and unavailable. Only available ``outdated`` nodes can be started without taking
one more node down.
"""

from __future__ import annotations

from typing import Final

from mcm.machineconfig import api
from mcm.runtime.client import Object

__all__ = [
    "DEGRADED",
    "NOT_READY",
    "OUTDATED",
    "UNAVAILABLE_PHASES",
    "UPDATED",
    "UPDATING",
    "candidate_order",
    "current_config",
    "desired_config",
    "is_ready",
    "is_unavailable",
    "node_phase",
    "node_state",
    "not_schedulable_reason",
]

UPDATED: Final = "updated"
UPDATING: Final = "updating"
DEGRADED: Final = "degraded"
NOT_READY: Final = "not-ready"
OUTDATED: Final = "outdated"
UNAVAILABLE_PHASES: Final = frozenset({UPDATING, DEGRADED, NOT_READY})


def current_config(node: Object) -> str:
    return str(api.annotations_of(node).get(api.CURRENT_CONFIG_ANNOTATION) or "")


def desired_config(node: Object) -> str:
    return str(api.annotations_of(node).get(api.DESIRED_CONFIG_ANNOTATION) or "")


def node_state(node: Object) -> str:
    return str(api.annotations_of(node).get(api.STATE_ANNOTATION) or "")


def is_ready(node: Object) -> bool:
    """The kubelet reports ``Ready=True`` (a node without conditions is not ready)."""
    conditions = api.status_of(node).get("conditions")
    if not isinstance(conditions, list):
        return False
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    return ready is not None and ready.get("status") == "True"


def _condition_status(node: Object, kind: str) -> str | None:
    conditions = api.status_of(node).get("conditions")
    if not isinstance(conditions, list):
        return None
    found = next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), None)
    return None if found is None else str(found.get("status"))


def not_schedulable_reason(node: Object) -> str:
    """Why the node cannot take workloads ("" when it can): not ``Ready`` (also without a Ready
    condition), ``DiskPressure`` or ``NetworkUnavailable`` reported and not False, or cordoned —
    machine-config-operator's ``LayeredNodeState.CheckNodeReady``, whose messages these are."""
    name = api.name_of(node)
    ready = _condition_status(node, "Ready")
    if ready != "True":
        return f"node {name} is reporting NotReady={ready or 'Unknown'}"
    for kind, label in (("DiskPressure", "OutOfDisk"), ("NetworkUnavailable", "NetworkUnavailable")):
        status = _condition_status(node, kind)
        if status not in (None, "False"):
            return f"node {name} is reporting {label}={status}"
    if api.spec_of(node).get("unschedulable") is True:
        return f"node {name} is reporting Unschedulable"
    return ""


def is_unavailable(node: Object, phase: str) -> bool:
    """Whether the node counts against ``maxUnavailable`` (see the module docstring)."""
    return phase in UNAVAILABLE_PHASES or bool(not_schedulable_reason(node))


def _done(node: Object) -> bool:
    """Done with the desired config: current == desired and the daemon is not working on it."""
    return current_config(node) == desired_config(node) and node_state(node) != api.STATE_WORKING


def node_phase(node: Object, target: str) -> str:
    """The node's phase towards ``target`` (see the module docstring)."""
    if node_state(node) == api.STATE_DEGRADED:
        return DEGRADED
    if not _done(node):
        return UPDATING
    if not is_ready(node):
        return NOT_READY
    if target and current_config(node) == target:
        return UPDATED
    return OUTDATED


def candidate_order(node: Object) -> tuple[int, str, str, str]:
    """Sort key for picking nodes: by zone label (nodes without one last), then oldest first, then
    by name — OpenShift's ``sortNodeList`` made total so the order is stable."""
    labels = api.labels_of(node)
    zone = labels.get(api.ZONE_LABEL)
    created = str(api.meta(node).get("creationTimestamp") or "")
    return (0 if zone is not None else 1, str(zone or ""), created, api.name_of(node))

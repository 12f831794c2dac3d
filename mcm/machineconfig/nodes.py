"""What a Node says about its update, read from the seed's annotations and its Ready condition.

Seed 004's cases: (a) ``desiredConfig == currentConfig``: up to date; (b) they differ and
``state == working``: updating; (c) they differ and ``state == degraded``: the daemon cannot
apply the desired config. Guarantees of :func:`node_phase` (one phase per node):

- ``updated``: current == desired == the pool's target, the daemon is not working or degraded,
  and the node is ``NodeReady`` (the seed: "marked updated only when NodeReady is reported").
- ``degraded``: the daemon reports ``degraded`` (whatever the configs say).
- ``updating``: the node is not done with its desired config (desired != current, or the daemon
  still works) — this includes a node whose desired config is set but whose daemon has not
  started yet, which may go unschedulable at any moment (OpenShift's reading).
- ``not-ready``: done with its desired config but not ``NodeReady``.
- ``outdated``: done, Ready, but its config is not the target (or the node has no annotations).

A node is *unavailable* in the phases ``degraded``, ``updating`` and ``not-ready`` (the issue's
rule: updating, degraded, or not Ready); only ``outdated`` nodes can be started without taking
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
    "node_phase",
    "node_state",
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

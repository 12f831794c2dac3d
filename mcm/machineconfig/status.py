"""A MachinePool's status: machine counts and conditions, computed from its nodes.

The JSON names are the original design's: ``machineCount``, ``updatingMachines`` (its name for the
*updated* count), ``readyMachines``, ``unavailableMachines``, ``currentMachineConfig`` (the
target: the rendered config the nodes are brought to), ``observedGeneration``, ``conditions``;
and machine-config-operator's ``degradedMachineCount`` and ``configuration.name`` (the rendered
config every node of the pool last completed, set when ``Updated`` becomes True: what the nodes
run while they head to a new target). Conditions (OpenShift's ``calculateStatus``,
``pkg/controller/node/status.go``):

- ``Updated``: True when every node is updated to ``currentMachineConfig`` and none is
  unavailable (never while the ``machineSelector`` is invalid: the pool's nodes are then unknown).
- ``Updating``: True while nodes still have to update; False when all are updated, when the pool
  is paused (reason ``Paused``: "Pool is paused; will not update to …" while nodes are behind,
  :data:`PAUSED_MESSAGE` otherwise), or when its spec stops the rollout.
- ``NodeDegraded``: True when a node's daemon reports ``degraded`` (message: each node's reason).
- ``RenderDegraded``: set by the RenderController.
- ``NodesInMultiplePools``: True while nodes the pool selects belong to no pool because several
  pools select them (message: each node and the pools; the pools' updates go on without them).
- ``Degraded``: True when the spec cannot be acted on (bad ``machineSelector`` or
  ``maxUnavailable``), or ``RenderDegraded``, ``NodeDegraded`` or ``NodesInMultiplePools`` is
  True; its reason and message are the first of these.

``readyMachines`` counts every node reporting ``NodeReady`` (the design's definition; OpenShift
counts only updated ready nodes, which ``updatingMachines`` already does).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcm.machineconfig import api
from mcm.machineconfig.conditions import condition, set_condition
from mcm.machineconfig.nodes import DEGRADED, UPDATED, UPDATING, is_ready, is_unavailable, node_phase
from mcm.machineconfig.pools import PoolSpecError
from mcm.runtime.client import Object
from mcm.runtime.clock import Clock
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventRecorder

__all__ = [
    "PAUSED_MESSAGE",
    "PoolCounts",
    "announce_status_change",
    "count_nodes",
    "pool_status",
    "with_degraded",
]

PAUSED_MESSAGE = "Pool is paused; changed MachineConfigs are not rendered until it is unpaused"


@dataclass(frozen=True)
class PoolCounts:
    """The pool's nodes counted by phase towards its target."""

    total: int = 0
    updated: int = 0
    ready: int = 0
    unavailable: int = 0
    updating: int = 0
    degraded: int = 0
    degraded_reasons: tuple[str, ...] = field(default=())
    contested: tuple[str, ...] = field(default=())
    """Why each node the pool selects belongs to no pool (several pools select it)."""

    @property
    def all_updated(self) -> bool:
        """Every node runs the target, is Ready, and none is unavailable (machine-config-operator's
        ``allUpdated`` in ``calculateStatus``, ``pkg/controller/node/status.go``)."""
        return self.updated == self.total and self.unavailable == 0

    def as_metrics(self) -> dict[str, int]:
        return {
            "total": self.total,
            "updated": self.updated,
            "ready": self.ready,
            "unavailable": self.unavailable,
            "updating": self.updating,
            "degraded": self.degraded,
        }


def count_nodes(
    nodes: Sequence[Object],
    target: str,
    known: Mapping[str, str] | None = None,
    contested: Sequence[str] = (),
) -> PoolCounts:
    """The pool's counts; ``known`` maps node names to phases already computed, ``contested`` says
    why nodes the pool selects belong to no pool."""
    phases = [(known or {}).get(api.name_of(node)) or node_phase(node, target) for node in nodes]
    reasons = tuple(
        f"Node {api.name_of(n)} is reporting: {api.annotations_of(n).get(api.REASON_ANNOTATION, '')!r}"
        for n, phase in zip(nodes, phases, strict=True)
        if phase == DEGRADED
    )
    return PoolCounts(
        total=len(nodes),
        updated=phases.count(UPDATED),
        ready=sum(1 for n in nodes if is_ready(n)),
        unavailable=sum(1 for n, p in zip(nodes, phases, strict=True) if is_unavailable(n, p)),
        updating=phases.count(UPDATING),
        degraded=phases.count(DEGRADED),
        degraded_reasons=reasons,
        contested=tuple(contested),
    )


def _updating(
    pool: Object, target: str, counts: PoolCounts, problem: PoolSpecError | None
) -> tuple[bool, str, str]:
    line = f"MachineConfig {target}"
    paused = api.spec_of(pool).get("paused") is True
    if problem is not None:
        return False, problem.reason, str(problem)
    if paused and (counts.all_updated or not target):
        return False, api.Reason.PAUSED, PAUSED_MESSAGE
    if not target:
        return False, "NoRenderedConfig", "waiting for the RenderController to render a configuration"
    if counts.all_updated:
        return False, "", ""
    if paused:
        return False, api.Reason.PAUSED, f"Pool is paused; will not update to {line}"
    return True, "", f"All nodes are updating to {line}"


def with_degraded(conditions: Any, problem: PoolSpecError | None, clock: Clock) -> list[dict[str, Any]]:
    """``conditions`` with ``Degraded`` derived from the spec problem and the other conditions."""
    status, reason, message = False, "", ""
    if problem is not None:
        status, reason, message = True, problem.reason, str(problem)
    else:
        for kind in (api.POOL_RENDER_DEGRADED, api.POOL_NODE_DEGRADED, api.POOL_NODES_CONFLICT):
            found = condition(conditions, kind)
            if found is not None and found.get("status") == "True":
                status, reason, message = (
                    True,
                    str(found.get("reason") or ""),
                    str(found.get("message") or ""),
                )
                break
    return set_condition(
        conditions, api.POOL_DEGRADED, status=status, reason=reason, message=message, clock=clock
    )


def _node_conditions(conditions: Any, counts: PoolCounts, clock: Clock) -> list[dict[str, Any]]:
    """``NodeDegraded`` (each degraded node's reason) and ``NodesInMultiplePools``."""
    degraded = counts.degraded > 0
    reasons = ", ".join(counts.degraded_reasons)
    message = f"{counts.degraded} nodes are reporting degraded status on sync: {reasons}"
    conditions = set_condition(
        conditions,
        api.POOL_NODE_DEGRADED,
        status=degraded,
        reason=api.Reason.NODE_DEGRADED if degraded else "",
        message=message if degraded else "",
        clock=clock,
    )
    conflict = bool(counts.contested)
    return set_condition(
        conditions,
        api.POOL_NODES_CONFLICT,
        status=conflict,
        reason=api.Reason.NODE_IN_MULTIPLE_POOLS if conflict else "",
        message="; ".join(counts.contested),
        clock=clock,
    )


def pool_status(
    pool: Object, counts: PoolCounts, target: str, problem: PoolSpecError | None, clock: Clock
) -> dict[str, Any]:
    """The pool's new status: its old one with counts and the UpdateController's conditions."""
    status = copy.deepcopy(api.status_of(pool))
    status.update(
        {
            "observedGeneration": api.meta(pool).get("generation") or 0,
            "currentMachineConfig": target,
            "machineCount": counts.total,
            "updatingMachines": counts.updated,
            "readyMachines": counts.ready,
            "unavailableMachines": counts.unavailable,
            "degradedMachineCount": counts.degraded,
        }
    )
    nodes_unknown = problem is not None and problem.reason in (
        api.Reason.SELECTING_ALL,
        api.Reason.INVALID_SELECTOR,
    )
    done = bool(target) and counts.all_updated and not nodes_unknown
    if done:
        status["configuration"] = {"name": target}
    conditions = set_condition(
        status.get("conditions"),
        api.POOL_UPDATED,
        status=done,
        message=f"All nodes are updated with MachineConfig {target}" if done else "",
        clock=clock,
    )
    updating, reason, message = _updating(pool, target, counts, problem)
    conditions = set_condition(
        conditions, api.POOL_UPDATING, status=updating, reason=reason, message=message, clock=clock
    )
    conditions = _node_conditions(conditions, counts, clock)
    status["conditions"] = with_degraded(conditions, problem, clock)
    return status


def announce_status_change(
    recorder: EventRecorder,
    pool: Object,
    old: dict[str, Any],
    new: dict[str, Any],
    problem: PoolSpecError | None,
) -> None:
    """Pool Events for what a status write changed: ``Completed`` when the pool reaches its
    config, ``Paused`` and spec problems (Warning) when ``Updating`` starts saying so."""
    target = new.get("currentMachineConfig")
    updated = (condition(new.get("conditions"), api.POOL_UPDATED) or {}).get("status") == "True"
    was_updated = (condition(old.get("conditions"), api.POOL_UPDATED) or {}).get("status") == "True"
    if updated and (not was_updated or old.get("currentMachineConfig") != target):
        message = f"Pool {api.name_of(pool)} has completed update to MachineConfig {target}"
        recorder.event(pool, EVENT_TYPE_NORMAL, api.Reason.COMPLETED, message)
    before = condition(old.get("conditions"), api.POOL_UPDATING) or {}
    after = condition(new.get("conditions"), api.POOL_UPDATING) or {}
    if (before.get("reason"), before.get("message")) == (after.get("reason"), after.get("message")):
        return
    if problem is not None and after.get("reason") == problem.reason:
        recorder.event(pool, EVENT_TYPE_WARNING, problem.reason, str(problem))
    elif after.get("reason") == api.Reason.PAUSED:
        recorder.event(pool, EVENT_TYPE_NORMAL, api.Reason.PAUSED, str(after.get("message")))

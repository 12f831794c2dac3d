"""Scaling a MachineDeployment's MachineSets (upstream ``pkg/controller/deployment_sync.go``
``scale``, ``scaleMachineSet``, ``isScalingEvent``, ``cleanupMachineDeployment`` and
``deployment_util.go`` ``GetProportion``, ``FindActiveOrLatest``; HEAD's fixes of v0.47.0).

- A *scaling event* is a change of ``spec.replicas``: an active set (``spec.replicas > 0``)
  whose ``desired-replicas`` annotation differs, or — HEAD, #956 — no active set at all while the
  deployment wants machines (scale from zero).
- :func:`scale`: with at most one active set, that one (or the newest) takes all replicas; its
  desired/max annotations are refreshed even when its size is right (HEAD, #815: a stale
  annotation blocked roll-outs). When the new set is saturated, the old active sets go to 0.
  Otherwise, for RollingUpdate, the active sets share ``replicas + maxSurge``: growth goes to the
  new set alone (HEAD, #765/#803; v0.47.0 grew old sets too), shrinking is spread over the sets
  in proportion to their size (largest first, older first on ties), the rounding leftover taken
  by the first. A missing or zero ``max-replicas`` annotation no longer divides by zero.
- :func:`scale_machine_set` updates ``spec.replicas`` and the desired/max annotations in one
  Update when either changes, with a ``ScalingMachineSet`` Event when the size changed.
- :func:`cleanup` deletes the oldest old sets beyond ``revisionHistoryLimit`` that have no
  machines, no replicas and an observed generation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from mcm.manager import constants as k
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.newset import by_creation
from mcm.manager.revisions import set_replicas_annotations
from mcm.manager.surge import is_rolling_update, is_saturated, max_surge, spec_replicas, status_int
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_not_found

__all__ = [
    "active_sets",
    "cleanup",
    "find_active_or_latest",
    "is_scaling_event",
    "proportion",
    "scale",
    "scale_and_record",
    "scale_machine_set",
]

log = structlog.get_logger(__name__)

Sets = Sequence[Mapping[str, Any] | None]


def active_sets(machine_sets: Sets) -> list[Mapping[str, Any]]:
    return [ms for ms in machine_sets if ms is not None and replicas_of(ms) > 0]


def _int_annotation(machine_set: Mapping[str, Any], key: str) -> int | None:
    value = o.annotation(machine_set, key)
    if value is None or not value.lstrip("+-").isdigit():
        return None
    return int(value)


def is_scaling_event(deployment: Mapping[str, Any], new_set: Mapping[str, Any] | None, old: Sets) -> bool:
    if new_set is None:
        return False
    active = active_sets([*old, new_set])
    if not active and replicas_of(deployment) > 0:
        return True
    replicas = replicas_of(deployment)
    return any(
        (desired := _int_annotation(ms, k.ANNOTATION_DESIRED_REPLICAS)) is not None and desired != replicas
        for ms in active
    )


def find_active_or_latest(new_set: Mapping[str, Any] | None, old: Sets) -> Mapping[str, Any] | None:
    old_sets = sorted((ms for ms in old if ms is not None), key=by_creation, reverse=True)
    if new_set is None and not old_sets:
        return None
    active = active_sets([*old_sets, new_set])
    if not active:
        return new_set if new_set is not None else old_sets[0]
    return active[0] if len(active) == 1 else None


def scale_machine_set(
    p: DeploymentPass, machine_set: Mapping[str, Any], size: int, operation: str
) -> tuple[bool, Mapping[str, Any]]:
    """``(scaled, stored set)``: Update size and desired/max annotations when either changes."""
    d = p.deployment
    updated = o.clone(machine_set)
    size_changes = replicas_of(machine_set) != size
    annotations_change = set_replicas_annotations(updated, replicas_of(d), replicas_of(d) + max_surge(d))
    if not size_changes and not annotations_change:
        return False, machine_set
    updated.setdefault("spec", {})["replicas"] = size
    stored = p.write_set(updated)
    if size_changes:
        log.info(
            "machine_set_scaled",
            machine_deployment=p.name,
            machine_set=o.name_of(stored),
            operation=operation,
            replicas=size,
        )
        p.event(
            k.EVENT_NORMAL,
            k.EVENT_SCALING_MACHINE_SET,
            k.MSG_SCALED.format(operation=operation, name=o.name_of(stored), replicas=size),
        )
    return size_changes, stored


def scale_and_record(
    p: DeploymentPass, machine_set: Mapping[str, Any], size: int
) -> tuple[bool, Mapping[str, Any]]:
    """Scale when the size differs (``up`` or ``down``)."""
    current = replicas_of(machine_set)
    if current == size:
        return False, machine_set
    return scale_machine_set(p, machine_set, size, "up" if current < size else "down")


def proportion(
    machine_set: Mapping[str, Any], deployment: Mapping[str, Any], to_add: int, added: int, total: int
) -> int:
    """How many replicas ``machine_set`` gains (or loses) of ``to_add`` (``added`` so far);
    ``total`` is the active sets' replicas, the last resort for the old deployment size."""
    spec = replicas_of(machine_set)
    if spec == 0 or to_add in (0, added):
        return 0
    replicas = replicas_of(deployment)
    if replicas == 0:
        fraction = -spec
    else:
        old_size = (
            _int_annotation(machine_set, k.ANNOTATION_MAX_REPLICAS)
            or status_int(deployment, "replicas")
            or total
        )
        target = spec * (replicas + max_surge(deployment)) / old_size if old_size > 0 else spec
        fraction = int(math.floor(target + 0.5) if target >= 0 else math.ceil(target - 0.5)) - spec
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _sizes(
    p: DeploymentPass, new_set: Mapping[str, Any] | None, active: list[Mapping[str, Any]], to_add: int
) -> dict[str, int]:
    """New size per set name (``active`` is reordered largest first for a shrink)."""
    sizes = {o.name_of(ms): replicas_of(ms) for ms in active}
    if to_add >= 0:
        if new_set is not None and o.name_of(new_set) in sizes:
            sizes[o.name_of(new_set)] += to_add
        return sizes
    active.sort(key=lambda ms: (-replicas_of(ms), *by_creation(ms)))
    total, added = spec_replicas(active), 0
    for ms in active:
        share = proportion(ms, p.deployment, to_add, added, total)
        sizes[o.name_of(ms)] += share
        added += share
    first = o.name_of(active[0])
    sizes[first] = max(sizes[first] + to_add - added, 0)
    return sizes


def scale(p: DeploymentPass, new_set: Mapping[str, Any] | None, old: Sets) -> None:
    """Bring the sets to the deployment's ``spec.replicas`` (see the module docstring)."""
    d = p.deployment
    chosen = find_active_or_latest(new_set, old)
    if chosen is not None:
        operation = "no-op" if replicas_of(chosen) == replicas_of(d) else None
        if operation is None:
            scale_and_record(p, chosen, replicas_of(d))
        else:
            scale_machine_set(p, chosen, replicas_of(d), operation)
        return
    if is_saturated(d, new_set):
        for machine_set in active_sets(old):
            scale_and_record(p, machine_set, 0)
        return
    if not is_rolling_update(d):
        return
    active = active_sets([*old, new_set])
    allowed = replicas_of(d) + max_surge(d) if replicas_of(d) > 0 else 0
    to_add = allowed - spec_replicas(active)
    sizes = _sizes(p, new_set, active, to_add)
    operation = "up" if to_add >= 0 else "down"
    for machine_set in active:
        scale_machine_set(p, machine_set, sizes[o.name_of(machine_set)], operation)


def cleanup(p: DeploymentPass, old: Sets) -> None:
    """Delete old sets beyond ``revisionHistoryLimit`` (see the module docstring)."""
    limit = o.sub(p.deployment, "spec").get("revisionHistoryLimit")
    if not isinstance(limit, int) or isinstance(limit, bool):
        return
    alive = sorted((ms for ms in old if ms is not None and not o.deletion_timestamp(ms)), key=by_creation)
    for machine_set in alive[: max(len(alive) - limit, 0)]:
        if (
            status_int(machine_set, "replicas") != 0
            or replicas_of(machine_set) != 0
            or (o.meta(machine_set).get("generation") or 0) > status_int(machine_set, "observedGeneration")
        ):
            continue
        try:
            p.deps.clients.machine_sets.delete(o.name_of(machine_set), namespace=p.namespace)
        except ApiError as err:
            if not is_not_found(err):
                raise
        log.info("old_machine_set_deleted", machine_deployment=p.name, machine_set=o.name_of(machine_set))

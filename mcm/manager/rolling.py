"""The RollingUpdate strategy (upstream v0.47.0 ``pkg/controller/deployment_rolling.go``
``rolloutRolling``, ``reconcileNewMachineSet``, ``reconcileOldMachineSets``,
``cleanupUnhealthyReplicas``, ``scaleDownOldMachineSetsForRollingUpdate``).

One pass, each step returning after it scaled something:

1. Find or create the new set; taint the old sets' nodes PreferNoSchedule; while old sets still
   have machines, put the cluster-autoscaler annotations on every node of the deployment.
2. Grow (or shrink) the new set towards ``replicas``, within ``replicas + maxSurge`` machines
   (:func:`~mcm.manager.surge.new_set_replicas`).
3. Shrink old sets while at least ``replicas - maxUnavailable`` machines stay available: first
   the old sets' unavailable machines (oldest set first), then available ones. The scale-down is
   bounded by ``Σ spec.replicas - minAvailable - (new set's unavailable)`` in both steps (upstream
   bounds only the first), so a set whose status still counts machines it is deleting cannot
   make the pass delete more. Errors are raised (upstream swallowed them), and an old set with
   more available machines than replicas is skipped (upstream stopped with "invalid request to
   scale down").
4. Once the deployment is complete — judged on the status computed in this pass (upstream used
   the status read at the start, so these lagged a pass) — remove the autoscaler annotations,
   untaint the new set's nodes if it was an old set before (HEAD, #989), and delete old sets
   beyond ``revisionHistoryLimit``.
5. Write the status with its progress conditions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcm.manager import constants as k
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.newset import by_creation, sets_and_sync_revision
from mcm.manager.nodes import (
    annotate_nodes,
    remove_ca_annotations,
    remove_taint,
    scaled_to_zero,
    taint_old_sets,
)
from mcm.manager.progress import calculate_status, is_complete, sync_rollout_status
from mcm.manager.scaling import active_sets, cleanup, scale_and_record
from mcm.manager.surge import available_replicas, max_unavailable, new_set_replicas, spec_replicas, status_int
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o

__all__ = ["reconcile_new_set", "reconcile_old_sets", "rollout_rolling"]


def rollout_rolling(p: DeploymentPass) -> float | None:
    """One RollingUpdate pass; seconds until the progress deadline check (``None``: none)."""
    new_set, old = sets_and_sync_revision(p, create=True)
    assert new_set is not None
    taint_old_sets(p, old)
    old = [ms for ms in p.currents(list(old)) if ms is not None]
    if p.deps.options.autoscaler_scaledown_annotation_during_rollout and old and not scaled_to_zero(old):
        annotate_nodes(p, [*old, new_set])
    if reconcile_new_set(p, [*old, new_set], new_set):
        return sync_rollout_status(p, p.currents([*old, new_set]), p.current(new_set))
    new_set = p.current(new_set)
    assert new_set is not None
    if reconcile_old_sets(p, [*old, new_set], active_sets(old), new_set):
        return sync_rollout_status(p, p.currents([*old, new_set]), new_set)
    _when_complete(p, old, new_set)
    return sync_rollout_status(p, p.currents([*old, new_set]), p.current(new_set))


def _when_complete(p: DeploymentPass, old: Sequence[Mapping[str, Any]], new_set: Mapping[str, Any]) -> None:
    all_sets = p.currents([*old, new_set])
    if not is_complete(p.deployment, calculate_status(p, all_sets, new_set)):
        return
    if p.deps.options.autoscaler_scaledown_annotation_during_rollout:
        remove_ca_annotations(p, all_sets)
    if o.annotation(new_set, k.ANNOTATION_PREFER_NO_SCHEDULE) is not None:
        remove_taint(p, new_set)
    cleanup(p, p.currents(list(old)))


def reconcile_new_set(
    p: DeploymentPass, all_sets: Sequence[Mapping[str, Any]], new_set: Mapping[str, Any]
) -> bool:
    """Size the new set; whether it was scaled."""
    replicas, current = replicas_of(p.deployment), replicas_of(new_set)
    if current == replicas:
        return False
    if current > replicas:
        return scale_and_record(p, new_set, replicas)[0]
    return scale_and_record(p, new_set, new_set_replicas(p.deployment, all_sets, new_set))[0]


def reconcile_old_sets(
    p: DeploymentPass,
    all_sets: Sequence[Mapping[str, Any]],
    old_active: list[Mapping[str, Any]],
    new_set: Mapping[str, Any],
) -> bool:
    """Shrink old sets within the availability budget; whether any was scaled."""
    if spec_replicas(old_active) == 0:
        return False
    min_available = replicas_of(p.deployment) - max_unavailable(p.deployment)
    new_unavailable = replicas_of(new_set) - status_int(new_set, "availableReplicas")
    budget = spec_replicas(all_sets) - min_available - new_unavailable
    if budget <= 0:
        return False
    old_active = sorted(old_active, key=by_creation)
    cleaned = _cleanup_unhealthy(p, old_active, budget)
    old_active = [ms for ms in p.currents(list(old_active)) if ms is not None]
    scaled = _scale_down_available(p, [*old_active, new_set], old_active, budget - cleaned)
    return cleaned + scaled > 0


def _cleanup_unhealthy(p: DeploymentPass, old_active: Sequence[Mapping[str, Any]], budget: int) -> int:
    """Remove old sets' unavailable machines (oldest set first), at most ``budget``."""
    done = 0
    for machine_set in old_active:
        if done >= budget:
            break
        spec, available = replicas_of(machine_set), status_int(machine_set, "availableReplicas")
        if spec == 0 or spec <= available:
            continue
        count = min(budget - done, spec - available)
        scale_and_record(p, machine_set, spec - count)
        done += count
    return done


def _scale_down_available(
    p: DeploymentPass,
    all_sets: Sequence[Mapping[str, Any]],
    old_active: Sequence[Mapping[str, Any]],
    budget: int,
) -> int:
    """Shrink old sets while more than ``minAvailable`` machines are available."""
    min_available = replicas_of(p.deployment) - max_unavailable(p.deployment)
    available = available_replicas(all_sets)
    if available <= min_available or budget <= 0:
        return 0
    target, done = min(available - min_available, budget), 0
    for machine_set in old_active:
        if done >= target:
            break
        spec = replicas_of(machine_set)
        if spec == 0:
            continue
        count = min(spec, target - done)
        scale_and_record(p, machine_set, spec - count)
        done += count
    return done

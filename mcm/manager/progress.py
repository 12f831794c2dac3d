"""A MachineDeployment's status and progress (upstream v0.47.0 ``pkg/controller/deployment_sync.go``
``calculateDeploymentStatus``, ``syncMachineDeploymentStatus``, ``checkPausedConditions`` and
``deployment_progress.go`` ``syncRolloutStatus``, ``requeueStuckMachineDeployment``).

Status fields (upstream's semantics, documented in docs/manager.md): ``replicas`` is the sum of
the sets' ``status.replicas``; ``updatedReplicas`` the new set's ``status.replicas``;
``readyReplicas`` and ``availableReplicas`` sums of the sets' (``Available`` counts machines in
phase Available *or* Running); ``unavailableReplicas`` ``max(Σ spec.replicas - available, 0)``;
``failedMachines`` the sets' lists joined; ``Available`` is True iff ``availableReplicas ≥
replicas - maxUnavailable``.

Progress (only with ``spec.progressDeadlineSeconds``, as at v0.47.0; without it the
``Progressing`` condition is removed): ``NewMachineSetAvailable`` once the deployment is complete,
``MachineSetUpdated`` while counts move forward, ``ProgressDeadlineExceeded`` once no progress
was made for the deadline. A deployment that is neither complete nor timed out is looked at
again when its deadline expires. ``ReplicaFailure`` mirrors the new set's (else any set's).

:func:`sync_rollout_status` returns when to look again (``None``: no particular time).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from mcm.manager import constants as k
from mcm.manager.conditions import (
    MD_CONDITIONS,
    MS_CONDITIONS,
    conditions_of,
    find,
    new_condition,
    remove_condition,
    set_condition,
)
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.surge import (
    actual_replicas,
    available_replicas,
    max_unavailable,
    ready_replicas,
    spec_replicas,
    status_int,
)
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o

__all__ = [
    "calculate_status",
    "check_paused_conditions",
    "is_complete",
    "sync_rollout_status",
    "sync_status",
]

Sets = Sequence[Mapping[str, Any] | None]
_COUNTS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas")


def _failed_machines(machine_sets: Sets) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for machine_set in machine_sets:
        value = o.sub(machine_set, "status").get("failedMachines") if machine_set is not None else None
        if isinstance(value, list):
            found.extend(dict(m) for m in value if isinstance(m, Mapping))
    return found


def calculate_status(p: DeploymentPass, all_sets: Sets, new_set: Mapping[str, Any] | None) -> dict[str, Any]:
    d = p.deployment
    available = available_replicas(all_sets)
    status: dict[str, Any] = {
        "observedGeneration": o.meta(d).get("generation") or 0,
        "replicas": actual_replicas(all_sets),
        "updatedReplicas": status_int(new_set, "replicas"),
        "readyReplicas": ready_replicas(all_sets),
        "availableReplicas": available,
        "unavailableReplicas": max(spec_replicas(all_sets) - available, 0),
    }
    collision_count = o.sub(d, "status").get("collisionCount")
    if collision_count is not None:
        status["collisionCount"] = collision_count
    failed = _failed_machines(all_sets)
    if failed:
        status["failedMachines"] = failed
    conditions = conditions_of(o.sub(d, "status"), MD_CONDITIONS)
    if available >= replicas_of(d) - max_unavailable(d):
        condition = new_condition(
            p.deps.clock,
            k.CONDITION_AVAILABLE,
            k.TRUE,
            k.REASON_MIN_AVAILABLE,
            k.MSG_MIN_AVAILABLE,
            with_update_time=True,
        )
    else:
        condition = new_condition(
            p.deps.clock,
            k.CONDITION_AVAILABLE,
            k.FALSE,
            k.REASON_MIN_UNAVAILABLE,
            k.MSG_MIN_UNAVAILABLE,
            with_update_time=True,
        )
    status[MD_CONDITIONS] = set_condition(conditions, condition)
    return status


def is_complete(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """``MachineDeploymentComplete``: all replicas updated and available, generation observed."""
    replicas = replicas_of(deployment)
    return (
        (status.get("updatedReplicas") or 0) == replicas
        and (status.get("replicas") or 0) == replicas
        and (status.get("availableReplicas") or 0) == replicas
        and (status.get("observedGeneration") or 0) >= (o.meta(deployment).get("generation") or 0)
    )


def _unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return all((old.get(f) or 0) == (new.get(f) or 0) for f in _COUNTS) and all(
        old.get(f) == new.get(f)
        for f in ("observedGeneration", "collisionCount", "failedMachines", MD_CONDITIONS)
    )


def sync_status(p: DeploymentPass, all_sets: Sets, new_set: Mapping[str, Any] | None) -> None:
    """Write the computed status when it differs (``syncMachineDeploymentStatus``)."""
    status = calculate_status(p, all_sets, new_set)
    if not _unchanged(o.sub(p.deployment, "status"), status):
        p.update_status(status)


def _deadline(deployment: Mapping[str, Any]) -> int | None:
    value = o.sub(deployment, "spec").get("progressDeadlineSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _progressing(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    def get(status: Mapping[str, Any], field: str) -> int:
        return int(status.get(field) or 0)

    return (
        get(new, "updatedReplicas") > get(old, "updatedReplicas")
        or get(new, "replicas") - get(new, "updatedReplicas")
        < get(old, "replicas") - get(old, "updatedReplicas")
        or get(new, "readyReplicas") > get(old, "readyReplicas")
        or get(new, "availableReplicas") > get(old, "availableReplicas")
    )


def _last_update(condition: Mapping[str, Any]) -> _dt.datetime | None:
    return o.parse_time(condition.get("lastUpdateTime"))


def _timed_out(p: DeploymentPass, conditions: Sequence[Mapping[str, Any]]) -> bool:
    deadline = _deadline(p.deployment)
    condition = find(conditions, k.CONDITION_PROGRESSING)
    if deadline is None or condition is None or condition.get("reason") == k.REASON_NEW_MS_AVAILABLE:
        return False
    if condition.get("reason") == k.REASON_TIMED_OUT:
        return True
    since = _last_update(condition)
    return since is not None and since + _dt.timedelta(seconds=deadline) < p.deps.clock.now()


def _progress_condition(p: DeploymentPass, new_set: Mapping[str, Any] | None, status: dict[str, Any]) -> None:
    d, old_status = p.deployment, o.sub(p.deployment, "status")
    conditions = conditions_of(status, MD_CONDITIONS)
    current = find(conditions_of(old_status, MD_CONDITIONS), k.CONDITION_PROGRESSING)
    who = (
        (k.MSG_MS_AVAILABLE, k.MSG_MS_PROGRESSING, k.MSG_MS_TIMED_OUT)
        if new_set is not None
        else (k.MSG_MD_AVAILABLE, k.MSG_MD_PROGRESSING, k.MSG_MD_TIMED_OUT)
    )
    name = o.name_of(new_set) if new_set is not None else o.name_of(d)
    clock = p.deps.clock
    if is_complete(d, status):
        condition = new_condition(
            clock,
            k.CONDITION_PROGRESSING,
            k.TRUE,
            k.REASON_NEW_MS_AVAILABLE,
            who[0].format(name=name),
            with_update_time=True,
        )
    elif _progressing(old_status, status):
        condition = new_condition(
            clock,
            k.CONDITION_PROGRESSING,
            k.TRUE,
            k.REASON_MACHINE_SET_UPDATED,
            who[1].format(name=name),
            with_update_time=True,
        )
        if current is not None:
            if current.get("status") == k.TRUE:
                condition["lastTransitionTime"] = current.get("lastTransitionTime")
            conditions = remove_condition(conditions, k.CONDITION_PROGRESSING)
    elif _timed_out(p, conditions):
        condition = new_condition(
            clock,
            k.CONDITION_PROGRESSING,
            k.FALSE,
            k.REASON_TIMED_OUT,
            who[2].format(name=name),
            with_update_time=True,
        )
    else:
        return
    status[MD_CONDITIONS] = set_condition(conditions, condition)


def _replica_failure(all_sets: Sets, new_set: Mapping[str, Any] | None) -> dict[str, Any] | None:
    for candidates in ([new_set], all_sets):
        for machine_set in candidates:
            if machine_set is None:
                continue
            found = find(
                conditions_of(o.sub(machine_set, "status"), MS_CONDITIONS), k.CONDITION_REPLICA_FAILURE
            )
            if found is not None:
                return {**found, "lastUpdateTime": found.get("lastTransitionTime")}
    return None


def sync_rollout_status(p: DeploymentPass, all_sets: Sets, new_set: Mapping[str, Any] | None) -> float | None:
    """Compute and write the status with its progress conditions; seconds until the progress
    deadline runs out for a deployment that is neither complete nor timed out."""
    status = calculate_status(p, all_sets, new_set)
    d = p.deployment
    if _deadline(d) is None:
        status[MD_CONDITIONS] = remove_condition(status[MD_CONDITIONS], k.CONDITION_PROGRESSING)
    current = find(conditions_of(o.sub(d, "status"), MD_CONDITIONS), k.CONDITION_PROGRESSING)
    complete = (
        status["replicas"] == status["updatedReplicas"]
        and current is not None
        and (current.get("reason") == k.REASON_NEW_MS_AVAILABLE)
    )
    if _deadline(d) is not None and not complete:
        _progress_condition(p, new_set, status)
    failure = _replica_failure(all_sets, new_set)
    if failure is not None:
        status[MD_CONDITIONS] = set_condition(status[MD_CONDITIONS], failure)
    else:
        status[MD_CONDITIONS] = remove_condition(status[MD_CONDITIONS], k.CONDITION_REPLICA_FAILURE)
    if not _unchanged(o.sub(d, "status"), status):
        p.update_status(status)
        return None
    return _until_deadline(p, status)


def _until_deadline(p: DeploymentPass, status: Mapping[str, Any]) -> float | None:
    deadline = _deadline(p.deployment)
    current = find(conditions_of(o.sub(p.deployment, "status"), MD_CONDITIONS), k.CONDITION_PROGRESSING)
    if deadline is None or current is None or is_complete(p.deployment, status):
        return None
    if current.get("reason") == k.REASON_TIMED_OUT:
        return None
    since = _last_update(current)
    if since is None:
        return None
    after = (since + _dt.timedelta(seconds=deadline) - p.deps.clock.now()).total_seconds()
    return max(after, 0.0) + 1.0


def check_paused_conditions(p: DeploymentPass) -> None:
    """``Progressing``/``Unknown``/``DeploymentPaused`` or ``DeploymentResumed`` (only with a
    progress deadline, and not after ``ProgressDeadlineExceeded``)."""
    d = p.deployment
    if _deadline(d) is None:
        return
    status = o.clone(o.sub(d, "status"))
    conditions = conditions_of(status, MD_CONDITIONS)
    current = find(conditions, k.CONDITION_PROGRESSING)
    if current is not None and current.get("reason") == k.REASON_TIMED_OUT:
        return
    paused_condition = current is not None and current.get("reason") == k.REASON_PAUSED
    paused = bool(o.sub(d, "spec").get("paused"))
    if paused and not paused_condition:
        reason, message = k.REASON_PAUSED, k.MSG_PAUSED
    elif not paused and paused_condition:
        reason, message = k.REASON_RESUMED, k.MSG_RESUMED
    else:
        return
    condition = new_condition(
        p.deps.clock, k.CONDITION_PROGRESSING, k.UNKNOWN, reason, message, with_update_time=True
    )
    p.update_status({**status, MD_CONDITIONS: set_condition(conditions, condition)})

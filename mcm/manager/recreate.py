"""The Recreate strategy (upstream v0.47.0 ``pkg/controller/deployment_recreate.go``).

One pass: scale every old set to 0 and stop; wait (writing the status) while any old machine
still exists, whatever its phase; then create the new set if needed and size it to
``replicas``; once complete (judged on this pass's status), remove the autoscaler annotations
and delete old sets beyond ``revisionHistoryLimit``. No PreferNoSchedule taint is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.newset import sets_and_sync_revision
from mcm.manager.nodes import annotate_nodes, remove_ca_annotations, scaled_to_zero
from mcm.manager.progress import calculate_status, is_complete, sync_rollout_status
from mcm.manager.scaling import active_sets, cleanup, scale_and_record
from mcm.manager.surge import actual_replicas
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o

__all__ = ["old_machines_exist", "rollout_recreate"]


def old_machines_exist(
    p: DeploymentPass, new_set: Mapping[str, Any] | None, old: Sequence[Mapping[str, Any]]
) -> bool:
    if actual_replicas(old) > 0:
        return True
    new_uid = o.meta(new_set).get("uid") if new_set is not None else None
    return any(machines for uid, machines in p.machine_map.items() if uid != new_uid)


def rollout_recreate(p: DeploymentPass) -> float | None:
    """One Recreate pass; seconds until the progress deadline check (``None``: none)."""
    new_set, old = sets_and_sync_revision(p, create=False)
    if p.deps.options.autoscaler_scaledown_annotation_during_rollout and old and not scaled_to_zero(old):
        annotate_nodes(p, [*old, new_set])
    scaled = False
    for machine_set in active_sets(old):
        scaled = scale_and_record(p, machine_set, 0)[0] or scaled
    old = [ms for ms in p.currents(list(old)) if ms is not None]
    if scaled or old_machines_exist(p, new_set, old):
        return sync_rollout_status(p, [*old, p.current(new_set)], p.current(new_set))
    if new_set is None:
        new_set, old = sets_and_sync_revision(p, create=True)
        assert new_set is not None
    scale_and_record(p, new_set, replicas_of(p.deployment))
    all_sets = p.currents([*old, new_set])
    if is_complete(p.deployment, calculate_status(p, all_sets, p.current(new_set))):
        if p.deps.options.autoscaler_scaledown_annotation_during_rollout:
            remove_ca_annotations(p, all_sets)
        cleanup(p, p.currents(list(old)))
    return sync_rollout_status(p, p.currents([*old, new_set]), p.current(new_set))

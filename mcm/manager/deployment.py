"""The MachineDeployment reconcile (upstream v0.47.0 ``pkg/controller/deployment.go``
``reconcileClusterMachineDeployment``).

One pass for ``namespace/name``:

1. Read the deployment from the cache (newer of informer copy and this manager's last write);
   gone: done. A ``freeze=True`` label is only logged here: the freeze stops creations in the
   MachineSets.
2. Being deleted: when it still has the finalizer, delete every MachineSet it controls (errors
   raised, upstream ignored them), write the status; once none is left, remove the finalizer.
3. Invalid spec (:mod:`mcm.manager.validation`: a nil selector or ``rollingUpdate``, negative
   replicas, a missing class, an unsupported strategy such as ``InPlaceUpdate``, …): a
   ``Progressing``/``False``/``InvalidSpec`` condition and a Warning Event; nothing else happens
   until the spec is fixed, which clears the condition. Other deployments are not affected.
4. Add the finalizer (appended; one attempt, errors raised; upstream retried without limit and
   then carried on with the stale copy, so its first write usually conflicted).
5. An empty selector (``{}``) selects everything: Warning ``SelectingAll``, only
   ``observedGeneration`` is written.
6. Claim MachineSets (:mod:`mcm.manager.claiming`), map their machines.
7. Paused-condition bookkeeping; then, in this order: paused → scale only (and clean up); a
   ``rollbackTo`` → rollback; a scaling event → scale only; else the strategy (RollingUpdate or
   Recreate).
8. Look again in 10 minutes, or when the progress deadline expires if that is sooner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.claiming import Claimer
from mcm.manager.conditions import (
    MD_CONDITIONS,
    conditions_of,
    find,
    new_condition,
    remove_condition,
    set_condition,
)
from mcm.manager.context import Deps
from mcm.manager.deployment_pass import DeploymentPass, PassAborted
from mcm.manager.newset import sets_and_sync_revision
from mcm.manager.owners import matches, selector_of
from mcm.manager.progress import check_paused_conditions, sync_status
from mcm.manager.recreate import rollout_recreate
from mcm.manager.rollback import rollback
from mcm.manager.rolling import rollout_rolling
from mcm.manager.scaling import cleanup, is_scaling_event, scale
from mcm.manager.validation import validate_machine_deployment
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_conflict, is_not_found
from mcm.runtime.errors import TransientError
from mcm.runtime.worker import DONE, Result

__all__ = ["DeletionError", "StrategyError", "reconcile_machine_deployment"]

log = structlog.get_logger(__name__)


class DeletionError(TransientError):
    """Deleting the MachineSets of a deleted deployment failed."""


class StrategyError(TransientError):
    """The strategy is none this manager runs (validation refuses such deployments first)."""


def reconcile_machine_deployment(deps: Deps, key: str) -> Result:
    """One pass for the MachineDeployment ``key`` (see the module docstring)."""
    deployment = deps.machine_deployments.get(key.rpartition("/")[2])
    if deployment is None:
        return DONE
    try:
        return _reconcile(deps, deployment)
    except PassAborted as aborted:
        log.info("machine_deployment_pass_stopped", machine_deployment=key, reason=str(aborted))
        return Result.after(aborted.after)
    except ApiError as err:
        if is_conflict(err):
            log.info("machine_deployment_write_conflict", machine_deployment=key, error=str(err))
            return Result.after(c.CONFLICT_RETRY)
        if is_not_found(err):
            return DONE
        raise


def _reconcile(deps: Deps, deployment: Mapping[str, Any]) -> Result:
    p = DeploymentPass(deps, o.clone(deployment))
    deleting = o.deletion_timestamp(deployment) is not None
    if o.label(deployment, k.LABEL_FREEZE) == k.FREEZE_VALUE and not deleting:
        log.info("machine_deployment_frozen", machine_deployment=p.name)
    if deleting:
        return _reconcile_deletion(p)
    errors = validate_machine_deployment(deployment)
    if errors:
        _mark_invalid(p, errors)
        return DONE
    _clear_invalid(p)
    if c.MCM_FINALIZER not in o.finalizers(p.deployment):
        updated = o.clone(p.deployment)
        updated["metadata"]["finalizers"] = [*o.finalizers(p.deployment), c.MCM_FINALIZER]
        p.update(updated)
    selector = selector_of(p.deployment)
    if selector is None or selector.empty():
        return _selecting_all(p)
    _claim(p)
    after = _dispatch(p)
    return Result.after(min(after, k.RESYNC_PERIOD) if after is not None else k.RESYNC_PERIOD)


def _claim(p: DeploymentPass) -> None:
    deps, uid = p.deps, o.meta(p.deployment).get("uid", "")
    selector = selector_of(p.deployment)
    assert selector is not None  # validated
    candidates = [*deps.machine_sets.controlled_by(uid), *deps.machine_sets.orphans()]

    def fresh() -> Mapping[str, Any] | None:
        try:
            return deps.clients.machine_deployments.get(p.name, namespace=p.namespace)
        except ApiError as err:
            if is_not_found(err):
                return None
            raise

    p.machine_sets = list(
        Claimer(p.deployment, k.KIND_MACHINE_DEPLOYMENT, selector, deps.clients.machine_sets, fresh).claim(
            candidates
        )
    )
    p.machine_map = {
        o.meta(ms).get("uid", ""): [
            m for m in deps.machines.controlled_by(o.meta(ms).get("uid", "")) if matches(selector, m)
        ]
        for ms in p.machine_sets
    }


def _dispatch(p: DeploymentPass) -> float | None:
    check_paused_conditions(p)
    spec = o.sub(p.deployment, "spec")
    if spec.get("paused"):
        return _sync(p)
    if spec.get("rollbackTo") is not None:
        rollback(p)
        return None
    new_set, old = sets_and_sync_revision(p, create=False)
    if is_scaling_event(p.deployment, p.current(new_set), p.currents(list(old))):
        return _sync(p)
    strategy = o.text(p.deployment, "spec", "strategy", "type")
    if strategy == k.STRATEGY_RECREATE:
        return rollout_recreate(p)
    if strategy == k.STRATEGY_ROLLING_UPDATE:
        return rollout_rolling(p)
    raise StrategyError(k.ERR_UNEXPECTED_STRATEGY.format(type=strategy))


def _sync(p: DeploymentPass) -> float | None:
    """Scale only (paused deployments and scaling events), then the plain status."""
    new_set, old = sets_and_sync_revision(p, create=False)
    scale(p, p.current(new_set), p.currents(list(old)))
    spec = o.sub(p.deployment, "spec")
    if spec.get("paused") and spec.get("rollbackTo") is None:
        cleanup(p, p.currents(list(old)))
    sync_status(p, p.currents([*old, new_set]), p.current(new_set))
    return None


def _selecting_all(p: DeploymentPass) -> Result:
    p.event(k.EVENT_WARNING, k.EVENT_SELECTING_ALL, k.MSG_SELECTING_ALL)
    generation = o.meta(p.deployment).get("generation") or 0
    status = o.sub(p.deployment, "status")
    if (status.get("observedGeneration") or 0) < generation:
        p.update_status({**status, "observedGeneration": generation})
    return DONE


def _reconcile_deletion(p: DeploymentPass) -> Result:
    if c.MCM_FINALIZER not in o.finalizers(p.deployment):
        return DONE
    owned = p.deps.machine_sets.controlled_by(o.meta(p.deployment).get("uid", ""))
    if not owned:
        updated = o.clone(p.deployment)
        updated["metadata"]["finalizers"] = [f for f in o.finalizers(p.deployment) if f != c.MCM_FINALIZER]
        p.update(updated)
        return DONE
    errors = []
    for machine_set in owned:
        if o.deletion_timestamp(machine_set):
            continue
        try:
            p.deps.clients.machine_sets.delete(o.name_of(machine_set), namespace=p.namespace)
        except ApiError as err:
            if not is_not_found(err):
                errors.append(f"{o.name_of(machine_set)}: {err}")
    p.machine_sets = list(owned)
    sync_status(p, list(owned), None)
    if errors:
        raise DeletionError("deleting machine sets failed: " + "; ".join(errors))
    return Result.after(k.RESYNC_PERIOD)


def _mark_invalid(p: DeploymentPass, errors: list[str]) -> None:
    message = k.MSG_INVALID_SPEC.format(kind=k.KIND_MACHINE_DEPLOYMENT, errors="; ".join(errors))
    log.error("machine_deployment_invalid", machine_deployment=p.name, errors=errors)
    status = o.sub(p.deployment, "status")
    conditions = conditions_of(status, MD_CONDITIONS)
    current = find(conditions, k.CONDITION_PROGRESSING)
    if (
        current is not None
        and current.get("reason") == k.REASON_INVALID_SPEC
        and current.get("message") == message
    ):
        return
    condition = new_condition(
        p.deps.clock, k.CONDITION_PROGRESSING, k.FALSE, k.REASON_INVALID_SPEC, message, with_update_time=True
    )
    p.update_status({**status, MD_CONDITIONS: set_condition(conditions, condition, refresh=True)})
    p.event(k.EVENT_WARNING, k.EVENT_INVALID_SPEC, message)


def _clear_invalid(p: DeploymentPass) -> None:
    status = o.sub(p.deployment, "status")
    current = find(conditions_of(status, MD_CONDITIONS), k.CONDITION_PROGRESSING)
    if current is not None and current.get("reason") == k.REASON_INVALID_SPEC:
        conditions = remove_condition(conditions_of(status, MD_CONDITIONS), k.CONDITION_PROGRESSING)
        p.update_status({**status, MD_CONDITIONS: conditions})

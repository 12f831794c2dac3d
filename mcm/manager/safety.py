"""The overshoot safety loop (upstream v0.47.0 ``pkg/controller/machine_safety.go``
``reconcileClusterMachineSafetyOvershooting``): a MachineSet with far more machines than it should
have is frozen — it creates no more machines — until the count falls back.

One pass, on the single key ``""`` (at start, after every Machine add, every
``--machine-safety-overshooting-period``):

1. For **every** MachineSet (upstream stopped at the first freeze or unfreeze of a pass): count
   the machines it controls, *by UID* (upstream matched owner references by name), that carry all
   its template labels. The limit is ``2 x spec.replicas + safetyUp``, or, for a set controlled by
   a MachineDeployment (found by its controller reference; upstream took the first deployment
   whose selector matched), ``replicas + maxSurge + safetyUp`` of that deployment (``maxSurge``
   0 for Recreate: upstream crashed at v0.47.0 and, at HEAD, gave up the whole pass). A set at or
   above the limit is frozen; a frozen one at or below ``limit - safetyDown`` is unfrozen.
2. A deployment with a frozen set is frozen (reason ``MachineDeploymentStateSync``), one without
   is unfrozen.
3. A deployment with the annotation ``safety.machine.sapcloud.io/unfreeze`` is unfrozen and its
   sets get the annotation; then every set with it is unfrozen. If the overshoot persists, the
   next pass freezes it again.

Freezing writes the ``Frozen``/``True`` condition (status) and the label ``freeze=True`` on the
set and its deployment (a write that conflicts is tried again on a fresh copy), and records a
``FrozeMachineSet`` Event; unfreezing removes both (and the unfreeze annotation) from the
deployment and then the set, with an ``UnfrozeMachineSet`` Event. The frozen state is also the
``mcm_machine_set_status_condition{condition="Frozen"}`` metric. A frozen set, and every set of
a frozen deployment, creates no machine; deletions go on.

Errors of one set or deployment are logged and the pass goes on with the others; a pass with
errors runs again after :data:`ERROR_RETRY` seconds, any other after the period.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import structlog

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
from mcm.manager.context import Deps
from mcm.manager.owners import controller_of, has_labels, label_map
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_conflict
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.intstr import get_scaled_value_from_int_or_percent
from mcm.runtime.worker import Result

__all__ = ["ERROR_RETRY", "overshoot_limits", "reconcile_overshooting"]

log = structlog.get_logger(__name__)

WRITE_ATTEMPTS = 3
ERROR_RETRY = 5.0
"""Seconds before a pass that had errors runs again (when the period is longer)."""


def _deployment_of(deps: Deps, machine_set: Mapping[str, Any]) -> Mapping[str, Any] | None:
    ref = controller_of(machine_set)
    if ref is None or ref.get("kind") != k.KIND_MACHINE_DEPLOYMENT:
        return None
    deployment = deps.machine_deployments.get(str(ref.get("name", "")))
    return deployment if deployment is not None and o.meta(deployment).get("uid") == ref.get("uid") else None


def overshoot_limits(deps: Deps, machine_set: Mapping[str, Any]) -> tuple[int, int]:
    """``(freeze at or above, unfreeze at or below)`` for a set."""
    options = deps.options
    high = 2 * replicas_of(machine_set) + options.safety_up
    deployment = _deployment_of(deps, machine_set)
    if deployment is not None:
        replicas = replicas_of(deployment)
        surge = 0
        if o.text(deployment, "spec", "strategy", "type") == k.STRATEGY_ROLLING_UPDATE:
            try:
                value = o.sub(deployment, "spec", "strategy", "rollingUpdate").get("maxSurge")
                surge = get_scaled_value_from_int_or_percent(value, replicas, True)
            except ValueError:
                surge = 0
        high = replicas + surge + options.safety_up
    return high, high - options.safety_down


def _machine_count(deps: Deps, machine_set: Mapping[str, Any]) -> int:
    template_labels = label_map(o.sub(machine_set, "spec", "template"))
    machines = deps.machines.controlled_by(o.meta(machine_set).get("uid", ""))
    return sum(1 for m in machines if has_labels(m, template_labels))


def _is_frozen(obj: Mapping[str, Any], conditions_key: str) -> bool:
    return o.label(obj, k.LABEL_FREEZE) == k.FREEZE_VALUE or (
        find(conditions_of(o.sub(obj, "status"), conditions_key), k.CONDITION_FROZEN) is not None
    )


def _apply_freeze(
    client: RESTClient,
    obj: Mapping[str, Any],
    conditions_key: str,
    condition: Mapping[str, Any] | None,
    freeze: bool,
) -> Mapping[str, Any]:
    """Set (``condition``) or remove the Frozen condition, then the label (and, when
    unfreezing, the unfreeze annotation); each write only when something changes."""
    status = o.clone(o.sub(obj, "status"))
    conditions = conditions_of(status, conditions_key)
    wanted = (
        set_condition(conditions, condition)
        if condition
        else remove_condition(conditions, k.CONDITION_FROZEN)
    )
    if wanted != conditions:
        obj = client.update_status(
            {**obj, "status": {**status, conditions_key: wanted}}, namespace=o.namespace_of(obj)
        )
    updated = o.clone(obj)
    meta = updated.setdefault("metadata", {})
    labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
    if freeze:
        labels[k.LABEL_FREEZE] = k.FREEZE_VALUE
    else:
        labels.pop(k.LABEL_FREEZE, None)
        annotations.pop(k.ANNOTATION_UNFREEZE, None)
    if labels != o.labels_of(obj) or annotations != o.annotations_of(obj):
        meta["labels"], meta["annotations"] = labels, annotations
        obj = client.update(updated, namespace=o.namespace_of(obj))
    return obj


def _write(
    client: RESTClient,
    obj: Mapping[str, Any],
    conditions_key: str,
    condition: Mapping[str, Any] | None,
    freeze: bool,
) -> Mapping[str, Any]:
    """:func:`_apply_freeze` on the cached object, then, after a conflict (the controllers write
    these objects all the time), on fresh copies: at most :data:`WRITE_ATTEMPTS` tries."""
    for attempt in range(WRITE_ATTEMPTS):
        try:
            return _apply_freeze(client, obj, conditions_key, condition, freeze)
        except ApiError as err:
            if not is_conflict(err) or attempt == WRITE_ATTEMPTS - 1:
                raise
        obj = client.get(o.name_of(obj), namespace=o.namespace_of(obj))
    raise AssertionError("unreachable")


class _Pass:
    """One overshoot pass: errors are collected, every object is tried."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.errors: list[str] = []

    def attempt(self, what: str, name: str, action: Callable[[], object]) -> None:
        try:
            action()
        except ApiError as err:
            log.error("safety_controller_failed", action=what, object=name, error=str(err))
            self.errors.append(f"{what} {name}: {err}")

    def freeze_deployment(self, deployment: Mapping[str, Any], reason: str, message: str) -> None:
        condition = new_condition(
            self.deps.clock, k.CONDITION_FROZEN, k.TRUE, reason, message, with_update_time=True
        )
        _write(self.deps.clients.machine_deployments, deployment, MD_CONDITIONS, condition, freeze=True)
        log.info("machine_deployment_frozen", machine_deployment=o.name_of(deployment), reason=reason)

    def unfreeze_deployment(self, deployment: Mapping[str, Any], reason: str) -> None:
        _write(self.deps.clients.machine_deployments, deployment, MD_CONDITIONS, None, freeze=False)
        log.info("machine_deployment_unfrozen", machine_deployment=o.name_of(deployment), reason=reason)

    def freeze_set(self, machine_set: Mapping[str, Any], count: int, limit: int) -> None:
        message = k.MSG_OVERSHOOTING.format(name=o.name_of(machine_set), count=count, limit=limit)
        condition = new_condition(
            self.deps.clock,
            k.CONDITION_FROZEN,
            k.TRUE,
            k.REASON_OVERSHOOTING,
            message,
            with_update_time=False,
        )
        _write(self.deps.clients.machine_sets, machine_set, MS_CONDITIONS, condition, freeze=True)
        self.deps.event(
            machine_set,
            k.KIND_MACHINE_SET,
            k.EVENT_NORMAL,
            k.EVENT_FROZE,
            k.MSG_FROZE.format(name=o.name_of(machine_set)),
        )
        log.warning("machine_set_frozen", machine_set=o.name_of(machine_set), machines=count, limit=limit)
        deployment = _deployment_of(self.deps, machine_set)
        if deployment is not None:
            self.freeze_deployment(deployment, k.REASON_OVERSHOOTING, message)

    def unfreeze_set(self, machine_set: Mapping[str, Any], reason: str, *, with_deployment: bool) -> None:
        deployment = _deployment_of(self.deps, machine_set) if with_deployment else None
        if deployment is not None:
            self.unfreeze_deployment(deployment, reason)
        _write(self.deps.clients.machine_sets, machine_set, MS_CONDITIONS, None, freeze=False)
        self.deps.event(
            machine_set,
            k.KIND_MACHINE_SET,
            k.EVENT_NORMAL,
            k.EVENT_UNFROZE,
            k.MSG_UNFROZE.format(name=o.name_of(machine_set)),
        )
        log.info("machine_set_unfrozen", machine_set=o.name_of(machine_set), reason=reason)

    def check_sets(self) -> None:
        for machine_set in self.deps.machine_sets.list():
            count = _machine_count(self.deps, machine_set)
            high, low = overshoot_limits(self.deps, machine_set)
            name = o.name_of(machine_set)
            if o.label(machine_set, k.LABEL_FREEZE) != k.FREEZE_VALUE and count >= high:
                self.attempt("freeze", name, functools.partial(self.freeze_set, machine_set, count, high))
            elif count <= low and _is_frozen(machine_set, MS_CONDITIONS):
                unfreeze = functools.partial(
                    self.unfreeze_set, machine_set, "UnderShootingReplicaCount", with_deployment=True
                )
                self.attempt("unfreeze", name, unfreeze)

    def sync_deployments(self) -> None:
        frozen_owners = {
            str(ref.get("uid"))
            for ms in self.deps.machine_sets.list()
            if _is_frozen(ms, MS_CONDITIONS) and (ref := controller_of(ms)) is not None
        }
        for deployment in self.deps.machine_deployments.list():
            name, frozen = o.name_of(deployment), _is_frozen(deployment, MD_CONDITIONS)
            has_frozen_set = o.meta(deployment).get("uid") in frozen_owners
            label = o.label(deployment, k.LABEL_FREEZE) == k.FREEZE_VALUE
            has_condition = find(
                conditions_of(o.sub(deployment, "status"), MD_CONDITIONS), k.CONDITION_FROZEN
            )
            if has_frozen_set and not (label and has_condition):
                freeze = functools.partial(
                    self.freeze_deployment, deployment, k.REASON_STATE_SYNC, k.MSG_STATE_SYNC
                )
                self.attempt("freeze", name, freeze)
            elif not has_frozen_set and frozen:
                self.attempt(
                    "unfreeze",
                    name,
                    functools.partial(self.unfreeze_deployment, deployment, k.REASON_STATE_SYNC),
                )

    def unfreeze_annotated(self) -> None:
        for deployment in self.deps.machine_deployments.list():
            if o.annotation(deployment, k.ANNOTATION_UNFREEZE) is None:
                continue
            unfreeze = functools.partial(self.unfreeze_deployment, deployment, "UnfreezeAnnotation")
            self.attempt("unfreeze", o.name_of(deployment), unfreeze)
            for machine_set in self.deps.machine_sets.controlled_by(o.meta(deployment).get("uid", "")):
                self.attempt(
                    "annotate",
                    o.name_of(machine_set),
                    functools.partial(self._annotate_unfreeze, machine_set),
                )
        for machine_set in self.deps.machine_sets.list():
            if o.annotation(machine_set, k.ANNOTATION_UNFREEZE) is not None:
                unfreeze_set = functools.partial(
                    self.unfreeze_set, machine_set, "UnfreezeAnnotation", with_deployment=False
                )
                self.attempt("unfreeze", o.name_of(machine_set), unfreeze_set)

    def _annotate_unfreeze(self, machine_set: Mapping[str, Any]) -> None:
        if o.annotation(machine_set, k.ANNOTATION_UNFREEZE) is not None:
            return
        updated = o.clone(machine_set)
        updated.setdefault("metadata", {}).setdefault("annotations", {})[k.ANNOTATION_UNFREEZE] = (
            k.FREEZE_VALUE
        )
        self.deps.clients.machine_sets.update(updated, namespace=o.namespace_of(machine_set))


def reconcile_overshooting(deps: Deps, _key: str = "") -> Result:
    """One overshoot pass (see the module docstring); always looks again after the period."""
    safety = _Pass(deps)
    safety.check_sets()
    safety.sync_deployments()
    safety.unfreeze_annotated()
    period = deps.options.machine_safety_overshooting_period
    if safety.errors:
        log.error("safety_controller_pass_failed", errors=safety.errors)
        return Result.after(min(period, ERROR_RETRY))
    return Result.after(period)

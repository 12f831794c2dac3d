"""The MachineSet reconcile (upstream v0.47.0 ``pkg/controller/machineset.go``
``reconcileClusterMachineSet``).

One pass for ``namespace/name``:

1. Read the set from the cache (the newer of the informer's copy and this manager's last write);
   gone: forget its expectations, done.
2. Being deleted: claim nothing new (only machines it controls count); delete them all while
   the finalizer is there; remove the finalizer once none is left; write the status.
3. Invalid spec (:mod:`mcm.manager.validation`; a nil selector included, which upstream crashed
   on): a ``ReplicaFailure`` condition with reason ``InvalidSpec`` and a Warning Event, nothing
   else; fixed input clears it.
4. Add the finalizer ``machine.sapcloud.io/machine-controller-manager`` (appended: the other
   finalizers keep their order, unlike upstream's sorted rewrite).
5. Claim machines (:mod:`mcm.manager.claiming`), copy ``nodeTemplate``, configuration and
   ``class.kind`` onto them (:mod:`mcm.manager.propagation`).
6. Unless creations or deletions it made are still unseen in the cache
   (:mod:`mcm.manager.expectations`, which upstream never consults), manage the replicas
   (:mod:`mcm.manager.replicas`). A frozen set — label ``freeze=True`` on the set *or on its
   deployment* — creates nothing.
7. Write the status (:mod:`mcm.manager.machineset_status`); look again in 10 minutes. A failed
   creation or deletion is raised after the status write, so the key is retried with back-off.

Conflicts on writes are not errors: the key is retried after a short pause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.claiming import Claimer
from mcm.manager.conditions import (
    MS_CONDITIONS,
    conditions_of,
    find,
    new_condition,
    remove_condition,
    set_condition,
)
from mcm.manager.context import Deps
from mcm.manager.machineset_status import calculate_status, write_status
from mcm.manager.owners import controller_of, selector_of
from mcm.manager.propagation import propagate_template
from mcm.manager.replicas import ReplicaFailure, manage_replicas, terminate_machines
from mcm.manager.validation import validate_machine_set
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_conflict, is_not_found
from mcm.runtime.errors import TransientError
from mcm.runtime.worker import DONE, Result

__all__ = ["ReplicaError", "is_frozen", "reconcile_machine_set"]

log = structlog.get_logger(__name__)


class ReplicaError(TransientError):
    """Creating or deleting machines failed (already in the ``ReplicaFailure`` condition)."""


def reconcile_machine_set(deps: Deps, key: str) -> Result:
    """One pass for the MachineSet ``key`` (see the module docstring)."""
    name = key.rpartition("/")[2]
    machine_set = deps.machine_sets.get(name)
    if machine_set is None:
        deps.expectations.delete(key)
        return DONE
    try:
        return _reconcile(deps, key, machine_set)
    except ApiError as err:
        if is_conflict(err):
            log.info("machine_set_write_conflict", machine_set=key, error=str(err))
            return Result.after(c.CONFLICT_RETRY)
        if is_not_found(err):
            return DONE
        raise


def _reconcile(deps: Deps, key: str, machine_set: Mapping[str, Any]) -> Result:
    if o.deletion_timestamp(machine_set):
        return _reconcile_deletion(deps, machine_set)
    errors = validate_machine_set(machine_set)
    if errors:
        _mark_invalid(deps, machine_set, errors)
        return DONE
    machine_set = _ensure_finalizer(deps, machine_set)
    selector = selector_of(machine_set)
    assert selector is not None  # validated
    uid = o.meta(machine_set).get("uid", "")
    candidates = [*deps.machines.controlled_by(uid), *deps.machines.orphans()]
    claimer = Claimer(
        machine_set, k.KIND_MACHINE_SET, selector, deps.clients.machines, lambda: _fresh(deps, machine_set)
    )
    machines = propagate_template(deps, machine_set, claimer.claim(candidates))
    failure: ReplicaFailure | None = None
    if deps.expectations.satisfied(key):
        failure = manage_replicas(deps, machine_set, machines, frozen=is_frozen(deps, machine_set))
    else:
        log.debug("machine_set_expectations_pending", machine_set=key)
    write_status(deps, machine_set, calculate_status(deps, machine_set, machines, failure))
    if failure is not None:
        raise ReplicaError(failure.message)
    return Result.after(k.RESYNC_PERIOD)


def _fresh(deps: Deps, machine_set: Mapping[str, Any]) -> Mapping[str, Any] | None:
    try:
        return deps.clients.machine_sets.get(o.name_of(machine_set), namespace=o.namespace_of(machine_set))
    except ApiError as err:
        if is_not_found(err):
            return None
        raise


def is_frozen(deps: Deps, machine_set: Mapping[str, Any]) -> bool:
    """The set or the deployment that controls it carries ``freeze=True``."""
    if o.label(machine_set, k.LABEL_FREEZE) == k.FREEZE_VALUE:
        return True
    ref = controller_of(machine_set)
    if ref is None or ref.get("kind") != k.KIND_MACHINE_DEPLOYMENT:
        return False
    deployment = deps.machine_deployments.get(str(ref.get("name", "")))
    return (
        deployment is not None
        and o.meta(deployment).get("uid") == ref.get("uid")
        and o.label(deployment, k.LABEL_FREEZE) == k.FREEZE_VALUE
    )


def _ensure_finalizer(deps: Deps, machine_set: Mapping[str, Any]) -> Mapping[str, Any]:
    if c.MCM_FINALIZER in o.finalizers(machine_set):
        return machine_set
    updated = o.clone(machine_set)
    updated.setdefault("metadata", {})["finalizers"] = [*o.finalizers(machine_set), c.MCM_FINALIZER]
    return deps.clients.machine_sets.update(updated, namespace=o.namespace_of(machine_set))


def _reconcile_deletion(deps: Deps, machine_set: Mapping[str, Any]) -> Result:
    machines = deps.machines.controlled_by(o.meta(machine_set).get("uid", ""))
    failure: ReplicaFailure | None = None
    if not machines:
        if c.MCM_FINALIZER in o.finalizers(machine_set):
            updated = o.clone(machine_set)
            updated["metadata"]["finalizers"] = [f for f in o.finalizers(machine_set) if f != c.MCM_FINALIZER]
            deps.clients.machine_sets.update(updated, namespace=o.namespace_of(machine_set))
        return DONE
    if c.MCM_FINALIZER in o.finalizers(machine_set):
        error = terminate_machines(deps, machine_set, machines)
        failure = None if error is None else ReplicaFailure(k.REASON_FAILED_DELETE, error)
    write_status(deps, machine_set, calculate_status(deps, machine_set, machines, failure))
    if failure is not None:
        raise ReplicaError(failure.message)
    return Result.after(k.RESYNC_PERIOD)


def _mark_invalid(deps: Deps, machine_set: Mapping[str, Any], errors: list[str]) -> None:
    """The ``ReplicaFailure``/``InvalidSpec`` condition and Warning Event (once per message)."""
    message = k.MSG_INVALID_SPEC.format(kind=k.KIND_MACHINE_SET, errors="; ".join(errors))
    log.error("machine_set_invalid", machine_set=o.name_of(machine_set), errors=errors)
    status = o.sub(machine_set, "status")
    conditions = conditions_of(status, MS_CONDITIONS)
    current = find(conditions, k.CONDITION_REPLICA_FAILURE)
    if (
        current is not None
        and current.get("reason") == k.REASON_INVALID_SPEC
        and current.get("message") == message
    ):
        return
    condition = new_condition(
        deps.clock,
        k.CONDITION_REPLICA_FAILURE,
        k.TRUE,
        k.REASON_INVALID_SPEC,
        message,
        with_update_time=False,
    )
    conditions = set_condition(remove_condition(conditions, k.CONDITION_REPLICA_FAILURE), condition)
    deps.clients.machine_sets.update_status(
        {**machine_set, "status": {**status, MS_CONDITIONS: conditions}},
        namespace=o.namespace_of(machine_set),
    )
    deps.event(machine_set, k.KIND_MACHINE_SET, k.EVENT_WARNING, k.EVENT_INVALID_SPEC, message)

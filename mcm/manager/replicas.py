"""A MachineSet's replicas: which machines to create and which to delete (upstream v0.47.0
``pkg/controller/machineset.go`` ``manageReplicas``, ``slowStartBatch``,
``terminateMachines``; ``controller_utils.go`` ``ActiveMachines``, ``GetMachineFromTemplate``).

One pass of :func:`manage_replicas` over the claimed machines:

1. *Active* machines are those not ``Failed``, not ``Terminating`` and not being deleted.
   Every ``Failed`` machine is deleted (and so replaced in the same pass, as upstream v0.47.0
   does).
2. Too few active machines: unless the set or its deployment is frozen, create the missing ones
   (at most :data:`~mcm.manager.constants.BURST_REPLICAS` per pass) in slow-start batches of
   1, 2, 4, … (each batch in parallel); the first batch with a failure stops the rest. A create
   that timed out on the server counts as done (the machine may exist; the cache will tell).
3. Too many: delete the surplus (at most 100 per pass) in :func:`deletion_order`.

Deleting a machine is a DELETE, then (only when the DELETE succeeded, as upstream fixed in
#995) its status set to ``Terminating`` with ``lastOperation`` "Deleting machine from cloud
provider", on the machine read again with a GET, as upstream does (that read often finds the
machine controller's own ``Terminating`` mark already there: then nothing is written); a
conflicting status write is retried once, never without limit. Failed creations and deletions
are returned as a :class:`ReplicaFailure` (upstream ignored failed deletions); the caller puts it
into the ``ReplicaFailure`` condition and retries.

Expectations (:mod:`mcm.manager.expectations`) are recorded before every creation and deletion;
the caller does not run this function while they are unmet.
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.context import Deps
from mcm.manager.owners import controller_ref
from mcm.runtime import objects as o
from mcm.runtime.client.errors import RequestError, is_conflict, is_not_found, is_timeout
from mcm.runtime.workqueue.parallelizer import parallelize_until

__all__ = [
    "PHASE_RANKS",
    "ReplicaFailure",
    "deletion_order",
    "is_active",
    "machine_from_template",
    "manage_replicas",
    "phase_of",
    "slow_start_batch",
    "terminate_machines",
]

log = structlog.get_logger(__name__)

PHASE_RANKS: Mapping[str, int] = {
    c.PHASE_TERMINATING: 0,
    c.PHASE_FAILED: 1,
    c.PHASE_CRASH_LOOP_BACK_OFF: 2,
    c.PHASE_UNKNOWN: 3,
    "": 4,
    c.PHASE_PENDING: 4,
    c.PHASE_AVAILABLE: 5,
    c.PHASE_RUNNING: 6,
}
"""Deletion rank by phase (lower goes first). Upstream ranks every phase missing from its map,
the empty phase of a machine being created included, like ``Terminating``; here the empty
phase ranks like ``Pending`` and any other unlisted phase like ``Unknown``."""
UNLISTED_PHASE_RANK = 3
DEFAULT_PRIORITY = 3
PARALLEL_WRITES = k.BURST_REPLICAS
"""Most API writes one MachineSet pass has in flight at once: a whole slow-start batch, or
every deletion of a pass, as upstream's goroutine per call (at most a burst: 100)."""

_ATOI = re.compile(r"^[+-]?\d+$")
_EPOCH = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)


@dataclass(frozen=True)
class ReplicaFailure:
    """Creations or deletions failed: ``reason`` is ``FailedCreate`` or ``FailedDelete``."""

    reason: str
    message: str


def phase_of(machine: Mapping[str, Any]) -> str:
    return o.text(machine, "status", "currentStatus", "phase")


def is_active(machine: Mapping[str, Any]) -> bool:
    """Not ``Failed``, not ``Terminating`` and not being deleted (upstream looks at the phase
    only, so a machine whose DELETE went through but whose status still says ``Running`` was
    counted, and a second machine deleted in its place)."""
    return phase_of(machine) not in (c.PHASE_FAILED, c.PHASE_TERMINATING) and not o.deletion_timestamp(
        machine
    )


def _priority(machine: Mapping[str, Any]) -> int:
    value = o.annotation(machine, c.ANNOTATION_MACHINE_PRIORITY)
    if not value:
        return DEFAULT_PRIORITY
    if not _ATOI.match(value):
        log.error(
            "machine_priority_invalid",
            message="Machine priority is taken to be the default value (3). Couldn't convert "
            f"machine priority to integer for machine:{o.name_of(machine)}.",
            value=value,
        )
        return DEFAULT_PRIORITY
    return int(value)


def _deletion_key(machine: Mapping[str, Any]) -> tuple[int, int, _dt.datetime]:
    created = o.parse_time(o.meta(machine).get("creationTimestamp")) or _EPOCH
    return _priority(machine), PHASE_RANKS.get(phase_of(machine), UNLISTED_PHASE_RANK), created


def deletion_order(machines: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Machines in the order a scale-down deletes them: lower ``machinepriority`` annotation
    first (default 3), then by phase rank (:data:`PHASE_RANKS`), then older first."""
    return sorted(machines, key=_deletion_key)


def machine_from_template(machine_set: Mapping[str, Any]) -> dict[str, Any]:
    """The Machine a MachineSet creates: the template's labels, annotations, finalizers and
    spec, ``generateName`` ``<set>-``, a controller reference to the set."""
    template = o.sub(machine_set, "spec", "template")
    template_meta = o.sub(template, "metadata")
    metadata: dict[str, Any] = {
        "generateName": f"{o.name_of(machine_set)}-",
        "namespace": o.namespace_of(machine_set),
        "labels": dict(o.labels_of(template)),
        "annotations": dict(o.annotations_of(template)),
        "ownerReferences": [controller_ref(machine_set, k.KIND_MACHINE_SET)],
    }
    if isinstance(template_meta.get("finalizers"), list):
        metadata["finalizers"] = list(template_meta["finalizers"])
    return {
        "apiVersion": k.API_VERSION,
        "kind": "Machine",
        "metadata": metadata,
        "spec": o.clone(o.sub(template, "spec")),
    }


def _run_batch(size: int, create: Callable[[], str | None]) -> list[str]:
    """Call ``create`` ``size`` times in parallel; the errors."""
    errors: list[str] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        error = create()
        if error is not None:
            with lock:
                errors.append(error)

    parallelize_until(None, min(size, PARALLEL_WRITES), size, one)
    return errors


def slow_start_batch(
    count: int, initial_batch_size: int, create: Callable[[], str | None]
) -> tuple[int, str | None]:
    """Call ``create`` ``count`` times in batches of 1, 2, 4, ... (each batch in parallel);
    ``create`` returns an error text or ``None``. Stops after the first batch with a failure;
    returns the successes and that batch's first error."""
    remaining, successes = count, 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        errors = _run_batch(batch, create)
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def _create_one(deps: Deps, machine_set: Mapping[str, Any]) -> str | None:
    machine = machine_from_template(machine_set)
    if not machine["metadata"]["labels"]:
        return k.ERR_NO_LABELS
    try:
        created = deps.clients.machines.create(machine, namespace=o.namespace_of(machine_set))
    except RequestError as err:
        if is_timeout(err):
            return None
        deps.machine_set_event(
            machine_set,
            k.EVENT_WARNING,
            k.EVENT_FAILED_CREATE,
            k.MSG_EVENT_FAILED_CREATE.format(err=err),
        )
        return str(err)
    log.info("machine_created", machine_set=o.name_of(machine_set), machine=o.name_of(created))
    deps.machine_set_event(
        machine_set,
        k.EVENT_NORMAL,
        k.EVENT_SUCCESSFUL_CREATE,
        k.MSG_EVENT_CREATED.format(name=o.name_of(created)),
    )
    return None


def _set_key(machine_set: Mapping[str, Any]) -> str:
    return f"{o.namespace_of(machine_set)}/{o.name_of(machine_set)}"


def _machine_key(machine: Mapping[str, Any]) -> str:
    return f"{o.namespace_of(machine)}/{o.name_of(machine)}"


def create_machines(deps: Deps, machine_set: Mapping[str, Any], count: int) -> ReplicaFailure | None:
    """Create ``count`` machines (slow start); expectations are raised first, and lowered for
    every creation that failed or was never tried."""
    key = _set_key(machine_set)
    deps.expectations.expect_creations(key, count)
    log.info("creating_machines", machine_set=o.name_of(machine_set), count=count)
    successes, error = slow_start_batch(
        count, k.SLOW_START_INITIAL_BATCH_SIZE, lambda: _create_one(deps, machine_set)
    )
    if count - successes > 0:
        deps.expectations.creation_observed(key, count - successes)
    return None if error is None else ReplicaFailure(k.REASON_FAILED_CREATE, error)


def _mark_terminating(deps: Deps, machine: Mapping[str, Any]) -> None:
    """Set the phase ``Terminating`` (two attempts on conflicts; a machine already
    ``Terminating`` is not written)."""
    client, name, namespace = deps.clients.machines, o.name_of(machine), o.namespace_of(machine)
    for _ in range(2):
        try:
            latest = client.get(name, namespace=namespace)
        except RequestError as err:
            if not is_not_found(err):
                log.error("machine_status_read_failed", machine=name, error=str(err))
            return
        if phase_of(latest) == c.PHASE_TERMINATING:
            return
        now = o.format_time(deps.clock.now())
        status = o.clone(o.sub(latest, "status"))
        status["lastOperation"] = {
            "description": k.DESC_DELETING,
            "lastUpdateTime": now,
            "state": c.STATE_PROCESSING,
            "type": c.OPERATION_DELETE,
        }
        status["currentStatus"] = {"phase": c.PHASE_TERMINATING, "lastUpdateTime": now}
        try:
            client.update_status({**latest, "status": status}, namespace=namespace)
            return
        except RequestError as err:
            if not is_conflict(err):
                log.error("machine_status_write_failed", machine=name, error=str(err))
                return
    log.info("machine_status_write_conflicted", machine=name)


def _terminate_one(deps: Deps, machine_set: Mapping[str, Any], machine: Mapping[str, Any]) -> str | None:
    if o.deletion_timestamp(machine):
        return None
    name = o.name_of(machine)
    try:
        deps.clients.machines.delete(name, namespace=o.namespace_of(machine))
    except RequestError as err:
        if not is_not_found(err):
            deps.expectations.deletion_observed(_set_key(machine_set), _machine_key(machine))
            deps.machine_set_event(
                machine_set,
                k.EVENT_WARNING,
                k.EVENT_FAILED_DELETE,
                k.MSG_EVENT_FAILED_DELETE.format(err=err),
            )
            return k.ERR_DELETE.format(err=err)
    deps.machine_set_event(
        machine_set,
        k.EVENT_NORMAL,
        k.EVENT_SUCCESSFUL_DELETE,
        k.MSG_EVENT_DELETED.format(name=name),
    )
    _mark_terminating(deps, machine)
    return None


def terminate_machines(
    deps: Deps, machine_set: Mapping[str, Any], machines: Sequence[Mapping[str, Any]]
) -> str | None:
    """Delete ``machines`` in parallel (those already being deleted are skipped); the first
    error, if any."""
    errors: list[str] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        error = _terminate_one(deps, machine_set, machines[index])
        if error is not None:
            with lock:
                errors.append(error)

    parallelize_until(None, min(len(machines), PARALLEL_WRITES), len(machines), one)
    return errors[0] if errors else None


def _delete_surplus(
    deps: Deps, machine_set: Mapping[str, Any], active: list[Mapping[str, Any]], surplus: int
) -> str | None:
    surplus = min(surplus, k.BURST_REPLICAS)
    doomed = deletion_order(active)[:surplus] if surplus < len(active) else list(active)
    deps.expectations.expect_deletions(_set_key(machine_set), [_machine_key(m) for m in doomed])
    log.info("deleting_surplus_machines", machine_set=o.name_of(machine_set), count=len(doomed))
    return terminate_machines(deps, machine_set, doomed)


def manage_replicas(
    deps: Deps, machine_set: Mapping[str, Any], claimed: Sequence[Mapping[str, Any]], *, frozen: bool
) -> ReplicaFailure | None:
    """One pass over the claimed machines (see the module docstring)."""
    active = [m for m in claimed if is_active(m)]
    failed = [m for m in claimed if phase_of(m) == c.PHASE_FAILED and not o.deletion_timestamp(m)]
    delete_error = terminate_machines(deps, machine_set, failed) if failed else None
    replicas = o.sub(machine_set, "spec").get("replicas") or 0
    diff = len(active) - replicas
    if diff < 0:
        if frozen:
            log.info("machine_set_frozen", machine_set=o.name_of(machine_set), missing=-diff)
        else:
            failure = create_machines(deps, machine_set, min(-diff, k.BURST_REPLICAS))
            if failure is not None:
                return failure
    elif diff > 0:
        delete_error = _delete_surplus(deps, machine_set, active, diff) or delete_error
    return None if delete_error is None else ReplicaFailure(k.REASON_FAILED_DELETE, delete_error)

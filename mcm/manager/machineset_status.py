"""A MachineSet's status (upstream v0.47.0 ``pkg/controller/deployment_machineset_util.go``
``calculateMachineSetStatus``, ``updateMachineSetStatus``).

Counts over the claimed machines, with upstream's semantics (documented in docs/manager.md):

- ``replicas``: every claimed machine, whatever its phase (``Terminating`` and ``Failed`` count);
- ``fullyLabeledReplicas``: machines carrying every template label;
- ``availableReplicas``: machines in phase ``Available`` *or* ``Running``;
- ``readyReplicas``: machines in phase ``Running``;
- ``failedMachines``: a summary of each machine whose ``lastOperation.state`` is ``Failed``; when
  there is none the old list is kept until ``readyReplicas`` equals the old ``replicas``;
- ``machineSetCondition``: ``ReplicaFailure`` (reason ``FailedCreate`` or ``FailedDelete``, the
  error as message) while creations or deletions fail, kept up to date, removed once they work;
- ``lastOperation.lastUpdateTime``: the time of the write.

:func:`write_status` skips the write when the counts, conditions and failed machines are
unchanged and ``observedGeneration`` is current; otherwise it sets ``observedGeneration`` and
writes the status subresource, reading the set again and retrying once after a conflict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.conditions import (
    MS_CONDITIONS,
    conditions_of,
    new_condition,
    remove_condition,
    set_condition,
)
from mcm.manager.context import Deps
from mcm.manager.owners import controller_of, has_labels, label_map
from mcm.manager.replicas import ReplicaFailure, phase_of
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_conflict

__all__ = ["COUNT_FIELDS", "calculate_status", "failed_machine_summary", "write_status"]

COUNT_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def failed_machine_summary(machine: Mapping[str, Any]) -> dict[str, Any]:
    """``MachineSummary`` of a machine whose last operation failed."""
    summary: dict[str, Any] = {"name": o.name_of(machine)}
    provider_id = o.text(machine, "spec", "providerID")
    if provider_id:
        summary["providerID"] = provider_id
    summary["lastOperation"] = dict(o.sub(machine, "status", "lastOperation"))
    ref = controller_of(machine)
    if ref and ref.get("name"):
        summary["ownerRef"] = ref["name"]
    return summary


def _counts(machine_set: Mapping[str, Any], machines: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    template_labels = label_map(o.sub(machine_set, "spec", "template"))
    counts = dict.fromkeys(COUNT_FIELDS, 0)
    counts["replicas"] = len(machines)
    for machine in machines:
        if has_labels(machine, template_labels):
            counts["fullyLabeledReplicas"] += 1
        phase = phase_of(machine)
        if phase in (c.PHASE_AVAILABLE, c.PHASE_RUNNING):
            counts["availableReplicas"] += 1
        if phase == c.PHASE_RUNNING:
            counts["readyReplicas"] += 1
    return counts


def calculate_status(
    deps: Deps,
    machine_set: Mapping[str, Any],
    machines: Sequence[Mapping[str, Any]],
    failure: ReplicaFailure | None,
) -> dict[str, Any]:
    """The new status (see the module docstring); ``observedGeneration`` is set on write."""
    old = o.sub(machine_set, "status")
    status = o.clone(old)
    counts = _counts(machine_set, machines)
    failed = [
        failed_machine_summary(m)
        for m in machines
        if o.text(m, "status", "lastOperation", "state") == c.STATE_FAILED
    ]
    if failed:
        status["failedMachines"] = failed
    elif counts["readyReplicas"] == (old.get("replicas") or 0):
        status.pop("failedMachines", None)
    conditions = conditions_of(old, MS_CONDITIONS)
    if failure is not None:
        condition = new_condition(
            deps.clock,
            k.CONDITION_REPLICA_FAILURE,
            k.TRUE,
            failure.reason,
            failure.message,
            with_update_time=False,
        )
        conditions = set_condition(conditions, condition, refresh=True)
    else:
        conditions = remove_condition(conditions, k.CONDITION_REPLICA_FAILURE)
    if conditions:
        status[MS_CONDITIONS] = conditions
    else:
        status.pop(MS_CONDITIONS, None)
    status.update(counts)
    status.setdefault("lastOperation", {})
    status["lastOperation"] = {
        **dict(status["lastOperation"]),
        "lastUpdateTime": o.format_time(deps.clock.now()),
    }
    return status


def _unchanged(machine_set: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    old = o.sub(machine_set, "status")
    return (
        all((old.get(f) or 0) == (status.get(f) or 0) for f in COUNT_FIELDS)
        and (o.meta(machine_set).get("generation") or 0) == (old.get("observedGeneration") or 0)
        and (old.get(MS_CONDITIONS) or []) == (status.get(MS_CONDITIONS) or [])
        and old.get("failedMachines") == status.get("failedMachines")
    )


def write_status(deps: Deps, machine_set: Mapping[str, Any], status: dict[str, Any]) -> Mapping[str, Any]:
    """Write ``status`` unless nothing changed; the MachineSet as stored afterwards."""
    if _unchanged(machine_set, status):
        return machine_set
    client, current = deps.clients.machine_sets, machine_set
    for attempt in range(2):
        status["observedGeneration"] = o.meta(current).get("generation") or 0
        try:
            return client.update_status({**current, "status": status}, namespace=o.namespace_of(current))
        except ApiError as err:
            if attempt or not is_conflict(err):
                raise
        current = client.get(o.name_of(machine_set), namespace=o.namespace_of(machine_set))
    raise AssertionError("unreachable")

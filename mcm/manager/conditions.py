"""Status conditions of MachineSets (``status.machineSetCondition``) and MachineDeployments
(``status.conditions``), as lists of plain dicts.

Upstream v0.47.0 ``pkg/controller/deployment_machineset_util.go`` (``SetCondition``) and
``deployment_util.go`` (``SetMachineDeploymentCondition``). Guarantees:

- :func:`set_condition` leaves a condition of the same type, status and reason untouched (no
  timestamp refresh) unless ``refresh`` asks for the message to be brought up to date; otherwise
  the old one is removed and the new one appended at the end. When only the reason or message
  changes, the old ``lastTransitionTime`` is kept, for MachineSets too (upstream's MachineSet
  variant dropped it).
- Functions return new lists; the input is never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcm.runtime import objects as o
from mcm.runtime.clock import Clock

__all__ = [
    "MD_CONDITIONS",
    "MS_CONDITIONS",
    "find",
    "new_condition",
    "remove_condition",
    "set_condition",
]

MS_CONDITIONS = "machineSetCondition"
"""The JSON key of a MachineSet's conditions (singular, as upstream)."""
MD_CONDITIONS = "conditions"

Conditions = list[dict[str, Any]]


def conditions_of(status: Mapping[str, Any], key: str) -> Conditions:
    value = status.get(key)
    return [dict(c) for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def find(conditions: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((dict(c) for c in conditions if c.get("type") == kind), None)


def new_condition(
    clock: Clock, kind: str, status: str, reason: str, message: str, *, with_update_time: bool
) -> dict[str, Any]:
    """A condition stamped now; MachineDeployment conditions also carry ``lastUpdateTime``."""
    now = o.format_time(clock.now())
    condition: dict[str, Any] = {"type": kind, "status": status}
    if with_update_time:
        condition["lastUpdateTime"] = now
    condition.update({"lastTransitionTime": now, "reason": reason, "message": message})
    return condition


def set_condition(
    conditions: Sequence[Mapping[str, Any]], condition: Mapping[str, Any], *, refresh: bool = False
) -> Conditions:
    """``conditions`` with ``condition`` set (see the module docstring)."""
    current = find(conditions, str(condition.get("type")))
    same = (
        current is not None
        and current.get("status") == condition.get("status")
        and current.get("reason") == condition.get("reason")
    )
    if same and (not refresh or current.get("message") == condition.get("message")):  # type: ignore[union-attr]
        return [dict(c) for c in conditions]
    new = dict(condition)
    if current is not None and current.get("status") == condition.get("status"):
        new["lastTransitionTime"] = current.get("lastTransitionTime", new.get("lastTransitionTime"))
    return [dict(c) for c in conditions if c.get("type") != condition.get("type")] + [new]


def remove_condition(conditions: Sequence[Mapping[str, Any]], kind: str) -> Conditions:
    return [dict(c) for c in conditions if c.get("type") != kind]

"""Status conditions: set one by type, keep the others, move ``lastTransitionTime`` only when the
status changes (``apihelpers.SetMachineConfigPoolCondition``)."""

from __future__ import annotations

import copy
import datetime as _dt
from typing import Any

from mcm.runtime.clock import Clock

__all__ = ["condition", "condition_true", "set_condition", "timestamp"]

Condition = dict[str, Any]


def timestamp(clock: Clock) -> str:
    """RFC 3339 in whole seconds, UTC (``metav1.Time``)."""
    return clock.now().astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(conditions: Any, kind: str) -> Condition | None:
    """The condition of type ``kind`` in a status' ``conditions``, if any."""
    if not isinstance(conditions, list):
        return None
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), None)


def condition_true(conditions: Any, kind: str) -> bool:
    found = condition(conditions, kind)
    return found is not None and found.get("status") == "True"


def set_condition(
    conditions: Any, kind: str, *, status: bool, reason: str = "", message: str = "", clock: Clock
) -> list[Condition]:
    """A new list with ``kind`` set; equal content returns an equal list (no time change)."""
    result = [copy.deepcopy(c) for c in conditions or [] if isinstance(c, dict)]
    text = "True" if status else "False"
    existing = condition(result, kind)
    if existing is None:
        stamp = timestamp(clock)
        result.append(
            {"type": kind, "status": text, "lastTransitionTime": stamp, "reason": reason, "message": message}
        )
        return result
    if existing.get("status") != text:
        existing["lastTransitionTime"] = timestamp(clock)
    existing.update({"status": text, "reason": reason, "message": message})
    return result

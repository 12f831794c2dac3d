"""PodDisruptionBudget helpers shared by the eviction verb and the disruption controller.

Guarantees: :func:`selects` is upstream's PDB-to-pod match (a nil or empty selector, or an invalid
one, selects nothing); :func:`is_ready` reads the pod's ``Ready`` condition;
:func:`disruption_allowed_condition` keeps ``lastTransitionTime`` unless the status flips.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from mcm.emulator.store import Obj
from mcm.emulator.timefmt import format_time
from mcm.runtime.labels import selector_from_label_selector

__all__ = ["PDBS", "PODS", "disruption_allowed_condition", "is_ready", "selects"]

PODS = "pods"
PDBS = "poddisruptionbudgets.policy"


def is_ready(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's ``Ready`` condition is ``True``."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, Mapping)
    )


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the budget's selector selects the pod."""
    try:
        selector = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
    except ValueError:
        return False
    return not selector.empty() and selector.matches_object(pod)


def disruption_allowed_condition(
    old_status: Mapping[str, Any], allowed: int, generation: int, now: _dt.datetime
) -> Obj:
    """The ``DisruptionAllowed`` condition for ``allowed`` disruptions."""
    status = "True" if allowed > 0 else "False"
    reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
    previous = next(
        (
            c
            for c in old_status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == "DisruptionAllowed"
        ),
        None,
    )
    stamp = format_time(now)
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        stamp = str(previous["lastTransitionTime"])
    return {
        "type": "DisruptionAllowed",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": "",
    }

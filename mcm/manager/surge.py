"""How far a roll-out may go above and below the desired count (upstream v0.47.0
``pkg/controller/deployment_util.go`` ``ResolveFenceposts``, ``MaxSurge``, ``MaxUnavailable``,
``NewISNewReplicas``, ``IsSaturated``).

- ``maxSurge`` resolves against ``spec.replicas`` rounding a percentage *up*,
  ``maxUnavailable`` rounding *down*; when both come out 0, ``maxUnavailable`` is 1.
- Both are 0 unless the strategy is RollingUpdate; ``maxUnavailable`` is 0 for 0 replicas and
  never more than the replicas; a value that does not resolve counts as 0 (validation refuses
  such deployments before they get here).
- :func:`new_set_replicas` sizes the new MachineSet of a RollingUpdate: it may grow until
  ``replicas + maxSurge`` machines exist. Upstream counts the machines that exist by the sets'
  ``status.replicas`` (so terminating machines use up surge, as here), but a set that has not
  yet created the machines of its latest scale-up reports too few, and upstream then grows the
  new set twice in a row, above the surge. Here each set counts as the larger of its
  ``spec.replicas`` and ``status.replicas``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcm.manager import constants as k
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o
from mcm.runtime.intstr import get_scaled_value_from_int_or_percent

__all__ = [
    "actual_replicas",
    "available_replicas",
    "is_rolling_update",
    "is_saturated",
    "max_surge",
    "max_unavailable",
    "min_available",
    "new_set_replicas",
    "ready_replicas",
    "resolve_fenceposts",
    "spec_replicas",
    "status_int",
]


def is_rolling_update(deployment: Mapping[str, Any]) -> bool:
    return o.text(deployment, "spec", "strategy", "type") == k.STRATEGY_ROLLING_UPDATE


def resolve_fenceposts(
    max_surge_value: object, max_unavailable_value: object, desired: int
) -> tuple[int, int]:
    """``(surge, unavailable)``; ``ValueError`` when a value does not resolve."""
    surge = get_scaled_value_from_int_or_percent(max_surge_value, desired, True)
    unavailable = get_scaled_value_from_int_or_percent(max_unavailable_value, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _fenceposts(deployment: Mapping[str, Any]) -> tuple[int, int]:
    rolling = o.sub(deployment, "spec", "strategy", "rollingUpdate")
    try:
        return resolve_fenceposts(
            rolling.get("maxSurge"), rolling.get("maxUnavailable"), replicas_of(deployment)
        )
    except ValueError:
        return 0, 0


def max_surge(deployment: Mapping[str, Any]) -> int:
    return _fenceposts(deployment)[0] if is_rolling_update(deployment) else 0


def max_unavailable(deployment: Mapping[str, Any]) -> int:
    replicas = replicas_of(deployment)
    if not is_rolling_update(deployment) or replicas == 0:
        return 0
    return min(_fenceposts(deployment)[1], replicas)


def min_available(deployment: Mapping[str, Any]) -> int:
    return replicas_of(deployment) - max_unavailable(deployment) if is_rolling_update(deployment) else 0


def status_int(obj: Mapping[str, Any] | None, field: str) -> int:
    value = o.sub(obj, "status").get(field) if obj is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def spec_replicas(machine_sets: Sequence[Mapping[str, Any] | None]) -> int:
    return sum(replicas_of(ms) for ms in machine_sets if ms is not None)


def actual_replicas(machine_sets: Sequence[Mapping[str, Any] | None]) -> int:
    return sum(status_int(ms, "replicas") for ms in machine_sets)


def ready_replicas(machine_sets: Sequence[Mapping[str, Any] | None]) -> int:
    return sum(status_int(ms, "readyReplicas") for ms in machine_sets)


def available_replicas(machine_sets: Sequence[Mapping[str, Any] | None]) -> int:
    return sum(status_int(ms, "availableReplicas") for ms in machine_sets)


def new_set_replicas(
    deployment: Mapping[str, Any], machine_sets: Sequence[Mapping[str, Any]], new_set: Mapping[str, Any]
) -> int:
    """The size of the new MachineSet for this step (see the module docstring)."""
    replicas, new_spec = replicas_of(deployment), replicas_of(new_set)
    if o.text(deployment, "spec", "strategy", "type") == k.STRATEGY_RECREATE:
        return replicas
    surge = get_scaled_value_from_int_or_percent(
        o.sub(deployment, "spec", "strategy", "rollingUpdate").get("maxSurge"), replicas, True
    )
    current = sum(max(replicas_of(ms), status_int(ms, "replicas")) for ms in machine_sets)
    ceiling = replicas + surge
    if current >= ceiling:
        return new_spec
    return new_spec + min(ceiling - current, replicas - new_spec)


def is_saturated(deployment: Mapping[str, Any], machine_set: Mapping[str, Any] | None) -> bool:
    """The set has all the deployment's replicas, desired and available."""
    if machine_set is None:
        return False
    desired = o.annotation(machine_set, k.ANNOTATION_DESIRED_REPLICAS)
    replicas = replicas_of(deployment)
    return (
        desired is not None
        and desired.lstrip("+-").isdigit()
        and int(desired) == replicas
        and replicas_of(machine_set) == replicas
        and status_int(machine_set, "availableReplicas") == replicas
    )

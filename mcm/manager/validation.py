"""Validation of MachineSets and MachineDeployments (upstream v0.47.0
``pkg/apis/machine/validation/machineset.go`` and ``machinedeployment.go``, with HEAD's
strategy checks).

Upstream only logs a failed validation, and dereferences a nil ``spec.selector`` or a nil
``strategy.rollingUpdate`` before it gets there (a crash). Here every problem is a message; the
reconcilers put them into an ``InvalidSpec`` condition and Event. Guarantees: the functions never
raise, whatever the JSON holds, and return an empty list for a valid object.

Messages (field paths relative to the object): ``spec.replicas: Replicas has to be a whole
number``, ``spec.selector: selector is required``, ``spec.selector: <parse error>``,
``spec.selector.matchLabels: is not matching with spec.template.metadata.labels``,
``spec.template.spec.class.kind: Kind is required``, ``spec.template.spec.class.name: Name is
required``; for deployments also ``spec.strategy.type: Type can either be RollingUpdate or
Recreate`` (``InPlaceUpdate`` gets its own message: it is not supported),
``spec.strategy.rollingUpdate: RollingUpdate parameter cannot be nil for rolling update
strategy`` and ``spec.strategy.rollingUpdate.maxSurge: unable to convert maxSurge to int32``
(the same for ``maxUnavailable``; a negative value: ``must be greater than or equal to 0``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcm.manager import constants as k
from mcm.runtime import labels
from mcm.runtime import objects as o
from mcm.runtime.intstr import get_scaled_value_from_int_or_percent

__all__ = ["replicas_of", "validate_machine_deployment", "validate_machine_set"]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def replicas_of(obj: Mapping[str, Any]) -> int:
    """``spec.replicas`` (absent means 0; a non-integer counts as 0 and fails validation)."""
    value = o.sub(obj, "spec").get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _common(obj: Mapping[str, Any]) -> list[str]:
    spec = o.sub(obj, "spec")
    errors: list[str] = []
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0):
        errors.append("spec.replicas: Replicas has to be a whole number")
    errors.extend(_selector_errors(spec))
    machine_class = o.sub(spec, "template", "spec", "class")
    if not o.text(machine_class, "kind"):
        errors.append("spec.template.spec.class.kind: Kind is required")
    if not o.text(machine_class, "name"):
        errors.append("spec.template.spec.class.name: Name is required")
    return errors


def _selector_errors(spec: Mapping[str, Any]) -> list[str]:
    selector = spec.get("selector")
    if not isinstance(selector, Mapping):
        return ["spec.selector: selector is required"]
    try:
        labels.selector_from_label_selector(selector)
    except (ValueError, TypeError, AttributeError) as err:
        return [f"spec.selector: {err}"]
    match_labels = selector.get("matchLabels")
    template_labels = o.labels_of(o.sub(spec, "template"))
    if isinstance(match_labels, Mapping) and any(
        template_labels.get(str(key)) != value for key, value in match_labels.items()
    ):
        return ["spec.selector.matchLabels: is not matching with spec.template.metadata.labels"]
    return []


def validate_machine_set(machine_set: Mapping[str, Any]) -> list[str]:
    """Problems of a MachineSet (empty when valid)."""
    return _common(machine_set)


def _int_or_percent_error(field: str, value: object, replicas: int) -> str | None:
    try:
        scaled = get_scaled_value_from_int_or_percent(value, replicas, True)
    except ValueError:
        return f"spec.strategy.rollingUpdate.{field}: unable to convert {field} to int32"
    if not _INT32_MIN <= scaled <= _INT32_MAX:
        return f"spec.strategy.rollingUpdate.{field}: unable to convert {field} to int32"
    if scaled < 0:
        return f"spec.strategy.rollingUpdate.{field}: must be greater than or equal to 0"
    return None


def _strategy_errors(spec: Mapping[str, Any], replicas: int) -> list[str]:
    strategy = o.sub(spec, "strategy")
    kind = strategy.get("type")
    if kind == k.STRATEGY_IN_PLACE_UPDATE:
        return [
            "spec.strategy.type: the InPlaceUpdate strategy is not supported by this manager; "
            "use RollingUpdate or Recreate"
        ]
    if kind not in (k.STRATEGY_ROLLING_UPDATE, k.STRATEGY_RECREATE):
        return ["spec.strategy.type: Type can either be RollingUpdate or Recreate"]
    if kind == k.STRATEGY_RECREATE:
        return []
    rolling = strategy.get("rollingUpdate")
    if not isinstance(rolling, Mapping):
        return [
            "spec.strategy.rollingUpdate: RollingUpdate parameter cannot be nil for rolling update strategy"
        ]
    found = (
        _int_or_percent_error(field, rolling.get(field), replicas) for field in ("maxUnavailable", "maxSurge")
    )
    return [error for error in found if error is not None]


def validate_machine_deployment(deployment: Mapping[str, Any]) -> list[str]:
    """Problems of a MachineDeployment (empty when valid)."""
    errors = _common(deployment)
    errors.extend(_strategy_errors(o.sub(deployment, "spec"), replicas_of(deployment)))
    return errors

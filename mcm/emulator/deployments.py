"""``apps/v1`` Deployments: the write rules of the kind (defaults, validation, generation).

Guarantees (following ``pkg/apis/apps/v1/defaults.go`` and ``pkg/apis/apps/validation``):

- Create resets ``status``; ``metadata.generation`` follows ``spec``.
- Defaults: ``replicas`` 1, ``strategy`` RollingUpdate with ``maxUnavailable``/``maxSurge`` 25%,
  ``revisionHistoryLimit`` 10, ``progressDeadlineSeconds`` 600, and the pod-spec defaults on
  ``spec.template.spec`` (without the pod-only default tolerations).
- Validation: ``spec.selector`` required, non-empty and matching ``spec.template.metadata.labels``;
  ``replicas`` ≥ 0; template ``restartPolicy`` ``Always``; at least one named container with an
  image; ``strategy.type`` Recreate or RollingUpdate; ``spec.selector`` immutable on update.
- No ReplicaSets or Pods are made (deviation): the simulated deployment controller
  (:mod:`mcm.emulator.controllers.deployment`) only reports the spec's replicas in the status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcm.emulator import podspec
from mcm.emulator.errors import Raw
from mcm.emulator.store import Obj
from mcm.emulator.strategies import Strategy
from mcm.emulator.validation import FieldError, invalid, label_errors, not_supported, required
from mcm.runtime.labels import selector_from_label_selector

__all__ = ["DEPLOYMENT", "deployment_defaults", "deployment_errors"]

_STRATEGY_TYPES = ["Recreate", "RollingUpdate"]
_POD_LIST_STRATEGIES = {
    "containers": "merge:name",
    "initContainers": "merge:name",
    "containers.env": "merge:name",
    "initContainers.env": "merge:name",
    "containers.ports": "merge:containerPort",
    "containers.volumeMounts": "merge:mountPath",
    "volumes": "merge:name",
    "imagePullSecrets": "merge:name",
    "tolerations": "atomic",
}


def _template_spec_defaults(spec: Mapping[str, Any]) -> Obj:
    result = podspec.default_pod_spec(spec)
    if "tolerations" in spec:
        result["tolerations"] = spec["tolerations"]
    else:
        del result["tolerations"]
    return result


def _strategy_defaults(strategy: Any) -> Any:
    if not isinstance(strategy, Mapping):
        return strategy
    result = dict(strategy)
    result.setdefault("type", "RollingUpdate")
    if result["type"] == "RollingUpdate":
        rolling = dict(result.get("rollingUpdate") or {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
        result["rollingUpdate"] = rolling
    return result


def deployment_defaults(obj: Obj) -> Obj:
    """The apps/v1 defaults; idempotent, returns a new dict."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return obj
    result = dict(spec)
    result.setdefault("replicas", 1)
    result["strategy"] = _strategy_defaults(result.get("strategy") or {})
    result.setdefault("revisionHistoryLimit", 10)
    result.setdefault("progressDeadlineSeconds", 600)
    template = result.get("template")
    if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
        result["template"] = {**template, "spec": _template_spec_defaults(template["spec"])}
    return {**obj, "spec": result, "status": obj.get("status") or {}}


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _selector_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    selector = spec.get("selector")
    if selector is None:
        return [required("spec.selector")]
    if not isinstance(selector, Mapping):
        return [invalid("spec.selector", selector, "must be a label selector object")]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [invalid("spec.selector", dict(selector), "empty selector is invalid for deployment")]
    errors = label_errors(selector.get("matchLabels") or {}, "spec.selector.matchLabels")
    labels = _get(spec, "template", "metadata", "labels") or {}
    if not errors and isinstance(labels, Mapping):
        try:
            matches = selector_from_label_selector(selector).matches(labels)
        except ValueError as err:
            return [invalid("spec.selector", dict(selector), str(err))]
        if not matches:
            errors.append(
                invalid(
                    "spec.template.metadata.labels",
                    dict(labels),
                    "`selector` does not match template `labels`",
                )
            )
    return errors


def _template_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return [required("spec.template")]
    errors = [
        FieldError(e.type, f"spec.template.{e.field}", e.detail, e.value)
        for e in podspec.pod_spec_errors(template)
    ]
    restart = _get(template, "spec", "restartPolicy")
    if restart is not None and restart != "Always":
        errors.append(not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    return errors


def _replicas_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    replicas = spec.get("replicas")
    if replicas is None:
        return []
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return [invalid("spec.replicas", replicas, "must be an integer")]
    if replicas < 0:
        return [invalid("spec.replicas", replicas, "must be greater than or equal to 0")]
    return []


def deployment_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    """Field errors of a Deployment create (``old`` None) or update."""
    spec = new.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    errors = [*_replicas_errors(spec), *_selector_errors(spec), *_template_errors(spec)]
    strategy_type = _get(spec, "strategy", "type")
    if strategy_type is not None and strategy_type not in _STRATEGY_TYPES:
        rolling = _get(spec, "strategy", "rollingUpdate")
        shown = json.dumps({"Type": strategy_type, "RollingUpdate": rolling}, separators=(",", ":"))
        # kube-apiserver names the field spec.strategy and prints the Go struct as JSON.
        errors.append(not_supported("spec.strategy", Raw(shown), _STRATEGY_TYPES))
    if old is not None and _get(old, "spec", "selector") != spec.get("selector"):
        errors.append(invalid("spec.selector", spec.get("selector"), "field is immutable"))
    return errors


DEPLOYMENT = Strategy(
    tracks_generation="spec",
    status_subresource=True,
    reset_status_on_create=True,
    defaults=deployment_defaults,
    validate=deployment_errors,
    smp_lists={
        "metadata.finalizers": "merge-primitive",
        "metadata.ownerReferences": "merge:uid",
        "status.conditions": "merge:type",
        **{f"spec.template.spec.{path}": kind for path, kind in _POD_LIST_STRATEGIES.items()},
    },
)

"""Pod-specific rules: upstream defaults, QoS class, update immutability and the delete grace period.

Guarantees:

- :func:`default_pod_spec` is idempotent and only fills fields that are absent.
- :func:`pod_update_errors` allows exactly the upstream mutable fields: container and init-container
  images, ``activeDeadlineSeconds``, added tolerations and removed scheduling gates. Specs are
  compared after defaulting, so a client that omits defaulted fields is not refused.
- :func:`pod_grace_period` implements the grace rules of a pod DELETE (kube-apiserver's
  pod strategy, ``CheckGracefulDelete``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcm.emulator.validation import FieldError, forbidden, required

__all__ = ["default_pod", "default_pod_spec", "pod_grace_period", "pod_update_errors", "qos_class"]

DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)
_MUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _image_pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_container(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    result = dict(container)
    result.setdefault("terminationMessagePath", "/dev/termination-log")
    result.setdefault("terminationMessagePolicy", "File")
    if isinstance(result.get("image"), str):
        result.setdefault("imagePullPolicy", _image_pull_policy(result["image"]))
    return result


def _default_tolerations(tolerations: Any) -> Any:
    if tolerations is not None and not isinstance(tolerations, list):
        return tolerations
    result = list(tolerations or [])
    for default in DEFAULT_TOLERATIONS:
        if not any(isinstance(t, dict) and t.get("key") == default["key"] for t in result):
            result.append(dict(default))
    return result


def default_pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The upstream defaults of a pod spec (a new dict; shared values are never mutated)."""
    result = dict(spec)
    result.setdefault("terminationGracePeriodSeconds", 30)
    result.setdefault("restartPolicy", "Always")
    result.setdefault("dnsPolicy", "ClusterFirst")
    result.setdefault("schedulerName", "default-scheduler")
    result.setdefault("enableServiceLinks", True)
    result.setdefault("securityContext", {})
    for field in ("containers", "initContainers"):
        if isinstance(result.get(field), list):
            result[field] = [_default_container(c) for c in result[field]]
    result["tolerations"] = _default_tolerations(result.get("tolerations"))
    return result


def qos_class(spec: Mapping[str, Any]) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort``, from the containers' requests and limits."""
    containers = [c for c in (spec.get("containers") or []) if isinstance(c, Mapping)]
    containers += [c for c in (spec.get("initContainers") or []) if isinstance(c, Mapping)]
    guaranteed = bool(containers)
    any_resources = False
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        if limits or requests:
            any_resources = True
        for name in ("cpu", "memory"):
            if name not in limits or str(requests.get(name, limits[name])) != str(limits[name]):
                guaranteed = False
    if not any_resources:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Create-time defaults: spec defaults, and ``status`` Pending with its QoS class when unset."""
    result = dict(obj)
    spec = result.get("spec")
    if isinstance(spec, Mapping):
        result["spec"] = default_pod_spec(spec)
    status = dict(result.get("status") or {})
    if "phase" not in status:
        status["phase"] = "Pending"
    if isinstance(spec, Mapping):
        status.setdefault("qosClass", qos_class(spec))
    result["status"] = status
    return result


def pod_spec_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Create-time checks: a spec with at least one named container with an image."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [required("spec.containers")]
    errors: list[FieldError] = []
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            errors.append(required(f"spec.containers[{index}]"))
            continue
        if not container.get("name"):
            errors.append(required(f"spec.containers[{index}].name"))
        if not container.get("image"):
            errors.append(required(f"spec.containers[{index}].image"))
    return errors


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _without_mutable(spec: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(spec)
    for field in ("containers", "initContainers"):
        if isinstance(result.get(field), list):
            result[field] = [
                {k: val for k, val in c.items() if k != "image"} if isinstance(c, Mapping) else c
                for c in result[field]
            ]
    result.pop("activeDeadlineSeconds", None)
    result.pop("tolerations", None)
    result.pop("schedulingGates", None)
    return result


def _tolerations_only_added(old: Any, new: Any) -> bool:
    old_items = [_canonical(t) for t in (old or [])]
    new_items = [_canonical(t) for t in (new or [])]
    return all(item in new_items for item in old_items)


def _gates_only_removed(old: Any, new: Any) -> bool:
    old_items = [_canonical(t) for t in (old or [])]
    return all(_canonical(t) in old_items for t in (new or []))


def pod_update_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Upstream pod update immutability (``ValidatePodUpdate``)."""
    new_spec = default_pod_spec(new.get("spec") or {})
    old_spec = default_pod_spec(old.get("spec") or {})
    same_rest = _canonical(_without_mutable(new_spec)) == _canonical(_without_mutable(old_spec))
    if (
        same_rest
        and _tolerations_only_added(old_spec.get("tolerations"), new_spec.get("tolerations"))
        and _gates_only_removed(old_spec.get("schedulingGates"), new_spec.get("schedulingGates"))
    ):
        return []
    return [forbidden("spec", _MUTABLE_MESSAGE)]


def pod_grace_period(pod: Mapping[str, Any], options: Mapping[str, Any]) -> int:
    """The grace period of a DELETE: request, else the pod's, else 0; 0 if unscheduled or finished."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    requested = options.get("gracePeriodSeconds")
    if isinstance(requested, int) and not isinstance(requested, bool):
        return max(requested, 0)
    configured = spec.get("terminationGracePeriodSeconds")
    if isinstance(configured, int) and not isinstance(configured, bool):
        return max(configured, 0)
    return 0

"""The KubeletConfiguration subset a KubeletConfig may set: validation and the merge.

Guarantees:

- :func:`validate_kubelet_config` lists every problem: the fields OpenShift refuses because a
  wrong value leaves a node unable to come back (``cgroupDriver``, ``clusterDNS``,
  ``clusterDomain``, ``staticPodPath``, ``failSwapOn``: "KubeletConfiguration: clusterDNS is not
  allowed to be set, but contains: …"), fields outside :data:`FIELDS` (OpenShift silently ignores
  them; mcm names them so a typo is not lost), and values of the wrong type or range.
- :func:`merge_kubelet_config` is mergo's ``Merge(…, WithOverride)`` on decoded YAML: the user's
  maps are merged key by key into the base's (``featureGates``, ``systemReserved``,
  ``evictionHard``), any other value replaces the base's.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

__all__ = ["FIELDS", "REFUSED", "merge_kubelet_config", "validate_kubelet_config"]

REFUSED = ("cgroupDriver", "clusterDNS", "clusterDomain", "staticPodPath", "failSwapOn")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^0$")


def _int(minimum: int, maximum: int | None = None) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and at most {maximum}" if maximum is not None else ""
            return f"must be at least {minimum}{upper}"
        return None

    return check


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be a boolean"


def _string_map(value: Any) -> str | None:
    if not isinstance(value, dict) or not all(isinstance(v, str) and v for v in value.values()):
        return "must be a map of non-empty strings"
    return None


def _bool_map(value: Any) -> str | None:
    if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
        return "must be a map of booleans"
    return None


def _duration(value: Any) -> str | None:
    return (
        None
        if isinstance(value, str) and _DURATION.match(value)
        else "must be a duration such as 10s or 1m30s"
    )


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "must be a non-empty string"


FIELDS: dict[str, Callable[[Any], str | None]] = {
    "maxPods": _int(1),
    "podsPerCore": _int(0),
    "podPidsLimit": _int(-1),
    "featureGates": _bool_map,
    "systemReserved": _string_map,
    "kubeReserved": _string_map,
    "evictionHard": _string_map,
    "evictionSoft": _string_map,
    "evictionSoftGracePeriod": _string_map,
    "evictionPressureTransitionPeriod": _duration,
    "imageGCHighThresholdPercent": _int(0, 100),
    "imageGCLowThresholdPercent": _int(0, 100),
    "imageMinimumGCAge": _duration,
    "serializeImagePulls": _bool,
    "maxParallelImagePulls": _int(1),
    "cpuManagerPolicy": _one_of("none", "static"),
    "topologyManagerPolicy": _one_of("none", "best-effort", "restricted", "single-numa-node"),
    "containerLogMaxSize": _text,
    "containerLogMaxFiles": _int(2),
    "kubeAPIQPS": _int(0),
    "kubeAPIBurst": _int(0),
    "nodeStatusUpdateFrequency": _duration,
    "nodeStatusReportFrequency": _duration,
    "shutdownGracePeriod": _duration,
    "shutdownGracePeriodCriticalPods": _duration,
}
"""The settable fields, each with its check (``None`` = valid, else the problem)."""


def validate_kubelet_config(config: Any) -> list[str]:
    """Every problem of a KubeletConfig's ``spec.kubeletConfig`` (empty: it may be applied)."""
    if config is None:
        return []
    if not isinstance(config, dict):
        return ["KubeletConfiguration: spec.kubeletConfig must be an object"]
    problems = []
    for key, value in config.items():
        if key in REFUSED:
            problems.append(f"KubeletConfiguration: {key} is not allowed to be set, but contains: {value}")
        elif key not in FIELDS:
            problems.append(f"KubeletConfiguration: {key} is not a supported field")
        else:
            problem = FIELDS[key](value)
            if problem is not None:
                problems.append(f"KubeletConfiguration: {key} {problem}, got {value!r}")
    if not problems:
        high, low = config.get("imageGCHighThresholdPercent"), config.get("imageGCLowThresholdPercent")
        if isinstance(high, int) and isinstance(low, int) and low > high:
            problems.append(
                "KubeletConfiguration: imageGCLowThresholdPercent must not exceed imageGCHighThresholdPercent"
            )
    return problems


def merge_kubelet_config(base: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """``user`` merged over ``base`` (maps key by key, everything else replaced); a new dict."""
    merged = copy.deepcopy(base)
    for key, value in user.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **copy.deepcopy(value)}
        else:
            merged[key] = copy.deepcopy(value)
    return merged

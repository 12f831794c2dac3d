"""Stand-in per-kind strategies, used only while ``mcm.emulator.strategies`` is not in the tree.

It has the same public surface as ``strategies`` (``Strategy``, ``FieldError``, ``strategy_for``,
``custom_strategy``) and just enough behaviour for the core emulator to serve objects: the flags
of spec §2.5 table 7, namespace and CRD defaults, and Lease MicroTime checks.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcm.emulator import timefmt

__all__ = ["FieldError", "Strategy", "custom_strategy", "strategy_for"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class FieldError:
    """One validation failure."""

    type: str
    field: str
    detail: str
    value: Any = None


def _same(obj: Obj) -> Obj:
    return obj


def _no_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    del new, old
    return []


@dataclass(frozen=True)
class Strategy:
    """Per-kind behaviour flags and hooks (spec §5.3)."""

    tracks_generation: Literal["none", "spec", "non_metadata"] = "none"
    status_subresource: bool = False
    reset_status_on_create: bool = False
    unconditional_update: bool = True
    create_on_update: bool = False
    return_deleted_object: bool = False
    graceful_delete: Callable[[Obj, Obj], int | None] | None = None
    defaults: Callable[[Obj], Obj] = _same
    validate: Callable[[Obj, Obj | None], list[FieldError]] = _no_errors
    normalize: Callable[[Obj], Obj] = _same
    field_selectors: Mapping[str, Callable[[Obj], str | None]] = field(default_factory=dict)
    smp_lists: Mapping[str, str] = field(default_factory=dict)
    prune: Callable[[Obj], tuple[Obj, list[str]]] = lambda obj: (obj, [])
    smp_allowed: bool = True


def _namespace_defaults(obj: Obj) -> Obj:
    meta = dict(obj.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels["kubernetes.io/metadata.name"] = str(meta.get("name", ""))
    meta["labels"] = labels
    spec = dict(obj.get("spec") or {})
    spec.setdefault("finalizers", ["kubernetes"])
    status = dict(obj.get("status") or {})
    status.setdefault("phase", "Active")
    return {**obj, "metadata": meta, "spec": spec, "status": status}


def _lease_normalize(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    for name in ("acquireTime", "renewTime"):
        if isinstance(spec.get(name), str):
            spec[name] = timefmt.normalize_microtime(spec[name])
    return {**obj, "spec": spec}


def _crd_defaults(obj: Obj) -> Obj:
    meta = dict(obj.get("metadata") or {})
    finalizers = list(meta.get("finalizers") or [])
    if "customresourcecleanup.apiextensions.k8s.io" not in finalizers:
        finalizers.append("customresourcecleanup.apiextensions.k8s.io")
    meta["finalizers"] = finalizers
    spec = obj.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    names.setdefault("singular", str(names.get("kind", "")).lower())
    storage = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
    now = timefmt.format_time(_dt.datetime.now(_dt.UTC))
    status = {
        "acceptedNames": names,
        "storedVersions": storage[:1],
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
    }
    return {**obj, "metadata": meta, "status": status}


def _pod_grace(obj: Obj, options: Obj) -> int | None:
    if options.get("gracePeriodSeconds") is not None:
        return int(options["gracePeriodSeconds"])
    spec = obj.get("spec") or {}
    if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return int(spec.get("terminationGracePeriodSeconds", 30))


_SPECIAL: dict[tuple[str, str], Strategy] = {
    ("", "Namespace"): Strategy(
        status_subresource=True, return_deleted_object=True, defaults=_namespace_defaults
    ),
    ("", "Node"): Strategy(status_subresource=True),
    ("", "Pod"): Strategy(
        status_subresource=True,
        reset_status_on_create=True,
        return_deleted_object=True,
        graceful_delete=_pod_grace,
    ),
    ("", "Secret"): Strategy(),
    ("", "ConfigMap"): Strategy(),
    ("", "Event"): Strategy(),
    ("", "PersistentVolume"): Strategy(
        status_subresource=True, reset_status_on_create=True, return_deleted_object=True
    ),
    ("", "PersistentVolumeClaim"): Strategy(
        status_subresource=True, reset_status_on_create=True, return_deleted_object=True
    ),
    ("coordination.k8s.io", "Lease"): Strategy(
        unconditional_update=False, create_on_update=True, normalize=_lease_normalize
    ),
    ("policy", "PodDisruptionBudget"): Strategy(
        tracks_generation="spec",
        status_subresource=True,
        reset_status_on_create=True,
        unconditional_update=False,
    ),
    ("storage.k8s.io", "VolumeAttachment"): Strategy(
        status_subresource=True,
        reset_status_on_create=True,
        unconditional_update=False,
        return_deleted_object=True,
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): Strategy(
        tracks_generation="spec",
        status_subresource=True,
        unconditional_update=False,
        return_deleted_object=True,
        defaults=_crd_defaults,
    ),
}


def strategy_for(group: str, kind: str) -> Strategy:
    """The strategy of a built-in kind, or the generic custom-object strategy."""
    return _SPECIAL.get((group, kind)) or custom_strategy({}, status_subresource=False)


def custom_strategy(schema_by_version: Mapping[str, Obj], status_subresource: bool) -> Strategy:
    """A custom-object strategy (no schema handling in the stand-in)."""
    del schema_by_version
    return Strategy(
        tracks_generation="non_metadata",
        status_subresource=status_subresource,
        reset_status_on_create=status_subresource,
        unconditional_update=False,
        smp_allowed=False,
    )

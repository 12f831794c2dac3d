"""Owner references and label selectors of MachineSets and MachineDeployments, over plain dicts.

Guarantees: :func:`controller_of` is ``metav1.GetControllerOf`` (the first reference with
``controller: true``); :func:`controller_ref` builds the reference upstream writes
(``blockOwnerDeletion`` and ``controller`` true); :func:`selector_of` turns ``spec.selector``
into a selector and returns ``None`` for a missing or malformed one (never raises).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcm.manager import constants as k
from mcm.runtime import labels
from mcm.runtime import objects as o

__all__ = [
    "controller_of",
    "controller_ref",
    "controller_uid",
    "has_labels",
    "is_controlled_by",
    "label_map",
    "matches",
    "owner_references",
    "selector_of",
]


def owner_references(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    refs = o.meta(obj).get("ownerReferences")
    return [dict(r) for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The owner reference with ``controller: true``, if any."""
    return next((ref for ref in owner_references(obj) if ref.get("controller") is True), None)


def controller_uid(obj: Mapping[str, Any]) -> str:
    """The UID of the object's controller (``""`` for an orphan)."""
    ref = controller_of(obj)
    uid = ref.get("uid") if ref else None
    return uid if isinstance(uid, str) else ""


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    uid = o.meta(owner).get("uid")
    return bool(uid) and controller_uid(obj) == uid


def controller_ref(owner: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A controller reference to ``owner`` of ``kind`` (MachineSet or MachineDeployment)."""
    return {
        "apiVersion": k.API_VERSION,
        "kind": kind,
        "name": o.name_of(owner),
        "uid": o.meta(owner).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def selector_of(obj: Mapping[str, Any]) -> labels.Selector | None:
    """``metav1.LabelSelectorAsSelector(spec.selector)``; ``None`` if absent or invalid."""
    raw = o.sub(obj, "spec").get("selector")
    if not isinstance(raw, Mapping):
        return None
    try:
        return labels.selector_from_label_selector(raw)
    except (ValueError, TypeError, AttributeError):
        return None


def label_map(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.labels`` as a read-only map: the object's own dict, not a copy (an API server
    only stores string values; a map that is not a dict gets
    :func:`~mcm.runtime.objects.labels_of`'s filtered copy). Never change what it returns."""
    raw = o.meta(obj).get("labels")
    if type(raw) is dict:
        return raw
    return o.labels_of(obj)


def has_labels(obj: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    """Whether ``obj`` carries every label of ``wanted`` with the same value."""
    found = label_map(obj)
    return all(found.get(key) == value for key, value in wanted.items())


def matches(selector: labels.Selector, obj: Mapping[str, Any]) -> bool:
    return selector.matches(label_map(obj))

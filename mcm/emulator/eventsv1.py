"""``events.k8s.io/v1`` Events served from the core Event storage (as kube-apiserver
serves both from one storage).

Guarantees:

- There is one storage: an event created through either API is readable, listable and
  watchable through both, with the fields mapped (``regarding``/``involvedObject``,
  ``note``/``message``, ``reportingController``/``reportingComponent``,
  ``deprecatedSource``/``source``, ``deprecatedFirstTimestamp``/``firstTimestamp``,
  ``deprecatedLastTimestamp``/``lastTimestamp``, ``deprecatedCount``/``count``; ``series``,
  ``eventTime``, ``type``, ``reason``, ``action``, ``related`` and ``reportingInstance`` keep their
  names).
- Creation through ``events.k8s.io`` also requires ``eventTime``, ``reportingController``,
  ``reportingInstance``, ``action`` and ``reason`` (422 otherwise).
- Writes go through the core Event rules (storage, RV, history, watch events are shared).
"""

from __future__ import annotations

from mcm.emulator import errors
from mcm.emulator.registry import ResourceType
from mcm.emulator.store import Obj

__all__ = ["FIELD_MAP", "from_core", "to_core", "validate_create"]


FIELD_MAP = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_V1 = {core: v1 for v1, core in FIELD_MAP.items()}
API_VERSION = "events.k8s.io/v1"


def to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event as a core/v1 Event."""
    result: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key, value in obj.items():
        if key in ("kind", "apiVersion"):
            continue
        result[FIELD_MAP.get(key, key)] = value
    return result


def from_core(obj: Obj) -> Obj:
    """A core/v1 Event as an events.k8s.io/v1 Event."""
    result: Obj = {"kind": "Event", "apiVersion": API_VERSION}
    for key, value in obj.items():
        if key in ("kind", "apiVersion"):
            continue
        result[_TO_V1.get(key, key)] = value
    return result


def validate_create(rt: ResourceType, obj: Obj) -> None:
    """The events.k8s.io-only create rules (422)."""
    errs = rt.strategy.validate(obj, None)
    if errs:
        meta = obj.get("metadata")
        name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
        raise errors.invalid(rt.kind, rt.group, name, errs)

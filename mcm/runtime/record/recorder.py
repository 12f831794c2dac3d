"""The event recorder: turns ``(object, type, reason, message)`` into a core/v1 Event.

Guarantees (``recorderImpl.generateEvent``):

- Recording never blocks and never raises: the event is handed to the broadcaster's bounded
  queue; when it is full the event is dropped with the log line "too many queued events",
  after the broadcaster's shutdown with "broadcaster already stopped" (client-go's two texts).
- The event references its object (``involvedObject``: kind, apiVersion, namespace, name, uid,
  resourceVersion). An object without kind or apiVersion cannot be referenced: logged, dropped.
  Pass ``kind``/``api_version`` when recording objects from a list (list items carry neither).
- Only ``Normal`` and ``Warning`` are accepted as type; anything else is logged and dropped.
- Event fields as client-go: name ``<object name>.<hex UnixNano>``, namespace of the object or
  ``default``, ``count`` 1, first and last timestamp now (whole seconds), ``source`` and
  ``reportingComponent``/``reportingInstance`` from the recorder's component and host.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.record.correlator import event_name, format_time

__all__ = [
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "BroadcasterStopped",
    "EventRecorder",
    "UnreferenceableObject",
    "object_reference",
]

log = structlog.get_logger(__name__)

EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"

Event = dict[str, Any]
Submit = Callable[[Event], bool]
"""Hands an event to the broadcaster without blocking; False if its queue is full, and
:class:`BroadcasterStopped` raised once it is shut down."""


class BroadcasterStopped(Exception):
    """The broadcaster was shut down: the event cannot be recorded."""


class UnreferenceableObject(ValueError):
    """The object cannot be referenced (no kind, apiVersion or name)."""


def _str(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping.get(key)
    return value if isinstance(value, str) else ""


def object_reference(obj: Mapping[str, Any], *, kind: str = "", api_version: str = "") -> dict[str, str]:
    """An ``ObjectReference`` for an API object dict, or the dict itself if it is a reference.

    ``kind``/``api_version`` fill in what the object lacks (objects from a list response).
    """
    if not isinstance(obj, Mapping):
        raise UnreferenceableObject(f"cannot reference a {type(obj).__name__}")
    metadata = obj.get("metadata")
    source = metadata if isinstance(metadata, dict) else obj  # a reference has no metadata
    ref = {
        "kind": _str(obj, "kind") or kind,
        "apiVersion": _str(obj, "apiVersion") or api_version,
        "name": _str(source, "name"),
        "namespace": _str(source, "namespace"),
        "uid": _str(source, "uid"),
        "resourceVersion": _str(source, "resourceVersion"),
    }
    if not metadata and _str(obj, "fieldPath"):
        ref["fieldPath"] = _str(obj, "fieldPath")
    missing = [key for key in ("kind", "apiVersion", "name") if not ref[key]]
    if missing:
        raise UnreferenceableObject(f"object has no {', '.join(missing)}")
    return {key: value for key, value in ref.items() if value}


class EventRecorder:
    """Records events for one component (``record.EventRecorder``). Safe from any thread."""

    def __init__(self, submit: Submit, component: str, host: str = "", *, clock: Clock = REAL_CLOCK) -> None:
        self._submit = submit
        self._component = component
        self._host = host
        self._clock = clock

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        """Record an event about ``obj`` with a fixed message."""
        self._generate(obj, None, event_type, reason, message)

    def eventf(self, obj: Mapping[str, Any], event_type: str, reason: str, fmt: str, *args: object) -> None:
        """Like :meth:`event` with ``fmt % args`` as message (``%s``-style formatting)."""
        self._generate(obj, None, event_type, reason, _format(fmt, args))

    def annotated_eventf(
        self,
        obj: Mapping[str, Any],
        annotations: Mapping[str, str] | None,
        event_type: str,
        reason: str,
        fmt: str,
        *args: object,
    ) -> None:
        """Like :meth:`eventf`, with annotations on the Event."""
        self._generate(obj, annotations, event_type, reason, _format(fmt, args))

    def _generate(
        self,
        obj: Mapping[str, Any],
        annotations: Mapping[str, str] | None,
        event_type: str,
        reason: str,
        message: str,
    ) -> None:
        try:
            ref = object_reference(obj)
        except UnreferenceableObject as err:
            log.error("could_not_construct_reference", error=str(err), type=event_type, reason=reason)
            return
        if event_type not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
            log.error("unsupported_event_type", type=event_type)
            return
        event = self._make_event(ref, annotations, event_type, reason, message)
        try:
            sent = self._submit(event)
        except BroadcasterStopped as err:
            log.error(
                "unable_to_record_event",
                reason=f"{err} (will not retry!)",
                object=f"{ref.get('namespace', '')}/{ref['name']}",
                event_reason=event["reason"],
            )
            return
        if not sent:
            log.error(
                "unable_to_record_event",
                reason="too many queued events, dropped event",
                object=f"{ref.get('namespace', '')}/{ref['name']}",
                event_reason=event["reason"],
            )

    def _make_event(
        self,
        ref: dict[str, str],
        annotations: Mapping[str, str] | None,
        event_type: str,
        reason: str,
        message: str,
    ) -> Event:
        now = self._clock.now()
        stamp = format_time(now)
        metadata: dict[str, Any] = {
            "name": event_name(ref["name"], now),
            "namespace": ref.get("namespace") or "default",
        }
        if annotations:
            metadata["annotations"] = dict(annotations)
        source = {"component": self._component}
        if self._host:
            source["host"] = self._host
        event: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": copy.deepcopy(ref),
            "reason": reason,
            "message": message,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": event_type,
            "source": source,
            "reportingComponent": self._component,
        }
        if self._host:
            event["reportingInstance"] = self._host
        return event


def _format(fmt: str, args: tuple[object, ...]) -> str:
    if not args:
        return fmt
    try:
        return fmt % args
    except (TypeError, ValueError):  # a bad format must not lose the event
        return f"{fmt} {' '.join(map(str, args))}"

"""The event correlator: aggregation, de-duplication and spam filtering (``events_cache.go``).

:meth:`EventCorrelator.correlate` runs three stages, in client-go's order:

1. **Aggregate.** Events that share source, object, type, reason and reporter but differ in
   message are counted per aggregate key within a 600 s window. From the 10th distinct message
   on, the event is replaced by one whose message is ``"(combined from similar events): " + msg``
   and which is de-duplicated under the aggregate key.
2. **Observe.** A key seen before reuses the stored name and resourceVersion, keeps the first
   timestamp, counts one more, and gets a patch of exactly ``count``, ``lastTimestamp`` and
   ``message`` (sent as a strategic merge PATCH instead of a new Event).
3. **Spam filter.** A token bucket per source and object (burst 25, one token per 300 s) must
   grant a token, else the result is ``skip``. Skipped events are already counted, so the next
   event that passes carries the full count.

The object's resourceVersion is in none of the keys. Caches are LRUs of 4096 entries each. Time
comes from the injected clock; nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from mcm.runtime.client.ratelimit import TokenBucketRateLimiter
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.objects import clone

__all__ = [
    "COMBINED_PREFIX",
    "CorrelatorOptions",
    "EventCorrelateResult",
    "EventCorrelator",
    "aggregate_key",
    "event_key",
    "format_time",
    "spam_key",
]

Event = dict[str, Any]

COMBINED_PREFIX = "(combined from similar events): "
_EPOCH = "1970-01-01T00:00:00Z"

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class CorrelatorOptions:
    """Tuning of the correlator (``CorrelatorOptions``); the defaults are client-go's."""

    lru_cache_size: int = 4096
    max_events: int = 10
    """Distinct messages per aggregate key before events are combined."""
    max_interval_seconds: int = 600
    """Aggregation window: a record idle for longer starts afresh."""
    spam_burst: int = 25
    spam_qps: float = 1.0 / 300.0
    spam_key_func: Callable[[Event], str] | None = field(default=None, compare=False)


def _with_defaults(options: CorrelatorOptions) -> CorrelatorOptions:
    """Zero fields take client-go's defaults (``populateDefaults``)."""
    defaults = CorrelatorOptions()
    return dataclasses.replace(
        options,
        lru_cache_size=options.lru_cache_size or defaults.lru_cache_size,
        max_events=options.max_events or defaults.max_events,
        max_interval_seconds=options.max_interval_seconds or defaults.max_interval_seconds,
        spam_burst=options.spam_burst or defaults.spam_burst,
        spam_qps=options.spam_qps or defaults.spam_qps,
    )


@dataclass(frozen=True)
class EventCorrelateResult:
    """The event to write (or None when ``skip``), and the PATCH body when it is a repeat."""

    event: Event | None
    patch: dict[str, Any] | None = None
    skip: bool = False


def format_time(when: _dt.datetime) -> str:
    """A ``metav1.Time`` string: UTC, whole seconds, ``Z``."""
    return when.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_name_lock = threading.Lock()
_last_name_nanos = 0


def event_name(involved_name: str, when: _dt.datetime) -> str:
    """``<involvedObject.name>.<hex UnixNano>`` as client-go names events.

    Python times have microsecond precision (and a fake clock may not move at all), so the
    nanoseconds are bumped to stay strictly increasing within the process: two events never
    share a name, which the server would refuse with AlreadyExists.
    """
    global _last_name_nanos
    delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    nanos = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    with _name_lock:
        nanos = max(nanos, _last_name_nanos + 1)
        _last_name_nanos = nanos
    return f"{involved_name}.{nanos:x}"


def _s(mapping: object, key: str) -> str:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, str) else ""


def _source(event: Event) -> tuple[str, str]:
    source = event.get("source")
    return _s(source, "component"), _s(source, "host")


def _object_fields(event: Event, *keys: str) -> list[str]:
    involved = event.get("involvedObject")
    return [_s(involved, key) for key in keys]


def event_key(event: Event) -> str:
    """``getEventKey``: source, object (with fieldPath), type, reason, message; no separator."""
    return "".join(
        [
            *_source(event),
            *_object_fields(event, "kind", "namespace", "name", "fieldPath", "uid", "apiVersion"),
            _s(event, "type"),
            _s(event, "reason"),
            _s(event, "message"),
        ]
    )


def spam_key(event: Event) -> str:
    """``getSpamKey``: source and object."""
    return "".join(
        [*_source(event), *_object_fields(event, "kind", "namespace", "name", "uid", "apiVersion")]
    )


def aggregate_key(event: Event) -> tuple[str, str]:
    """``EventAggregatorByReasonFunc``: the aggregate key and the local key (the message)."""
    key = "".join(
        [
            *_source(event),
            *_object_fields(event, "kind", "namespace", "name", "uid", "apiVersion"),
            _s(event, "type"),
            _s(event, "reason"),
            _s(event, "reportingComponent"),
            _s(event, "reportingInstance"),
        ]
    )
    return key, _s(event, "message")


class _LRU(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass
class _AggregateRecord:
    local_keys: set[str]
    last_seen: float


@dataclass(frozen=True)
class _EventLog:
    count: int
    first_timestamp: object
    name: str
    resource_version: str


class EventCorrelator:
    """Correlates the events of one sink. Thread-safe; give each sink its own correlator."""

    def __init__(self, options: CorrelatorOptions | None = None, *, clock: Clock = REAL_CLOCK) -> None:
        self._options = _with_defaults(options or CorrelatorOptions())
        self._clock = clock
        self._spam_key = self._options.spam_key_func or spam_key
        self._mutex = threading.Lock()
        size = self._options.lru_cache_size
        self._aggregates: _LRU[str, _AggregateRecord] = _LRU(size)
        self._logs: _LRU[str, _EventLog] = _LRU(size)
        self._buckets: _LRU[str, TokenBucketRateLimiter] = _LRU(size)

    def correlate(self, event: Event) -> EventCorrelateResult:
        """Aggregate, observe and filter ``event`` (not modified); see the module docstring."""
        with self._mutex:
            aggregated, key = self._aggregate(event)
            observed, patch = self._observe(aggregated, key)
            if self._filtered(observed):
                return EventCorrelateResult(None, None, skip=True)
            return EventCorrelateResult(observed, patch)

    def update_state(self, server_event: Event) -> None:
        """Remember what the server stored (name, resourceVersion, count) after a write."""
        with self._mutex:
            self._logs.add(event_key(server_event), _log_of(server_event))

    # -- stages --------------------------------------------------------------------------------
    def _aggregate(self, event: Event) -> tuple[Event, str]:
        now_mono = self._clock.monotonic()
        agg_key, local_key = aggregate_key(event)
        record = self._aggregates.get(agg_key)
        if record is None or now_mono - record.last_seen > self._options.max_interval_seconds:
            record = _AggregateRecord(set(), now_mono)
        record.local_keys.add(local_key)
        record.last_seen = now_mono
        self._aggregates.add(agg_key, record)
        if len(record.local_keys) < self._options.max_events:
            return event, event_key(event)
        record.local_keys.pop()  # keep the set bounded; which one goes does not matter
        return self._combined(event), agg_key

    def _combined(self, event: Event) -> Event:
        now = self._clock.now()
        stamp = format_time(now)
        involved = clone(event.get("involvedObject") or {})
        metadata = event.get("metadata")
        namespace = _s(metadata, "namespace")
        combined: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(_s(involved, "name"), now), "namespace": namespace},
            "involvedObject": involved,
            "reason": event.get("reason"),
            "message": COMBINED_PREFIX + _s(event, "message"),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": event.get("type"),
            "source": clone(event.get("source") or {}),
        }
        for reporting in ("reportingComponent", "reportingInstance"):
            if reporting in event:
                combined[reporting] = event[reporting]
        return combined

    def _observe(self, event: Event, key: str) -> tuple[Event, dict[str, Any] | None]:
        observed = clone(event)
        last = self._logs.get(key)
        patch: dict[str, Any] | None = None
        if last is not None and last.count > 0:
            metadata = observed.setdefault("metadata", {})
            metadata["name"] = last.name
            if last.resource_version:
                metadata["resourceVersion"] = last.resource_version
            else:
                metadata.pop("resourceVersion", None)
            observed["firstTimestamp"] = last.first_timestamp
            observed["count"] = last.count + 1
            patch = _repeat_patch(observed)
        self._logs.add(key, _log_of(observed))
        return observed, patch

    def _filtered(self, event: Event) -> bool:
        key = self._spam_key(event)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucketRateLimiter(
                self._options.spam_qps, self._options.spam_burst, clock=self._clock
            )
        self._buckets.add(key, bucket)
        return not bucket.try_accept()


def _log_of(event: Event) -> _EventLog:
    metadata = event.get("metadata")
    count = event.get("count")
    return _EventLog(
        count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0,
        first_timestamp=event.get("firstTimestamp"),
        name=_s(metadata, "name"),
        resource_version=_s(metadata, "resourceVersion"),
    )


def _repeat_patch(event: Event) -> dict[str, Any]:
    """The two-way merge patch from ``{count 0, lastTimestamp epoch, message ""}`` to ``event``."""
    patch: dict[str, Any] = {}
    if event.get("count"):
        patch["count"] = event["count"]
    last = event.get("lastTimestamp")
    if last is not None and last != _EPOCH:
        patch["lastTimestamp"] = last
    if event.get("message"):
        patch["message"] = event["message"]
    return patch

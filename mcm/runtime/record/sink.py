"""Writing correlated events to the API server, with client-go's retry rules (``recordToSink``).

Guarantees:

- A repeat (``count > 1``) is a strategic merge PATCH of ``count``/``lastTimestamp``/``message``
  on the stored Event; a first occurrence, or a PATCH answered 404, is a POST of the whole
  Event without resourceVersion. After a successful write the correlator learns the server's
  name and resourceVersion.
- Up to :data:`MAX_TRIES_PER_EVENT` (12) attempts per event. Between attempts the writer sleeps
  on the clock: a random fraction of ``sleep_duration`` (10 s) the first time, the full
  duration afterwards; setting ``cancel`` ends the sleep and drops the event.
- An API ``Status`` error (any :class:`ApiError`, ``AlreadyExists`` included) and a request that
  cannot be built are never retried; transport errors and anything else are.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.errors import ApiError, is_already_exists, is_not_found
from mcm.runtime.client.resources import EVENTS
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.record.correlator import EventCorrelator

__all__ = ["DEFAULT_SLEEP_DURATION", "MAX_TRIES_PER_EVENT", "EventSink", "EventSinkImpl", "SinkWriter"]

log = structlog.get_logger(__name__)

Event = dict[str, Any]

MAX_TRIES_PER_EVENT = 12
DEFAULT_SLEEP_DURATION = 10.0


class EventSink(Protocol):
    """Where events are written (``record.EventSink``); each call returns the stored Event."""

    def create(self, event: Event) -> Event: ...

    def update(self, event: Event) -> Event: ...

    def patch(self, event: Event, patch: dict[str, Any]) -> Event: ...


def _namespace(event: Event) -> str:
    metadata = event.get("metadata")
    ns = metadata.get("namespace") if isinstance(metadata, dict) else None
    return ns if isinstance(ns, str) else ""


def _name(event: Event) -> str:
    metadata = event.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


class EventSinkImpl:
    """Writes core/v1 Events in each event's own namespace (``EventSinkImpl``).

    Built for a ``namespace`` (``Events(ns)``), it refuses events of any other namespace with a
    plain error, which the writer retries like client-go; ``""`` accepts every namespace.
    """

    def __init__(self, client: ClusterClient | RESTClient, namespace: str = "") -> None:
        self._client = client.resource(EVENTS) if isinstance(client, ClusterClient) else client
        self._namespace = namespace

    def _check(self, event: Event) -> str:
        ns = _namespace(event)
        if self._namespace and ns != self._namespace:
            raise RuntimeError(
                f"can't create an event with namespace '{ns}' in namespace '{self._namespace}'"
            )
        return ns

    def create(self, event: Event) -> Event:
        return self._client.create(event, namespace=self._check(event))

    def update(self, event: Event) -> Event:
        return self._client.update(event, namespace=self._check(event))

    def patch(self, event: Event, patch: dict[str, Any]) -> Event:
        ns = self._check(event)
        return self._client.patch(_name(event), patch, kind="strategic", namespace=ns)


class _DoNotRetry(Exception):
    pass


class SinkWriter:
    """Correlates and writes events to one sink, one at a time (one correlator per sink)."""

    def __init__(
        self,
        sink: EventSink,
        correlator: EventCorrelator,
        cancel: threading.Event,
        *,
        sleep_duration: float = DEFAULT_SLEEP_DURATION,
        clock: Clock = REAL_CLOCK,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._sink = sink
        self._correlator = correlator
        self._cancel = cancel
        self._sleep_duration = sleep_duration
        self._clock = clock
        self._rand = rand

    def record(self, event: Event) -> None:
        """Correlate ``event`` and write it, retrying as the module docstring says."""
        result = self._correlator.correlate(event)  # correlate copies; ``event`` is unchanged
        if result.skip or result.event is None:
            return
        tries = 0
        while not self._write(result.event, result.patch):
            tries += 1
            if tries >= MAX_TRIES_PER_EVENT:
                log.error("unable_to_write_event", reason="retry limit exceeded", **_describe(event))
                return
            delay = self._sleep_duration
            if tries == 1:  # spread clients that all failed at once
                delay *= self._rand()
            if self._clock.wait(self._cancel, delay):
                log.error("unable_to_write_event", reason="broadcaster is shut down", **_describe(event))
                return

    def _write(self, event: Event, patch: dict[str, Any] | None) -> bool:
        """One attempt; True when done (written, or failed in a way a retry cannot fix)."""
        try:
            stored = self._send(event, patch)
        except ApiError as err:
            level = log.debug if is_already_exists(err) else log.error
            level("server_rejected_event", error=str(err), retry=False, **_describe(event))
            return True
        except (ValueError, TypeError) as err:  # the request could not be built
            log.error("unable_to_construct_event", error=str(err), retry=False, **_describe(event))
            return True
        except Exception as err:
            log.error("unable_to_write_event", error=str(err), retry=True, **_describe(event))
            return False
        self._correlator.update_state(stored)
        return True

    def _send(self, event: Event, patch: dict[str, Any] | None) -> Event:
        count = event.get("count")
        if isinstance(count, int) and count > 1 and patch is not None:
            try:
                return self._sink.patch(event, patch)
            except ApiError as err:
                if not is_not_found(err):
                    raise
        fresh = dict(event)  # the correlator's own copy: only the metadata is changed here
        metadata = fresh.get("metadata")
        if isinstance(metadata, dict) and "resourceVersion" in metadata:
            fresh["metadata"] = {k: v for k, v in metadata.items() if k != "resourceVersion"}
        return self._sink.create(fresh)


def _describe(event: Event) -> dict[str, str]:
    involved = event.get("involvedObject")
    involved = involved if isinstance(involved, dict) else {}
    return {
        "event_name": f"{_namespace(event)}/{_name(event)}",
        "object_kind": str(involved.get("kind", "")),
        "object": f"{involved.get('namespace', '')}/{involved.get('name', '')}",
        "event_reason": str(event.get("reason", "")),
    }

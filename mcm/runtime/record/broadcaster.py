"""The event broadcaster: fans recorded events out to sinks and loggers (``record.EventBroadcaster``).

Guarantees:

- Recording never blocks the caller. Events go into one bounded incoming queue
  (:data:`MAX_QUEUED_EVENTS`, 1000); when it is full the recorder drops the event and logs it
  ("too many queued events"); after :meth:`EventBroadcaster.shutdown` it drops it and logs that
  the broadcaster is stopped, as client-go does.
- A distributor thread hands each event to every watcher's own bounded queue (1000). A full
  watcher queue drops the event for that watcher only, so a slow or failing sink never stalls
  the recorder's callers nor the other watchers (``DropIfChannelFull``).
- Each watcher (sink writer, logger, custom function) runs in its own thread. A sink gets its
  own :class:`EventCorrelator`.
- Every watcher receives the same event object, as client-go's watchers share one pointer: a
  handler reads it and copies it before changing it. The sink writer never changes it (its
  correlator works on a copy), nor does either logger.
- :meth:`EventBroadcaster.start_logging` passes ``logf`` exactly client-go's ``StartLogging``
  line: ``Event(v1.ObjectReference{Kind:"Pod", Namespace:"ns", Name:"p", UID:"…",
  APIVersion:"v1", ResourceVersion:"", FieldPath:""}): type: 'Normal' reason: 'Started' msg``
  (Go ``%#v`` quoting of every reference field, :func:`log_line`), so log scrapers written for
  client-go components keep working.
- :meth:`EventBroadcaster.shutdown` stops accepting events, delivers what was already queued to
  the watchers' queues, closes them, and cancels the sinks' retry sleeps.
"""

from __future__ import annotations

import collections
import random
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import structlog

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import handle_crash
from mcm.runtime.record.correlator import CorrelatorOptions, EventCorrelator
from mcm.runtime.record.recorder import BroadcasterStopped, EventRecorder
from mcm.runtime.record.sink import DEFAULT_SLEEP_DURATION, EventSink, EventSinkImpl, SinkWriter

__all__ = [
    "MAX_QUEUED_EVENTS",
    "BroadcasterStopped",
    "EventBroadcaster",
    "EventWatcher",
    "go_quote",
    "log_line",
]

log = structlog.get_logger(__name__)

MAX_QUEUED_EVENTS = 1000

Event = dict[str, Any]
T = TypeVar("T")


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
_REFERENCE_FIELDS = (
    ("Kind", "kind"),
    ("Namespace", "namespace"),
    ("Name", "name"),
    ("UID", "uid"),
    ("APIVersion", "apiVersion"),
    ("ResourceVersion", "resourceVersion"),
    ("FieldPath", "fieldPath"),
)


def _go_escape(char: str) -> str:
    if char in ('"', "\\"):
        return "\\" + char
    if char == " " or char.isprintable():  # the same classes as Go's unicode.IsPrint
        return char
    if char in _GO_ESCAPES:
        return _GO_ESCAPES[char]
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def go_quote(value: object) -> str:
    """``value`` as Go's ``strconv.Quote`` (and so ``%#v`` of a string) writes it."""
    return '"' + "".join(_go_escape(char) for char in str(value)) + '"'


def log_line(event: Event) -> str:
    """The line client-go's ``StartLogging`` writes:
    ``Event(%#v of involvedObject): type: '%v' reason: '%v' %v``."""
    ref = event.get("involvedObject")
    ref = ref if isinstance(ref, dict) else {}
    fields = ", ".join(f"{go_name}:{go_quote(ref.get(key) or '')}" for go_name, key in _REFERENCE_FIELDS)
    kind, reason, message = (event.get(key) or "" for key in ("type", "reason", "message"))
    return f"Event(v1.ObjectReference{{{fields}}}): type: '{kind}' reason: '{reason}' {message}"


class _Channel(Generic[T]):
    """A bounded FIFO that refuses instead of blocking when full; ``take`` ends after ``close``."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: collections.deque[T] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False

    def offer(self, item: T) -> bool:
        with self._cond:
            if self._closed or len(self._items) >= self._capacity:
                return False
            self._items.append(item)
            self._cond.notify()
            return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def take(self) -> tuple[T, bool]:
        """The next item and True, or (None-ish, False) once closed and drained."""
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            if self._items:
                return self._items.popleft(), True
            return None, False  # type: ignore[return-value]

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)


class EventWatcher:
    """One consumer of the broadcast, running ``handler`` for each event in its own thread."""

    def __init__(self, handler: Callable[[Event], None], on_stop: Callable[[EventWatcher], None]) -> None:
        self._handler = handler
        self._on_stop = on_stop
        self.channel: _Channel[Event] = _Channel(MAX_QUEUED_EVENTS)
        self._thread = threading.Thread(target=self._run, name="event-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            event, ok = self.channel.take()
            if not ok:
                return
            with handle_crash():
                self._handler(event)

    def stop(self) -> None:
        """Detach from the broadcaster; events already queued for this watcher are still handled."""
        self._on_stop(self)
        self.channel.close()

    def join(self, timeout: float | None = None) -> bool:
        """Wait (real time) for the watcher thread to finish after :meth:`stop`; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


class EventBroadcaster:
    """Receives events from recorders and sends them to sinks and loggers.

    ``sleep_duration`` is the pause between sink retries; ``correlator_options`` tune every sink's
    correlator. Time (timestamps, spam filter, retry sleeps) comes from ``clock``.
    """

    def __init__(
        self,
        *,
        clock: Clock = REAL_CLOCK,
        sleep_duration: float = DEFAULT_SLEEP_DURATION,
        correlator_options: CorrelatorOptions | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._clock = clock
        self._sleep_duration = sleep_duration
        self._correlator_options = correlator_options
        self._rand = rand
        self._incoming: _Channel[Event] = _Channel(MAX_QUEUED_EVENTS)
        self._watchers: list[EventWatcher] = []
        self._mutex = threading.Lock()
        self._cancel = threading.Event()
        self._distributor = threading.Thread(target=self._distribute, name="event-broadcaster", daemon=True)
        self._distributor.start()

    # -- producers -----------------------------------------------------------------------------
    def new_recorder(self, component: str, host: str = "") -> EventRecorder:
        """A recorder whose events carry ``source {component, host}``."""
        return EventRecorder(self.action_or_drop, component, host, clock=self._clock)

    def action_or_drop(self, event: Event) -> bool:
        """Queue ``event`` without blocking; False if the queue is full. Raises
        :class:`BroadcasterStopped` after :meth:`shutdown` (client-go's ``ActionOrDrop`` error)."""
        if self._incoming.offer(event):
            return True
        if self._incoming.closed:
            raise BroadcasterStopped("broadcaster already stopped")
        return False

    # -- consumers -----------------------------------------------------------------------------
    def start_event_watcher(self, handler: Callable[[Event], None]) -> EventWatcher:
        """Run ``handler(event)`` for every event from now on, in a thread of its own."""
        watcher = EventWatcher(handler, self._detach)
        with self._mutex:
            self._watchers.append(watcher)
        return watcher

    def start_recording_to_sink(self, sink: EventSink | ClusterClient | RESTClient) -> EventWatcher:
        """Write events to ``sink`` (or to the core/v1 Events of a client, any namespace)."""
        target: EventSink = EventSinkImpl(sink) if isinstance(sink, ClusterClient | RESTClient) else sink
        writer = SinkWriter(
            target,
            EventCorrelator(self._correlator_options, clock=self._clock),
            self._cancel,
            sleep_duration=self._sleep_duration,
            clock=self._clock,
            rand=self._rand,
        )
        return self.start_event_watcher(writer.record)

    def start_logging(self, logf: Callable[[str], None]) -> EventWatcher:
        """Pass client-go's one-line description of each event (:func:`log_line`) to ``logf``."""
        return self.start_event_watcher(lambda event: logf(log_line(event)))

    def start_structured_logging(self, verbosity: int = 0) -> EventWatcher:
        """Log each event as key-value pairs (``StartStructuredLogging``); ``verbosity`` > 0 is debug."""
        emit = log.info if verbosity <= 0 else log.debug

        def log_event(event: Event) -> None:
            ref = event.get("involvedObject") or {}
            emit(
                "event_occurred",
                object=f"{ref.get('namespace', '')}/{ref.get('name', '')}".lstrip("/"),
                field_path=ref.get("fieldPath", ""),
                kind=ref.get("kind", ""),
                api_version=ref.get("apiVersion", ""),
                type=event.get("type"),
                reason=event.get("reason"),
                message=event.get("message"),
            )

        return self.start_event_watcher(log_event)

    def _detach(self, watcher: EventWatcher) -> None:
        with self._mutex:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

    # -- distribution --------------------------------------------------------------------------
    def _distribute(self) -> None:
        while True:
            event, ok = self._incoming.take()
            if not ok:
                break
            with self._mutex:
                watchers = list(self._watchers)
            for watcher in watchers:
                watcher.channel.offer(event)  # shared, as in client-go; a full watcher misses it
        with self._mutex:
            watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher.channel.close()

    def shutdown(self) -> None:
        """Stop accepting events, flush the queue to the watchers, cancel sink retry sleeps."""
        self._incoming.close()
        self._distributor.join()
        self._cancel.set()

"""Watchers: per-connection event queues with selector transitions, bookmarks and timeouts.

Guarantees (as kube-apiserver's watch cache):

- A watcher receives the changes of one resource in RV order, each at most once. Filtering
  happens when the store offers a change: only the new state matches -> ADDED, both -> MODIFIED,
  only the old state -> DELETED (old object stamped with the change's RV), neither -> nothing.
- ``offer`` never blocks and never encodes: it appends ``(change, event type)`` to a bounded queue
  and notifies. On overflow the watcher is closed cleanly with reason ``slow``; writers never wait
  for watchers. The watch thread renders queued events outside the store lock; each change's line
  is encoded once per event type and shared by every watcher (alias views encode their own).
- :func:`serve_watch` writes the events it drains with one ``sendall`` (one chunk each), a
  BOOKMARK every ``bookmark_interval`` and about 2 s before the deadline when bookmarks are
  allowed, and ends at the deadline, on a drop, or when the client goes away.
- While ``WatchHub.flowing`` is clear (pause "hang"), no event is written.
- With ``WatchHub.rechunk`` set, output is cut into chunks at random boundaries (events are no
  longer one chunk each), to test that clients split lines across chunks.
- ``close(mode="expire")`` sends the 410 ERROR event before ending; ``mode="reset"`` asks the
  transport to abort the connection.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from mcm.emulator.errors import status_failure
from mcm.emulator.store import Change, Stored, VersionedStore, encode

__all__ = ["ChunkSink", "WatchHub", "Watcher", "error_line", "serve_watch"]

Predicate = Callable[[dict[str, Any]], bool]
Queued = bytes | tuple[Change | Stored, str]
"""A prepared line, or an event (a change, or a stored object for initial events) and its type."""


def error_line(status: dict[str, Any]) -> bytes:
    """A watch ERROR event line for a Status body."""
    return b'{"type":"ERROR","object":' + encode(status) + b"}\n"


def expired_status(requested: int, floor: int) -> dict[str, Any]:
    """The 410 Status of a watch from a compacted RV."""
    return status_failure(410, "Expired", f"too old resource version: {requested} ({floor})")


class ChunkSink(Protocol):
    """The transport side of a watch: writes chunks, can abort the connection."""

    def write_chunk(self, data: bytes) -> None: ...

    def write_chunks(self, lines: list[bytes]) -> None:
        """Write each line as its own chunk, in one send."""
        ...

    def abort(self) -> None: ...


class Watcher:
    """One watch: filter, bounded queue, close state."""

    def __init__(
        self,
        resource: str,
        kind: str,
        api_version: str,
        namespace: str | None,
        predicate: Predicate,
        *,
        bookmarks: bool,
        max_queue: int = 10_000,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.resource = resource
        self.convert = convert
        self.kind = kind
        self.api_version = api_version
        self.namespace = namespace
        self.predicate = predicate
        self.bookmarks = bookmarks
        self.max_queue = max_queue
        self.cond = threading.Condition(threading.Lock())
        self.queue: deque[Queued] = deque()
        self.closed: str | None = None
        self.close_mode = "close"
        self.bookmark_requested = False
        self.last_rv = 0
        self.initial = 0

    def _matches(self, stored: Stored | None) -> bool:
        if stored is None:
            return False
        if self.namespace is not None and stored.obj["metadata"].get("namespace", "") != self.namespace:
            return False
        return self.predicate(stored.obj)

    def event_type_for(self, change: Change) -> str | None:
        """The event type this watcher should see for ``change``, or None."""
        if change.type == "ADDED":
            return "ADDED" if self._matches(change.new) else None
        if change.type == "DELETED":
            return "DELETED" if self._matches(change.old or change.new) else None
        if self._matches(change.new):
            return "MODIFIED" if self._matches(change.old) else "ADDED"
        return "DELETED" if self._matches(change.old) else None

    def event_for(self, change: Change) -> bytes | None:
        """The line this watcher should see for ``change``, or None."""
        event_type = self.event_type_for(change)
        return None if event_type is None else self._line(change, event_type)

    def render(self, item: Queued) -> bytes:
        """The line of a queued item."""
        if isinstance(item, bytes):
            return item
        source, event_type = item
        if isinstance(source, Change):
            return self._line(source, event_type)
        return self.line_for(event_type, source)

    def _line(self, change: Change, event_type: str) -> bytes:
        if self.convert is None:
            return change.line(event_type)
        stored = change.old_at_rv() if event_type == "DELETED" and change.type != "DELETED" else change.new
        return self.line_for(event_type, stored)

    def line_for(self, event_type: str, stored: Stored) -> bytes:
        """The watch line for one stored object (converted for alias views)."""
        body = stored.full() if self.convert is None else encode(self.convert(stored.obj))
        return b'{"type":"' + event_type.encode() + b'","object":' + body + b"}\n"

    def push(self, item: Queued) -> None:
        """Queue an initial event (they do not count against ``max_queue``)."""
        with self.cond:
            self.queue.append(item)
            self.initial += 1
            self.cond.notify()

    def offer(self, change: Change) -> None:
        """Called by the store under its lock; never blocks, never encodes."""
        event_type = self.event_type_for(change)
        with self.cond:
            self.last_rv = change.rv
            if event_type is None or self.closed is not None:
                return
            if len(self.queue) >= self.max_queue + self.initial:
                self.closed = "slow"
                self.queue.clear()
            elif self.queue:
                self.queue.append((change, event_type))
                return  # the watch thread is not waiting while its queue is non-empty
            else:
                self.queue.append((change, event_type))
            self.cond.notify()

    def close(self, reason: str, mode: str = "close") -> None:
        """End this watch (``mode``: close, reset, expire)."""
        with self.cond:
            if self.closed is None:
                self.closed = reason
                self.close_mode = mode
            self.cond.notify()

    def request_bookmark(self) -> None:
        """Ask for a bookmark at the next opportunity."""
        with self.cond:
            self.bookmark_requested = True
            self.cond.notify()

    def bookmark_line(self, rv: int) -> bytes:
        """A BOOKMARK line for ``rv``."""
        obj = {"kind": self.kind, "apiVersion": self.api_version, "metadata": {"resourceVersion": str(rv)}}
        return b'{"type":"BOOKMARK","object":' + encode(obj) + b"}\n"


class WatchHub:
    """Bookkeeping across watches: drops, forced bookmarks, counters, watch delay."""

    def __init__(self, store: VersionedStore) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.bookmark_interval = 60.0
        self.min_request_timeout = 1800.0
        self.max_queue = 10_000
        self.delay = 0.0
        self.events_sent = 0
        self.bookmarks_sent = 0
        self.ended: dict[str, int] = {}
        self.rechunk = False
        self.flowing = threading.Event()
        self.flowing.set()
        self._random = random.Random(0)

    def rechunked(self, lines: list[bytes]) -> list[bytes]:
        """The same bytes cut at random boundaries (robustness testing of client line splitting)."""
        data = b"".join(lines)
        pieces: list[bytes] = []
        while data:
            with self.lock:
                cut = self._random.randint(1, max(1, min(len(data), 64)))
            pieces.append(data[:cut])
            data = data[cut:]
        return pieces

    def drop(self, mode: str = "close", resource: str | None = None) -> int:
        """End every open watch (of ``resource`` if given); return how many."""
        if mode not in ("close", "reset", "expire"):
            raise ValueError(f"unknown drop mode {mode!r}")
        watchers = self.store.watchers(resource)
        for watcher in watchers:
            watcher.close("drop", mode)
        return len(watchers)

    def bookmark_now(self) -> None:
        """Emit a BOOKMARK to every bookmark-enabled watch."""
        for watcher in self.store.watchers():
            if isinstance(watcher, Watcher) and watcher.bookmarks:
                watcher.request_bookmark()

    def open_watches(self) -> dict[str, int]:
        """Open watches per resource."""
        counts: dict[str, int] = {}
        for watcher in self.store.watchers():
            if isinstance(watcher, Watcher):
                counts[watcher.resource] = counts.get(watcher.resource, 0) + 1
        return counts

    def count_end(self, reason: str) -> None:
        """Record why a watch ended."""
        with self.lock:
            self.ended[reason] = self.ended.get(reason, 0) + 1


def serve_watch(hub: WatchHub, watcher: Watcher, sink: ChunkSink, timeout: float) -> str:
    """Stream ``watcher``'s events to ``sink`` until timeout, close or client loss; return the reason."""
    start = time.monotonic()
    deadline = start + timeout
    next_bookmark = start + hub.bookmark_interval
    final_bookmark_sent = timeout <= 2.0
    reason = "timeout"
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wake = min(deadline, next_bookmark) if watcher.bookmarks else deadline
            if watcher.bookmarks and not final_bookmark_sent:
                wake = min(wake, deadline - 2.0)
            items, closed, mode, want_bookmark = _take(watcher, max(0.0, wake - now))
            while not hub.flowing.wait(0.05) and watcher.closed is None and time.monotonic() < deadline:
                pass  # paused ("hang"): deliver nothing until resumed
            if items:
                lines = [watcher.render(item) for item in items]
                if hub.delay > 0:
                    time.sleep(hub.delay)
                sink.write_chunks(hub.rechunked(lines) if hub.rechunk else lines)
                with hub.lock:
                    hub.events_sent += len(lines)
            if closed is not None:
                reason = closed
                with contextlib.suppress(OSError):
                    _finish_closed(watcher, sink, mode)
                break
            now = time.monotonic()
            due_final = watcher.bookmarks and not final_bookmark_sent and now >= deadline - 2.0
            if watcher.bookmarks and (want_bookmark or now >= next_bookmark or due_final):
                if due_final:
                    final_bookmark_sent = True
                if _send_bookmark(hub, watcher, sink):
                    next_bookmark = time.monotonic() + hub.bookmark_interval
    except OSError:
        reason = "client"
    finally:
        hub.store.remove_watcher(watcher.resource, watcher)
        hub.count_end(reason)
    return reason


def _take(watcher: Watcher, wait: float) -> tuple[list[Queued], str | None, str, bool]:
    with watcher.cond:
        if not watcher.queue and watcher.closed is None and not watcher.bookmark_requested:
            watcher.cond.wait(wait)
        lines = list(watcher.queue)
        watcher.queue.clear()
        watcher.initial = 0
        want = watcher.bookmark_requested
        watcher.bookmark_requested = False
        return lines, watcher.closed, watcher.close_mode, want


def _finish_closed(watcher: Watcher, sink: ChunkSink, mode: str) -> None:
    if mode == "reset":
        sink.abort()
        return
    if mode == "expire":
        status = expired_status(watcher.last_rv, watcher.last_rv)
        status["message"] = "too old resource version: watch expired by fault injection"
        sink.write_chunk(error_line(status))


def _send_bookmark(hub: WatchHub, watcher: Watcher, sink: ChunkSink) -> bool:
    with hub.store.lock, watcher.cond:
        if watcher.queue:
            return False
        rv = hub.store.rv
    sink.write_chunk(watcher.bookmark_line(rv))
    with hub.lock:
        hub.bookmarks_sent += 1
    return True

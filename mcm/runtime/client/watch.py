"""A watch over HTTP: newline-delimited JSON events decoded from an open chunked response.

The :class:`HTTPWatchStream` implements :class:`~mcm.runtime.client.types.WatchStream`.

Guarantees:

- Events are yielded in the order the server sent them; each line is decoded with one
  ``codec.loads`` (orjson; no typed models); lines may be split across chunks in any way.
- ``resource_version`` is the last resourceVersion seen on an ADDED, MODIFIED, DELETED or
  BOOKMARK event (initially the one the watch started from).
- ``ERROR`` events are yielded as they are; :func:`error_from_watch_event` turns one into the
  typed API error (``Gone`` for a 410 "too old resource version").
- An undecodable line yields one ERROR event (500 InternalError) and ends the stream, as
  client-go's stream watcher does.
- The line buffer is bounded: a line longer than ``max_line_bytes`` (:data:`MAX_LINE_BYTES`,
  client-go's 16 MiB streaming-decoder limit) is never held; it yields that same ERROR event
  ("object to decode was longer than maximum allowed size") and ends the stream.
- The server closing the stream ends iteration normally. A connection that breaks mid-stream
  raises :class:`~mcm.runtime.client.errors.ConnectionFailed`.
- :meth:`HTTPWatchStream.stop` may be called from any thread, any number of times: it shuts
  the socket down so a blocked read returns at once, and iteration ends without an error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import structlog
import urllib3

from mcm.runtime.client import codec
from mcm.runtime.client.errors import ApiError, error_from_status
from mcm.runtime.client.transport import connection_failed
from mcm.runtime.client.types import EventType, WatchEvent

__all__ = ["MAX_LINE_BYTES", "HTTPWatchStream", "decode_event", "error_from_watch_event"]

log = structlog.get_logger(__name__)

_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
_READ_SIZE = 64 * 1024
_DECODE_FAILURE = "unable to decode an event from the watch stream"

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest event line a watch stream buffers (client-go's streaming decoder ``maxBytes``)."""


class _LineTooLong(Exception):
    """The server sent more than ``max_line_bytes`` without a newline."""


def _internal_error(message: str) -> WatchEvent:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "code": 500,
    }
    return WatchEvent("ERROR", status)


def _is_decode_failure(event: WatchEvent) -> bool:
    message = event.object.get("message")
    return isinstance(message, str) and message.startswith(_DECODE_FAILURE)


def decode_event(line: bytes) -> WatchEvent:
    """Decode one line of a watch stream; a malformed line becomes an InternalError ERROR event."""
    try:
        raw = codec.loads(line)
    except ValueError as exc:
        return _internal_error(f"{_DECODE_FAILURE}: {exc}")
    if not isinstance(raw, dict):
        return _internal_error(f"{_DECODE_FAILURE}: not an object")
    kind = raw.get("type")
    obj = raw.get("object")
    if kind not in _EVENT_TYPES or not isinstance(obj, dict):
        return _internal_error(f"{_DECODE_FAILURE}: bad event type {kind!r}")
    return WatchEvent(cast(EventType, kind), obj)


def _chunked(response: urllib3.BaseHTTPResponse) -> bool:
    return (
        isinstance(response, urllib3.HTTPResponse) and response.chunked and response.supports_chunked_reads()
    )


def error_from_watch_event(event: WatchEvent) -> ApiError:
    """The typed API error an ERROR event carries (410 Expired → ``Gone``)."""
    status = event.object
    code = status.get("code")
    return error_from_status(status, code if isinstance(code, int) else 500)


class HTTPWatchStream:
    """An open watch response, iterated once for :class:`WatchEvent` values."""

    def __init__(
        self,
        response: urllib3.BaseHTTPResponse,
        *,
        resource_version: str | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._response = response
        self._max_line_bytes = max_line_bytes
        self._resource_version = resource_version or ""
        self._lock = threading.Lock()
        self._stopped = False
        self._closed = False
        self._iterating = False
        self._reading = False

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (events and bookmarks), or the starting one."""
        return self._resource_version

    @property
    def stopped(self) -> bool:
        return self._stopped

    def __enter__(self) -> HTTPWatchStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[WatchEvent]:
        with self._lock:
            if self._iterating or self._closed:
                raise RuntimeError("a watch stream can be iterated only once")
            self._iterating = True
        return self._events()

    def _events(self) -> Iterator[WatchEvent]:
        try:
            yield from self._decoded_events()
        except _LineTooLong:
            if not self._stopped:
                yield _internal_error(
                    f"{_DECODE_FAILURE}: object to decode was longer than maximum allowed size"
                )
        finally:
            self._close()

    def _decoded_events(self) -> Iterator[WatchEvent]:
        for line in self._lines():
            event = decode_event(line)
            if self._stopped:
                return
            if event.type != "ERROR":
                self._note_resource_version(event.object)
            yield event
            if event.type == "ERROR" and _is_decode_failure(event):
                return

    def _note_resource_version(self, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata")
        if isinstance(metadata, dict):
            rv = metadata.get("resourceVersion")
            if isinstance(rv, str) and rv:
                self._resource_version = rv

    def _raw_chunks(self) -> Iterator[bytes]:
        response = self._response
        if _chunked(response):
            yield from response.read_chunked(decode_content=True)
            return
        while chunk := response.read1(_READ_SIZE):
            yield chunk

    def _chunks(self) -> Iterator[bytes]:
        """Chunks as they arrive; ``_reading`` tells :meth:`stop` whether a read is in progress."""
        raw = self._raw_chunks()
        while True:
            with self._lock:
                if self._stopped:
                    return
                self._reading = True
            try:
                chunk = next(raw, None)
            except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
                # ValueError/AttributeError: the socket was shut down or closed by stop() mid-read.
                if self.stopped:
                    return
                raise connection_failed(exc, "watch stream broken") from exc
            finally:
                with self._lock:
                    self._reading = False
            if chunk is None:
                return
            yield chunk

    def _lines(self) -> Iterator[bytes]:
        """Non-blank lines; raises :class:`_LineTooLong` instead of buffering an overlong one."""
        limit = self._max_line_bytes
        pending = b""
        for chunk in self._chunks():
            if self._stopped:
                return
            if b"\n" not in chunk:
                if len(pending) + len(chunk) > limit:
                    raise _LineTooLong
                pending += chunk
                continue
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if len(line) > limit:
                    raise _LineTooLong
                if line.strip():
                    yield line
            if len(pending) > limit:
                raise _LineTooLong
        if pending.strip() and not self._stopped:
            yield pending

    def stop(self) -> None:
        """End the watch: wake a blocked reader and close the connection. Safe from any thread.

        A reader blocked in a read is woken by shutting the socket down and closes the response
        itself; otherwise the response is closed here at once.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            reading = self._reading
        if not reading:
            self._close()
            return
        try:
            self._response.shutdown()
        except (OSError, ValueError, RuntimeError, NotImplementedError):
            pass

    def _close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._response.close()
            self._response.release_conn()  # the pool reconnects this slot on its next use
        except (OSError, RuntimeError, urllib3.exceptions.HTTPError):
            pass

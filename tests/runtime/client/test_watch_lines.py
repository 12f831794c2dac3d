"""A watch stream over an in-memory response: lines split in every way, the line limit to the
byte, and which events move the resourceVersion."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from mcm.runtime.client.types import WatchEvent
from mcm.runtime.client.watch import HTTPWatchStream, error_from_watch_event


class Body:
    """A response that hands out the given pieces, one per read."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)
        self.closed = False
        self.released = False

    def read1(self, size: int) -> bytes:
        assert size > 0
        return self.pieces.pop(0) if self.pieces else b""

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        self.released = True

    def shutdown(self) -> None:
        self.closed = True


def event(kind: str, metadata: dict[str, Any] | None = None) -> bytes:
    obj: dict[str, Any] = {"kind": "Pod"}
    if metadata is not None:
        obj["metadata"] = metadata
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def stream(*pieces: bytes, **kwargs: Any) -> HTTPWatchStream:
    return HTTPWatchStream(Body(*pieces), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("events", "resource_version"),
    [
        ([event("ADDED", {"resourceVersion": "5"})], "5"),
        ([event("ADDED", {"resourceVersion": "5"}), event("MODIFIED", {"resourceVersion": ""})], "5"),
        ([event("ADDED", {"resourceVersion": "5"}), event("MODIFIED", {"resourceVersion": 6})], "5"),
        ([event("ADDED", {"resourceVersion": "5"}), event("MODIFIED", {})], "5"),
        ([event("ADDED", {"resourceVersion": "5"}), event("MODIFIED")], "5"),
        ([event("DELETED", {"resourceVersion": "7"}), event("BOOKMARK", {"resourceVersion": "9"})], "9"),
        ([event("ERROR", {"resourceVersion": "8"})], "3"),
        ([], "3"),
    ],
)
def test_which_events_move_the_resource_version(events: list[bytes], resource_version: str) -> None:
    watch = stream(*events, resource_version="3")
    assert len(list(watch)) == len(events)
    assert watch.resource_version == resource_version


def test_no_starting_resource_version_is_empty() -> None:
    assert stream().resource_version == ""


@pytest.mark.parametrize("cut", range(1, 40))
def test_two_events_cut_anywhere_are_two_events(cut: int) -> None:
    data = event("ADDED", {"resourceVersion": "1"}) + b"\n  \n" + event("DELETED", {"resourceVersion": "2"})
    watch = stream(data[:cut], data[cut:])
    assert [e.type for e in watch] == ["ADDED", "DELETED"]
    assert watch.resource_version == "2"


def _line_of(size: int) -> bytes:
    """A valid event line of exactly ``size`` bytes (without its newline)."""
    base = event("ADDED", {"name": ""})[:-1]
    padded = event("ADDED", {"name": "x" * (size - len(base))})[:-1]
    assert len(padded) == size
    return padded


@pytest.mark.parametrize(
    ("pieces", "ends_with_error"),
    [
        ((_line_of(100) + b"\n",), False),  # exactly the limit
        ((_line_of(101) + b"\n",), True),  # one byte over, in one piece
        ((_line_of(100)[:30], _line_of(100)[30:] + b"\n"), False),
        ((_line_of(101)[:30], _line_of(101)[30:] + b"\n"), True),  # over across two pieces
        ((_line_of(101)[:30], _line_of(101)[30:]), True),  # over, no newline yet
        ((_line_of(100)[:30], _line_of(100)[30:]), False),  # the last line without a newline
        ((b"\n" + _line_of(101)[:99], _line_of(101)[99:], b"\n"), True),
    ],
)
def test_the_line_limit_holds_to_the_byte(pieces: tuple[bytes, ...], ends_with_error: bool) -> None:
    events = list(stream(*pieces, max_line_bytes=100))
    if ends_with_error:
        assert [e.type for e in events] == ["ERROR"]
        assert "longer than maximum allowed size" in events[0].object["message"]
        assert error_from_watch_event(events[0]).code == 500
    else:
        assert [e.type for e in events] == ["ADDED"]


def test_the_response_is_closed_and_released_when_the_stream_ends() -> None:
    body = Body(event("ADDED"))
    watch = HTTPWatchStream(body)  # type: ignore[arg-type]
    assert [e.type for e in watch] == ["ADDED"]
    assert body.closed and body.released


def error_event(status: dict[str, Any]) -> bytes:
    return json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"


@pytest.mark.parametrize(
    "status",
    [
        {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 1 (5)"},
        {"kind": "Status", "code": 500},
        {"kind": "Status", "message": 7},
    ],
)
def test_an_error_event_from_the_server_does_not_end_the_stream(status: dict[str, Any]) -> None:
    events = list(stream(error_event(status) + event("ADDED", {"resourceVersion": "5"})))
    assert [e.type for e in events] == ["ERROR", "ADDED"]
    assert events[0].object == status


def test_an_undecodable_line_ends_the_stream() -> None:
    events = list(stream(b"{not json\n" + event("ADDED", {"resourceVersion": "5"})))
    assert [e.type for e in events] == ["ERROR"]
    assert events[0].object["message"].startswith("unable to decode an event from the watch stream")


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        ({"code": 410, "reason": "Expired"}, 410, "Expired"),
        ({"code": 410}, 410, "Gone"),
        ({"code": "410"}, 500, "InternalError"),
        ({}, 500, "InternalError"),
        ({"code": 403, "reason": "Forbidden"}, 403, "Forbidden"),
    ],
)
def test_the_error_an_error_event_carries(status: dict[str, Any], code: int, reason: str) -> None:
    error = error_from_watch_event(WatchEvent("ERROR", status))
    assert (error.code, error.reason) == (code, reason)


class BlockingBody(Body):
    """A response whose read blocks until the socket is shut down (as a silent server's)."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.Event()
        self.shut_down = threading.Event()

    def read1(self, size: int) -> bytes:
        self.reading.set()
        self.shut_down.wait(10)
        return b""

    def shutdown(self) -> None:
        self.shut_down.set()


def test_stop_shuts_the_socket_down_under_a_blocked_reader() -> None:
    body = BlockingBody()
    watch = HTTPWatchStream(body)  # type: ignore[arg-type]
    events: list[WatchEvent] = []
    thread = threading.Thread(target=lambda: events.extend(watch), daemon=True)
    thread.start()
    assert body.reading.wait(5)
    watch.stop()
    assert body.shut_down.is_set(), "stop() did not wake the reader"
    thread.join(5)
    assert not thread.is_alive()
    assert events == [] and body.closed and body.released

"""Watch streams over HTTP: line framing, resourceVersion tracking, errors, stop from a thread."""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

import pytest

from mcm.runtime.client import ClusterClient, ListOptions, error_from_watch_event, errors
from mcm.runtime.client.resources import PODS
from mcm.runtime.client.watch import HTTPWatchStream, decode_event
from tests.runtime.client.stub_server import Reply, Request, StubServer, status_body


def _event(kind: str, rv: str, name: str = "p") -> bytes:
    obj = {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def _serve(stub: StubServer, *chunks: bytes | None) -> Reply:
    reply = Reply(200, chunks=list(chunks))
    stub.handler = lambda r: reply
    return reply


def test_events_split_across_chunks_in_any_way(stub: StubServer, stub_client: ClusterClient) -> None:
    data = _event("ADDED", "5", "a") + _event("MODIFIED", "6", "a") + _event("DELETED", "7", "a")
    _serve(stub, data[:10], data[10:70], data[70:71], data[71:])
    with stub_client.resource(PODS).watch(namespace="ns", resource_version="4") as stream:
        events = list(stream)
    assert [(e.type, e.object["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "5"),
        ("MODIFIED", "6"),
        ("DELETED", "7"),
    ]
    assert stream.resource_version == "7"


def test_request_carries_options_and_watch_flag(stub: StubServer, stub_client: ClusterClient) -> None:
    _serve(stub)
    options = ListOptions(label_selector="a=b", resource_version="10", timeout_seconds=300)
    list(stub_client.resource(PODS).watch(options, allow_watch_bookmarks=True))
    request: Request = stub.requests[-1]
    assert request.path == "/api/v1/pods"
    assert request.query == {
        "labelSelector": "a=b",
        "resourceVersion": "10",
        "timeoutSeconds": "300",
        "allowWatchBookmarks": "true",
        "watch": "true",
    }


def test_bookmarks_are_yielded_and_advance_the_resource_version(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "42"}}}
    _serve(stub, _event("ADDED", "5"), json.dumps(bookmark).encode() + b"\n")
    stream = stub_client.resource(PODS).watch(resource_version="1", allow_watch_bookmarks=True)
    assert stream.resource_version == "1"
    assert [e.type for e in stream] == ["ADDED", "BOOKMARK"]
    assert stream.resource_version == "42"


def test_expired_error_event_is_yielded_and_maps_to_gone(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    expired = status_body(410, "Expired", "too old resource version: 3 (10)")
    _serve(stub, json.dumps({"type": "ERROR", "object": expired}).encode() + b"\n")
    stream = stub_client.resource(PODS).watch(resource_version="3")
    events = list(stream)
    assert [e.type for e in events] == ["ERROR"]
    assert events[0].object == expired
    err = error_from_watch_event(events[0])
    assert isinstance(err, errors.Gone) and errors.is_resource_expired(err)
    assert str(err) == "too old resource version: 3 (10)"
    assert stream.resource_version == "3"


def test_undecodable_line_yields_internal_error_and_ends(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    _serve(stub, _event("ADDED", "5"), b"{not json\n", _event("ADDED", "6"))
    events = list(stub_client.resource(PODS).watch())
    assert [e.type for e in events] == ["ADDED", "ERROR"]
    assert isinstance(error_from_watch_event(events[1]), errors.InternalError)


@pytest.mark.parametrize("line", [b"[1,2]", b'{"type":"WHAT","object":{}}', b'{"type":"ADDED","object":3}'])
def test_malformed_events_decode_to_errors(line: bytes) -> None:
    event = decode_event(line)
    assert event.type == "ERROR"
    assert event.object["code"] == 500


def test_last_line_without_newline_is_delivered(stub: StubServer, stub_client: ClusterClient) -> None:
    _serve(stub, _event("ADDED", "5").rstrip(b"\n"))
    assert [e.type for e in stub_client.resource(PODS).watch()] == ["ADDED"]


def test_non_2xx_watch_raises_before_streaming(stub: StubServer, stub_client: ClusterClient) -> None:
    stub.handler = lambda r: Reply(400, status_body(400, "BadRequest", "bad resourceVersion"))
    with pytest.raises(errors.BadRequest):
        stub_client.resource(PODS).watch(resource_version="abc")


def _iterate_in_thread(stream: HTTPWatchStream) -> tuple[threading.Thread, list[Any], list[BaseException]]:
    events: list[Any] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            for event in stream:
                events.append(event)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, events, failures


def test_stop_from_another_thread_wakes_a_blocked_reader(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    reply = _serve(stub, _event("ADDED", "5"), None, _event("ADDED", "6"))
    stream = stub_client.resource(PODS).watch()
    thread, events, failures = _iterate_in_thread(stream)
    try:
        deadline = threading.Event()
        while not events and not deadline.wait(0.01):
            pass
        stream.stop()
        thread.join(2)
        assert not thread.is_alive()
        assert [e.object["metadata"]["resourceVersion"] for e in events] == ["5"]
        assert failures == []
        stream.stop()  # idempotent
    finally:
        reply.hold.set()


def test_stop_before_iteration_closes_the_response(stub: StubServer, stub_client: ClusterClient) -> None:
    reply = _serve(stub, None)
    stream = stub_client.resource(PODS).watch()
    stream.stop()
    reply.hold.set()
    assert stream.stopped
    with pytest.raises(RuntimeError):
        iter(stream)


def test_connection_reset_mid_stream_raises_connection_failed(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    # A raw server that sends headers and one chunk, then resets the connection.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        first = _event("ADDED", "5")
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n" % (len(first), first)
        )
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    stub_client.transport._base = f"http://127.0.0.1:{port}"
    stream = stub_client.resource(PODS).watch()
    events = []
    with pytest.raises(errors.ConnectionFailed) as info:
        for event in stream:
            events.append(event)
    assert [e.type for e in events] == ["ADDED"]
    assert not info.value.refused
    server.join(5)
    listener.close()


def test_stop_while_the_consumer_holds_an_event_closes_at_once(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    reply = _serve(stub, _event("ADDED", "5"), _event("ADDED", "6"), None)
    stream = stub_client.resource(PODS).watch()
    try:
        events = iter(stream)
        first = next(events)
        stream.stop()  # same thread, iterator suspended at a yield: nothing is reading
        assert stream._response.closed
        assert list(events) == []
        assert first.object["metadata"]["resourceVersion"] == "5"
    finally:
        reply.hold.set()


def test_a_silent_watch_ends_after_its_timeout_plus_the_read_margin(
    stub: StubServer, stub_client: ClusterClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcm.runtime.client import rest

    monkeypatch.setattr(rest, "WATCH_READ_TIMEOUT_MARGIN", 0.2)
    reply = _serve(stub, _event("ADDED", "5"), None)  # then silence: the server never ends it
    ended = threading.Event()
    seen: list[str] = []

    def consume() -> None:
        try:
            for event in stub_client.resource(PODS).watch(timeout_seconds=0, resource_version="1"):
                seen.append(event.type)
        except errors.ConnectionFailed:
            pass
        ended.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        assert ended.wait(5.0), "a silent watch hangs without a client read timeout"
        assert seen == ["ADDED"]
    finally:
        reply.hold.set()
        thread.join(5.0)


def test_a_line_without_end_is_not_buffered_without_bound(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    """Issue 10: a server that never sends a newline used to grow the line buffer for ever.

    client-go's streaming decoder stops at 16 MiB with "object to decode was longer than maximum
    allowed size"; the stream watcher turns that into one InternalError ERROR event, as here.
    """
    endless = b"x" * 4096
    reply = _serve(stub, _event("ADDED", "5"), *([endless] * 64), None)
    try:
        response = stub_client.transport.stream("/api/v1/pods", query={"watch": "true"}, read_timeout=5)
        stream = HTTPWatchStream(response, max_line_bytes=64 * 1024)
        events = list(stream)
        assert [e.type for e in events] == ["ADDED", "ERROR"]
        assert events[1].object["code"] == 500
        assert "longer than maximum allowed size" in events[1].object["message"]
        assert stream._response.closed
    finally:
        reply.hold.set()


def test_the_default_line_limit_is_client_gos() -> None:
    from mcm.runtime.client.watch import MAX_LINE_BYTES

    assert MAX_LINE_BYTES == 16 * 1024 * 1024


def test_a_watch_used_as_a_context_manager_is_stopped_at_the_end_of_the_block(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    reply = _serve(stub, _event("ADDED", "5"), None)
    try:
        with stub_client.resource(PODS).watch() as stream:
            assert not stream.stopped
        assert stream.stopped
        with pytest.raises(RuntimeError):
            iter(stream)
    finally:
        reply.hold.set()


def test_a_watch_stream_can_be_iterated_only_once(stub: StubServer, stub_client: ClusterClient) -> None:
    """Two readers of one response would split its events between them."""
    reply = _serve(stub, _event("ADDED", "5"), None)
    stream = stub_client.resource(PODS).watch()
    try:
        events = iter(stream)
        with pytest.raises(RuntimeError, match="only once"):
            iter(stream)
        assert next(events).object["metadata"]["resourceVersion"] == "5"
    finally:
        stream.stop()
        reply.hold.set()


def test_a_line_one_byte_over_the_limit_across_two_chunks_ends_the_watch_at_once(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    """The limit counts what is buffered plus the chunk that just came: the byte that takes a
    line over it ends the watch, without waiting for more of the line."""
    limit = 64 * 1024
    reply = _serve(stub, b"x" * limit, b"y", None)
    try:
        response = stub_client.transport.stream("/api/v1/pods", query={"watch": "true"}, read_timeout=5)
        events = list(HTTPWatchStream(response, max_line_bytes=limit))
        assert [(e.type, e.object["code"]) for e in events] == [("ERROR", 500)]
        assert "longer than maximum allowed size" in events[0].object["message"]
    finally:
        reply.hold.set()


def test_a_watch_answered_with_a_content_length_body_is_read_too(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    stub.handler = lambda r: Reply(200, _event("ADDED", "5") + _event("DELETED", "6"))
    with stub_client.resource(PODS).watch() as stream:
        events = list(stream)
    assert [e.type for e in events] == ["ADDED", "DELETED"]
    assert stream.resource_version == "6"

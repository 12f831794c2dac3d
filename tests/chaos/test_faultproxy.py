"""FaultProxy: forwarding, resets, refusals, blackholes, cut writes and latency, on loopback."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mcm.testing.faultproxy import FaultProxy


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.committed = threading.Event()
        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        del request, client_address  # connections the proxy reset on purpose


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recorder

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if len(body) == length:
            self.server.bodies.append((self.command, body))
            self.server.committed.set()
        data = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815 - http.server names


@pytest.fixture
def server() -> Iterator[Recorder]:
    recorder = Recorder()
    thread = threading.Thread(target=recorder.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield recorder
    recorder.shutdown()
    recorder.server_close()


@pytest.fixture
def proxy(server: Recorder) -> Iterator[FaultProxy]:
    with FaultProxy(("127.0.0.1", server.server_address[1]), seed=1) as running:
        yield running


def _request(proxy: FaultProxy, method: str = "GET", body: bytes = b"") -> bytes:
    connection = http.client.HTTPConnection(proxy.host, proxy.port, timeout=5)
    try:
        connection.request(method, "/x", body=body or None)
        return connection.getresponse().read()
    finally:
        connection.close()


def test_forwards_requests_and_answers(proxy: FaultProxy, server: Recorder) -> None:
    assert _request(proxy, "POST", b"hello") == b'{"ok":true}'
    assert server.bodies == [("POST", b"hello")]
    assert proxy.stats.accepted == 1
    assert proxy.stats.writes_seen == 1


def test_reset_all_resets_open_connections_both_ways(proxy: FaultProxy) -> None:
    client = socket.create_connection((proxy.host, proxy.port), timeout=5)
    deadline = time.monotonic() + 5
    while proxy.open_connections == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.reset_all() == 1
    with pytest.raises(ConnectionResetError):
        client.recv(10)
    client.close()
    assert proxy.stats.resets == 1
    assert proxy.open_connections == 0


def test_refused_connections_are_reset_at_once(proxy: FaultProxy, server: Recorder) -> None:
    proxy.refuse_new = 1.0
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError)):
        _request(proxy)
    assert proxy.stats.refused == 1
    proxy.clear()
    assert _request(proxy) == b'{"ok":true}'
    assert server.bodies == [("GET", b"")]


def test_blackhole_holds_bytes_until_healed(proxy: FaultProxy, server: Recorder) -> None:
    proxy.blackhole()
    answers: list[bytes] = []
    thread = threading.Thread(target=lambda: answers.append(_request(proxy, "PUT", b"held")))
    thread.start()
    assert not server.committed.wait(0.5)
    assert proxy.blackholed
    proxy.heal()
    thread.join(5)
    assert answers == [b'{"ok":true}']
    assert server.bodies == [("PUT", b"held")]


def test_heal_with_reset_drops_the_held_connections(proxy: FaultProxy, server: Recorder) -> None:
    proxy.blackhole()
    errors: list[BaseException] = []

    def send() -> None:
        try:
            _request(proxy, "POST", b"lost")
        except (OSError, http.client.HTTPException) as exc:
            errors.append(exc)

    thread = threading.Thread(target=send)
    thread.start()
    deadline = time.monotonic() + 5
    while proxy.stats.held_chunks == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.stats.held_chunks == 1
    proxy.heal(reset=True)
    thread.join(5)
    assert len(errors) == 1
    assert server.bodies == []


def test_writes_cut_mid_request_never_reach_the_server(proxy: FaultProxy, server: Recorder) -> None:
    proxy.reset_writes, proxy.reset_writes_when = 1.0, "mid"
    assert _request(proxy, "GET") == b'{"ok":true}'
    with pytest.raises((OSError, http.client.HTTPException)):
        _request(proxy, "POST", b"x" * 5000)
    assert server.bodies == [("GET", b"")]
    assert proxy.stats.writes_cut_mid == 1


def test_writes_cut_after_the_request_were_committed(proxy: FaultProxy, server: Recorder) -> None:
    proxy.reset_writes, proxy.reset_writes_when = 1.0, "after"
    with pytest.raises((OSError, http.client.HTTPException)):
        _request(proxy, "DELETE", b"gone")
    assert server.bodies == [("DELETE", b"gone")]
    assert proxy.stats.writes_cut_after == 1


def test_latency_delays_each_answer(proxy: FaultProxy) -> None:
    proxy.latency = 0.2
    started = time.monotonic()
    assert _request(proxy) == b'{"ok":true}'
    assert time.monotonic() - started >= 0.4  # the request and the answer are delayed
    assert proxy.stats.delayed_chunks >= 2


def test_only_loopback_addresses() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy(("10.0.0.1", 80))
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy(("127.0.0.1", 80), host="0.0.0.0")

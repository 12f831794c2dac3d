"""Issue 26 #5: the metrics/health listener bounds idle clients, connections and concurrency.

The chart binds it on all interfaces behind a cluster-wide Service: 60 idle connections used to
hold 60 threads for ever, and a client that went away printed a raw BrokenPipeError traceback
outside the JSON log.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from mcm.app.server import HealthServer

IDLE = 1000


def _server(**kwargs: Any) -> HealthServer:
    checks: dict[str, Any] = {"healthz": lambda: None, "readyz": lambda: None}
    checks.update({k: kwargs.pop(k) for k in list(kwargs) if k in checks})
    server = HealthServer("127.0.0.1", 0, **checks, **kwargs)
    server.start()
    return server


def _get(server: HealthServer, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def idle_sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def test_a_thousand_idle_connections_hold_no_threads_and_do_not_lock_out_probes(
    idle_sockets: list[socket.socket],
) -> None:
    server = _server()
    threads_before = threading.active_count()
    try:
        for _ in range(IDLE):
            idle_sockets.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        for _ in range(5):  # accepted after the idle ones: answered while they stay open
            assert _get(server, "/healthz") == (200, b"ok")
            assert _get(server, "/readyz")[0] == 200
        assert threading.active_count() - threads_before < 10
        assert server.open_connections <= server.max_connections
    finally:
        server.stop()


def test_idle_connections_are_closed_after_the_idle_timeout(idle_sockets: list[socket.socket]) -> None:
    server = _server(idle_timeout=0.3)
    try:
        for _ in range(20):
            idle_sockets.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        assert _until(lambda: server.open_connections == 0)
        for sock in idle_sockets:
            assert sock.recv(1) == b"", "the server closed the idle connection"
    finally:
        server.stop()


def test_requests_beyond_the_concurrency_cap_get_503_at_once() -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow_healthz() -> None:
        entered.set()
        release.wait(10)

    server = _server(healthz=slow_healthz, max_in_flight=1)
    try:
        first: list[tuple[int, bytes]] = []
        worker = threading.Thread(target=lambda: first.append(_get(server, "/healthz", 10)))
        worker.start()
        assert entered.wait(5)
        started = time.monotonic()
        assert _get(server, "/readyz")[0] == 503
        assert time.monotonic() - started < 5  # not held until the release (10 s)
        release.set()
        worker.join(10)
        assert first == [(200, b"ok")]
    finally:
        release.set()
        server.stop()


def test_a_client_that_goes_away_is_one_log_line_not_a_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    answered = threading.Event()
    gone = threading.Event()

    def healthz_after_the_client_left() -> None:
        answered.set()
        gone.wait(10)

    server = _server(healthz=healthz_after_the_client_left)
    try:
        with capture_logs() as logs:
            for _ in range(3):
                answered.clear()
                gone.clear()
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert answered.wait(5)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()  # a reset: the answer has nowhere to go
                gone.set()
            assert _until(lambda: sum(e["event"] == "http_client_disconnected" for e in logs) >= 1)
            assert _until(lambda: server.open_connections == 0)
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", b"405"),
        (b"garbage\r\n\r\n", b"400"),
        (b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 10_000 + b"\r\n\r\n", b"431"),
    ],
)
def test_bad_requests_get_a_status(request_bytes: bytes, status: bytes) -> None:
    server = _server()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(request_bytes)
            answer = sock.recv(1024)
        assert answer.split(b" ")[1] == status
    finally:
        server.stop()

"""The lean HTTP/1.1 pool at its edges: default ports and the Host header, TLS keep-alive and
deadlines, heads that end oddly, 101 and 102 answers, long chunked bodies, early answers,
surplus connections and the length of refusal messages."""

from __future__ import annotations

import gc
import select
import socket
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcm.emulator.kubeconfig import TlsMaterial
from mcm.runtime.client import http11
from mcm.runtime.client.http11 import HTTP11Pool, InvalidRequest, ProtocolError, tls_context
from tests.runtime.client.raw_server import RawServer, fixed, read_head

Serve = Callable[..., RawServer]

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def pool_for(server: RawServer, **kwargs: Any) -> HTTP11Pool:
    return HTTP11Pool("http", "127.0.0.1", server.port, **kwargs)


def tls_server(serve: Serve, pki: TlsMaterial, script: Any = None, **kwargs: Any) -> RawServer:
    context = pki.server_context()
    return serve(script, wrap=lambda s: context.wrap_socket(s, server_side=True), **kwargs)


def within(seconds: float, call: Callable[[], object]) -> BaseException | object:
    """Run ``call`` in a thread; its result or exception, failing the test if it is still
    running after ``seconds`` (a request that ignores its deadline)."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: the deadline was not kept"
    return outcome[0]


# --- default ports and the Host header ----------------------------------------------------------


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[tuple[str, int]], list[int]]]:
    """Every address the pool dials is recorded; the call reaches the port in ``target[0]``."""
    addresses: list[tuple[str, int]] = []
    target: list[int] = []
    connect = socket.create_connection

    def recording(address: tuple[str, int], timeout: float) -> socket.socket:
        addresses.append(address)
        return connect(("127.0.0.1", target[0]), timeout)

    monkeypatch.setattr(http11.socket, "create_connection", recording)
    yield addresses, target


@pytest.mark.parametrize(
    ("port", "dial", "host_header"),
    [
        (None, 80, "kube.example"),
        (80, 80, "kube.example"),
        (8080, 8080, "kube.example:8080"),
        (443, 443, "kube.example:443"),
    ],
)
def test_http_default_port_and_host_header(
    serve: Serve, dialled: Any, port: int | None, dial: int, host_header: str
) -> None:
    addresses, target = dialled
    server = serve(fixed(OK))
    target.append(server.port)
    assert HTTP11Pool("http", "kube.example", port).request("GET", "/", {}, timeout=5).status == 200
    assert addresses == [("kube.example", dial)]
    assert server.requests[0].startswith(f"GET / HTTP/1.1\r\nHost: {host_header}\r\n".encode())


@pytest.mark.parametrize(
    ("host", "port", "dial", "host_header"),
    [
        ("kube.example", None, 443, "kube.example"),
        ("kube.example", 443, 443, "kube.example"),
        ("kube.example", 6443, 6443, "kube.example:6443"),
        ("kube.example", 80, 80, "kube.example:80"),
        ("[::1]", None, 443, "[::1]"),
        ("::1", 6443, 6443, "[::1]:6443"),
    ],
)
def test_https_default_port_and_host_header(
    serve: Serve, pki: TlsMaterial, dialled: Any, host: str, port: int | None, dial: int, host_header: str
) -> None:
    addresses, target = dialled
    server = tls_server(serve, pki, fixed(OK))
    target.append(server.port)
    pool = HTTP11Pool("https", host, port, ssl_context=tls_context(verify=False))
    assert pool.request("GET", "/", {}, timeout=5).status == 200
    assert addresses == [(host.strip("[]"), dial)]
    assert server.requests[0].startswith(f"GET / HTTP/1.1\r\nHost: {host_header}\r\n".encode())


# --- TLS: keep-alive and the deadline -----------------------------------------------------------


def test_a_tls_connection_is_kept_alive(serve: Serve, pki: TlsMaterial) -> None:
    server = tls_server(serve, pki, fixed(OK))
    pool = HTTP11Pool("https", "127.0.0.1", server.port, ssl_context=tls_context(ca_file=str(pki.ca_cert)))
    for _ in range(3):
        assert pool.request("GET", "/", {}, timeout=5).data == b"{}"
    assert server.connections == 1


def test_a_silent_tls_server_times_out_at_the_deadline(serve: Serve, pki: TlsMaterial) -> None:
    def silent(sock: socket.socket) -> None:
        read_head(sock)
        server.stopped.wait(30)

    server = tls_server(serve, pki, handler=silent)
    pool = HTTP11Pool("https", "127.0.0.1", server.port, ssl_context=tls_context(verify=False))
    assert isinstance(within(10, lambda: pool.request("GET", "/", {}, timeout=0.5)), TimeoutError)


def test_a_server_that_stops_reading_a_large_body_times_out_at_the_deadline(serve: Serve) -> None:
    def deaf(sock: socket.socket) -> None:
        read_head(sock)
        server.stopped.wait(30)

    server = serve(handler=deaf)
    body = b"x" * (64 << 20)  # far more than the socket buffers hold
    outcome = within(10, lambda: pool_for(server).request("PUT", "/", {}, body, timeout=0.5))
    assert isinstance(outcome, TimeoutError)


# --- fresh and reused connections ---------------------------------------------------------------


def test_a_fresh_connection_closed_without_an_answer_is_not_retried(serve: Serve) -> None:
    """Only a reused connection may have been closed by the server while idle; a fresh one
    that ends without an answer is the server's answer to this request."""
    server = serve(fixed(b"", close=True))
    with pytest.raises(ProtocolError, match="closed the connection before answering"):
        pool_for(server).request("GET", "/", {}, timeout=5)
    assert server.connections == 1


def test_an_early_answer_leaves_no_connection_in_the_pool(serve: Serve) -> None:
    def refuse_large(sock: socket.socket) -> None:
        read_head(sock)
        sock.sendall(b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\n\r\n")

    pool = pool_for(serve(handler=refuse_large))
    assert pool.request("PUT", "/big", {}, b"x" * (32 << 20), timeout=30).status == 413
    assert not pool._idle


def unclosed_sockets(server: RawServer, call: Callable[[], object]) -> list[str]:
    """The sockets to ``server`` that ``call`` left for the garbage collector to close
    (ResourceWarnings). Garbage left by earlier tests in this process is collected first, and
    sockets to other servers are not counted (they are not this test's)."""
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
        gc.collect()
    mine = f"raddr=('127.0.0.1', {server.port})"
    return [
        str(w.message) for w in caught if issubclass(w.category, ResourceWarning) and mine in str(w.message)
    ]


def test_connections_beyond_maxsize_are_closed_not_left_to_the_collector(serve: Serve) -> None:
    server = serve(fixed(OK))
    pool = pool_for(server, maxsize=0)
    assert unclosed_sockets(server, lambda: pool.request("GET", "/", {}, timeout=5)) == []
    assert not pool._idle


def test_an_idle_connection_the_server_closed_is_closed_before_a_fresh_one_is_used(serve: Serve) -> None:
    server = serve(fixed(OK, close=True))  # closes after answering, without saying so
    pool = pool_for(server)
    assert pool.request("GET", "/", {}, timeout=5).status == 200
    assert select.select([pool._idle[-1].sock], [], [], 10)[0]  # its end has arrived
    assert unclosed_sockets(server, lambda: pool.request("GET", "/", {}, timeout=5)) == []
    assert server.connections == 2


# --- heads ---------------------------------------------------------------------------------------


def test_a_head_ending_with_lf_lf_ends_at_the_first_blank_line(serve: Serve) -> None:
    # The blank line is the second LF; the CRLF after it is the body (as Go reads lines).
    server = serve(fixed(b"HTTP/1.1 200 OK\nContent-Length: 2\n\n\r\n"))
    pool = pool_for(server)
    assert pool.request("GET", "/", {}, timeout=5).data == b"\r\n"
    assert pool.request("GET", "/", {}, timeout=5).data == b"\r\n"
    assert server.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"\n\nHTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
        b"\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ],
)
def test_an_answer_starting_with_a_blank_line_is_refused_at_once(serve: Serve, answer: bytes) -> None:
    server = serve(handler=lambda sock: (read_head(sock), sock.sendall(answer), server.stopped.wait(30)))
    outcome = within(10, lambda: pool_for(server).request("GET", "/", {}, timeout=3))
    assert isinstance(outcome, ProtocolError)


# --- 1xx answers ---------------------------------------------------------------------------------


def test_101_is_a_final_answer_without_a_body_and_closes_the_connection(serve: Serve) -> None:
    switching = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    server = serve(handler=lambda sock: (read_head(sock), sock.sendall(switching), server.stopped.wait(30)))
    pool = pool_for(server)
    outcome = within(10, lambda: pool.request("GET", "/", {}, timeout=3))
    assert not isinstance(outcome, BaseException), outcome
    assert (outcome.status, outcome.data) == (101, b"")  # type: ignore[attr-defined]
    assert not pool._idle


def test_102_is_skipped_like_any_interim_answer(serve: Serve) -> None:
    processing = b"HTTP/1.1 102 Processing\r\n\r\n"
    response = pool_for(serve(fixed(processing + processing + OK))).request("GET", "/", {}, timeout=5)
    assert (response.status, response.data) == (200, b"{}")


# --- chunked bodies -----------------------------------------------------------------------------


def test_a_long_chunked_body_of_many_chunks_is_read_whole(serve: Serve) -> None:
    chunk = b"0123456789abcdef" * 64  # 1 KiB
    body = b"".join(b"400\r\n" + chunk + b"\r\n" for _ in range(200)) + b"0\r\n\r\n"
    server = serve(fixed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body))
    pool = pool_for(server)
    assert pool.request("GET", "/", {}, timeout=10).data == chunk * 200
    assert pool.request("GET", "/", {}, timeout=10).data == chunk * 200
    assert server.connections == 1


# --- refusals: messages name a bounded prefix ----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "message"),
    [
        ("BAD METHOD" + "m" * 100, "/", "invalid method " + repr(("BAD METHOD" + "m" * 100)[:80])),
        ("GET", "/" + "p" * 100 + " x", "invalid request target " + repr(("/" + "p" * 100)[:80])),
    ],
)
def test_a_refused_method_or_target_is_quoted_up_to_80_characters(
    serve: Serve, method: str, target: str, message: str
) -> None:
    server = serve(fixed(OK))
    with pytest.raises(InvalidRequest) as raised:
        pool_for(server).request(method, target, {}, timeout=5)
    assert str(raised.value).split(":")[0] == message
    assert server.connections == 0


def test_a_connection_that_ends_after_an_interim_answer_is_not_retried(serve: Serve) -> None:
    """An answer had begun (a 100 Continue): the server's end is its answer, not a stale socket."""
    server = serve(fixed(b"HTTP/1.1 100 Continue\r\n\r\n", close=True))
    with pytest.raises(ProtocolError, match="closed the connection before answering"):
        pool_for(server).request("GET", "/", {}, timeout=5)
    assert server.connections == 1


def test_a_chunked_answer_arriving_a_few_bytes_at_a_time_is_read_whole(serve: Serve) -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )

    def dribble(sock: socket.socket) -> None:
        read_head(sock)
        for start in range(0, len(answer), 3):
            sock.sendall(answer[start : start + 3])
            if server.stopped.wait(0.002):  # pacing only: the answer is right however it arrives
                return

    server = serve(handler=dribble)
    assert pool_for(server).request("GET", "/", {}, timeout=10).data == b"hello world"

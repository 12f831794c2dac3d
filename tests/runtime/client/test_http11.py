"""The lean HTTP/1.1 pool: framing, keep-alive, stale connections, failures, TLS."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from mcm.emulator.kubeconfig import make_tls_material, tls_available
from mcm.runtime.client.http11 import HTTP11Pool, ProtocolError, tls_context
from tests.runtime.client.raw_server import RawServer, fixed

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def pool_for(server: RawServer, **kwargs: object) -> HTTP11Pool:
    return HTTP11Pool("http", "127.0.0.1", server.port, **kwargs)  # type: ignore[arg-type]


def test_a_content_length_answer_and_the_request_as_sent(serve: Callable[..., RawServer]) -> None:
    server = serve(fixed(OK))
    pool = pool_for(server)
    response = pool.request("PUT", "/api/v1/x?a=b", {"Accept": "application/json"}, b'{"k":1}', timeout=5)
    assert (response.status, response.reason, response.data) == (200, "OK", b"{}")
    assert response.headers.get("content-type") == "application/json"
    assert response.headers["Content-Type"] == "application/json"
    sent = server.requests[0]
    assert sent.startswith(b"PUT /api/v1/x?a=b HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nAccept: application/json\r\n" in sent
    assert b"\r\nContent-Length: 7\r\n" in sent
    assert sent.endswith(b'\r\n\r\n{"k":1}')


def test_keep_alive_reuses_one_connection(serve: Callable[..., RawServer]) -> None:
    server = serve(fixed(OK))
    pool = pool_for(server)
    for _ in range(5):
        assert pool.request("GET", "/", {}, timeout=5).status == 200
    assert server.connections == 1


def test_a_chunked_answer_with_extensions_and_trailers(serve: Callable[..., RawServer]) -> None:
    answer = (
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    server = serve(fixed(answer))
    pool = pool_for(server)
    first = pool.request("POST", "/", {}, b"{}", timeout=5)
    assert (first.status, first.data) == (201, b"abc0123456789abcdef")
    assert pool.request("GET", "/", {}, timeout=5).data == b"abc0123456789abcdef"
    assert server.connections == 1


def test_an_answer_framed_by_the_connection_end_closes_it(serve: Callable[..., RawServer]) -> None:
    server = serve(fixed(b"HTTP/1.1 200 OK\r\n\r\nwhole body", close=True))
    pool = pool_for(server)
    assert pool.request("GET", "/", {}, timeout=5).data == b"whole body"
    assert pool.request("GET", "/", {}, timeout=5).data == b"whole body"
    assert server.connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ],
)
def test_connection_close_and_http10_are_not_reused(serve: Callable[..., RawServer], answer: bytes) -> None:
    server = serve(fixed(answer))
    pool = pool_for(server)
    pool.request("GET", "/", {}, timeout=5)
    pool.request("GET", "/", {}, timeout=5)
    assert server.connections == 2


def test_interim_answers_are_skipped_and_204_has_no_body(serve: Callable[..., RawServer]) -> None:
    server = serve(fixed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
    pool = pool_for(server)
    response = pool.request("DELETE", "/", {}, timeout=5)
    assert (response.status, response.data) == (204, b"")
    assert pool.request("DELETE", "/", {}, timeout=5).status == 204
    assert server.connections == 1


def test_a_get_on_a_connection_the_server_closed_is_sent_again(serve: Callable[..., RawServer]) -> None:
    # The server answers the first request of each connection and drops the second unanswered:
    # what a reused connection looks like when the server closed it at the moment it was sent.
    server = serve(lambda request, index: (OK, False) if index == 0 else (b"", True))
    pool = pool_for(server)
    pool.request("GET", "/", {}, timeout=5)
    assert pool.request("GET", "/", {}, timeout=5).status == 200
    assert server.connections == 2


def test_a_write_on_a_connection_the_server_closed_is_not_sent_again(
    serve: Callable[..., RawServer],
) -> None:
    server = serve(lambda request, index: (OK, False) if index == 0 else (b"", True))
    pool = pool_for(server)
    pool.request("POST", "/", {}, b"{}", timeout=5)
    with pytest.raises(ProtocolError, match="closed the connection before answering"):
        pool.request("POST", "/", {}, b"{}", timeout=5)
    assert len(server.requests) == 2


def test_an_idle_connection_the_server_closed_is_not_used(serve: Callable[..., RawServer]) -> None:
    server = serve(fixed(OK))
    pool = pool_for(server)
    pool.request("POST", "/", {}, b"{}", timeout=5)
    server.close_idle()
    for _ in range(100):  # the FIN arrives asynchronously
        if pool._idle and pool._idle[-1].dropped():
            break
        threading.Event().wait(0.01)
    assert pool.request("POST", "/", {}, b"{}", timeout=5).status == 200
    assert server.connections == 2


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"garbage\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "body ended after 5 of 10"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nBroken header\r\n\r\n", "malformed header line"),
        (b"", "closed the connection before answering"),
    ],
)
def test_a_malformed_answer_is_a_protocol_error_and_the_connection_is_dropped(
    serve: Callable[..., RawServer], answer: bytes, message: str
) -> None:
    server = serve(fixed(answer, close=True))
    pool = pool_for(server)
    with pytest.raises(ProtocolError, match=message):
        pool.request("GET", "/", {}, timeout=5)
    assert not pool._idle


def test_a_silent_server_times_out(serve: Callable[..., RawServer]) -> None:
    release = threading.Event()

    def hang(request: bytes, index: int) -> tuple[bytes, bool]:
        release.wait(10)
        return b"", True

    server = serve(hang)
    pool = pool_for(server)
    try:
        with pytest.raises(OSError):  # socket.timeout (TimeoutError) is an OSError
            pool.request("GET", "/", {}, timeout=0.2)
    finally:
        release.set()
    assert not pool._idle


def test_a_refused_connection_raises_connection_refused() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        HTTP11Pool("http", "127.0.0.1", port).request("GET", "/", {}, timeout=2)


def test_idle_connections_beyond_maxsize_are_closed(serve: Callable[..., RawServer]) -> None:
    server = serve(fixed(OK))
    pool = pool_for(server, maxsize=1)
    barrier = threading.Barrier(3)
    results: list[int] = []

    def one() -> None:
        barrier.wait()
        results.append(pool.request("GET", "/", {}, timeout=5).status)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200, 200, 200]
    assert len(pool._idle) == 1
    pool.close()
    assert not pool._idle


def test_an_unsupported_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported scheme"):
        HTTP11Pool("socks5", "127.0.0.1", 1)


@pytest.mark.skipif(not tls_available(), reason="no TLS material generator")
def test_tls_verifies_the_server_certificate_unless_told_not_to(
    serve: Callable[..., RawServer], tmp_path: Path
) -> None:
    material = make_tls_material(tmp_path)
    server_context = material.server_context()
    server = serve(fixed(OK), wrap=lambda s: server_context.wrap_socket(s, server_side=True))
    good = HTTP11Pool(
        "https", "127.0.0.1", server.port, ssl_context=lambda: tls_context(ca_file=str(material.ca_cert))
    )
    assert good.request("GET", "/", {}, timeout=5).data == b"{}"
    assert good.request("GET", "/", {}, timeout=5).status == 200
    untrusted = HTTP11Pool("https", "127.0.0.1", server.port)  # the system CAs
    with pytest.raises(ssl.SSLError):
        untrusted.request("GET", "/", {}, timeout=5)
    insecure = HTTP11Pool("https", "127.0.0.1", server.port, ssl_context=tls_context(verify=False))
    assert insecure.request("GET", "/", {}, timeout=5).status == 200
    bad_ca = tmp_path / "bad-ca.crt"
    bad_ca.write_text("not a certificate")
    broken = HTTP11Pool(
        "https", "127.0.0.1", server.port, ssl_context=lambda: tls_context(ca_file=str(bad_ca))
    )
    with pytest.raises(ssl.SSLError):
        broken.request("GET", "/", {}, timeout=5)


def test_answer_headers_are_looked_up_in_any_case_and_only_by_name() -> None:
    """Like urllib3's ``HTTPHeaderDict``: any case finds a header, and asking for something that
    is not a name (``None``, a number) is simply not found."""
    from mcm.runtime.client.http11 import Headers

    headers = Headers({"content-type": "application/json"})
    assert "Content-Type" in headers and "CONTENT-TYPE" in headers and "etag" not in headers
    assert None not in headers and 5 not in headers
    assert headers["Content-Type"] == headers.get("content-TYPE") == "application/json"

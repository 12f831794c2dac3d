"""The lean HTTP/1.1 pool against a server sending crafted answers: framing it refuses, bytes it
never reads as another answer, one deadline per request, requests it refuses to send."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mcm.runtime.client import load_config
from mcm.runtime.client.errors import ConnectionFailed
from mcm.runtime.client.http11 import HTTP11Pool, InvalidRequest, ProtocolError
from tests.runtime.client.raw_server import RawServer, fixed, read_head

Serve = Callable[..., RawServer]

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def pool_for(server: RawServer, **kwargs: object) -> HTTP11Pool:
    return HTTP11Pool("http", "127.0.0.1", server.port, **kwargs)  # type: ignore[arg-type]


def numbered(request: bytes, index: int) -> tuple[bytes, bool]:
    """An answer whose body says which request of the connection it answers."""
    body = b'"answer %d"' % index
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body), False


# --- bytes after an answer ----------------------------------------------------------------------


def test_bytes_after_an_answer_are_never_read_as_the_next_answer(serve: Serve) -> None:
    crafted = b'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"smuggled"'

    def script(request: bytes, index: int) -> tuple[bytes, bool]:
        answer, _ = numbered(request, index)
        return (answer + crafted if index == 0 else answer), False

    server = serve(script)
    pool = pool_for(server)
    assert pool.request("GET", "/first", {}, timeout=5).data == b'"answer 0"'
    second = pool.request("GET", "/second", {}, timeout=5)
    assert second.data == b'"answer 0"'  # the first answer of a fresh connection, not the crafted one
    assert server.connections == 2


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
        ("DELETE", b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"),
        ("PUT", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello"),
    ],
)
def test_an_answer_without_a_body_that_carries_one_does_not_break_the_next_request(
    serve: Serve, method: str, answer: bytes
) -> None:
    def script(request: bytes, index: int) -> tuple[bytes, bool]:
        return (answer if request.startswith(method.encode()) else OK), False

    server = serve(script)
    pool = pool_for(server)
    first = pool.request(method, "/", {}, timeout=5)
    assert first.data == b""
    assert pool.request("GET", "/", {}, timeout=5).data == b"{}"


# --- framing the client refuses -----------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 3\r\n\r\n{}x",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nContent-Length: 7\r\n\r\n",
    ],
)
def test_conflicting_content_lengths_are_refused(serve: Serve, answer: bytes) -> None:
    pool = pool_for(serve(fixed(answer)))
    with pytest.raises(ProtocolError, match="Content-Length"):
        pool.request("GET" if b"204" not in answer else "DELETE", "/", {}, timeout=5)
    assert not pool._idle


def test_repeated_equal_content_lengths_are_one(serve: Serve) -> None:
    server = serve(fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length:  2 \r\n\r\n{}"))
    assert pool_for(server).request("GET", "/", {}, timeout=5).data == b"{}"


CHUNKED_BODY = b"2\r\n{}\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    "encoding",
    [
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Transfer-Encoding: chunked, chunked\r\n",
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: identity, chunked\r\n",
    ],
)
def test_a_transfer_coding_other_than_chunked_alone_is_refused(serve: Serve, encoding: bytes) -> None:
    pool = pool_for(serve(fixed(b"HTTP/1.1 200 OK\r\n" + encoding + b"\r\n" + CHUNKED_BODY)))
    with pytest.raises(ProtocolError, match="transfer encoding"):
        pool.request("GET", "/", {}, timeout=5)


def test_chunked_overrides_content_length_and_any_case_is_chunked(serve: Serve) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding:  ChUnKeD \r\n\r\n" + CHUNKED_BODY
    server = serve(fixed(answer))
    pool = pool_for(server)
    assert pool.request("GET", "/", {}, timeout=5).data == b"{}"
    assert pool.request("GET", "/", {}, timeout=5).data == b"{}"
    assert server.connections == 1


def test_an_http10_answer_ignores_transfer_encoding(serve: Serve) -> None:
    # net/http ignores Transfer-Encoding in HTTP/1.0 messages: the body ends with the connection.
    answer = b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + CHUNKED_BODY
    assert pool_for(serve(fixed(answer, close=True))).request("GET", "/", {}, timeout=5).data == CHUNKED_BODY


# --- strict numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 \xb200 OK\r\nContent-Length: 2\r\n\r\n{}",  # '\xb2' is a digit to str.isdigit
        b"HTTP/1.1 0200 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: +0_2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0_2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 17 + b"\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 40 + b"\r\n{}",
    ],
)
def test_numbers_are_ascii_digits_of_bounded_length(serve: Serve, answer: bytes) -> None:
    pool = pool_for(serve(fixed(answer, close=True)))
    with pytest.raises(ProtocolError):
        pool.request("GET", "/", {}, timeout=5)
    assert not pool._idle


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nxyz",
    ],
)
def test_other_malformed_numbers_stay_a_protocol_error(serve: Serve, answer: bytes) -> None:
    pool = pool_for(serve(fixed(answer, close=True)))
    with pytest.raises(ProtocolError):
        pool.request("GET", "/", {}, timeout=5)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\n Content-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nX-A: 1\rContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent\x00Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\n: 2\r\n\r\n{}",
    ],
)
def test_header_names_are_tokens_and_lines_end_with_crlf_or_lf(serve: Serve, answer: bytes) -> None:
    with pytest.raises(ProtocolError, match="header"):
        pool_for(serve(fixed(answer, close=True))).request("GET", "/", {}, timeout=5)


def test_a_folded_header_line_continues_the_previous_value(serve: Serve) -> None:
    answer = b"HTTP/1.1 200 OK\nX-A: 1\r\n \t 2 \r\nContent-Length: 2\n\n{}"
    response = pool_for(serve(fixed(answer))).request("GET", "/", {}, timeout=5)
    assert (response.headers.get("x-a"), response.data) == ("1 2", b"{}")


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n{}" % 2**50,
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n{}" % (2**63 - 1),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 16 + b"\r\n{}",
    ],
)
def test_a_huge_announced_body_is_read_as_it_arrives(serve: Serve, answer: bytes) -> None:
    # read(n) would reserve n bytes up front (MemoryError, OverflowError): the body is read in
    # bounded pieces, and ends as a ProtocolError when the connection does.
    pool = pool_for(serve(fixed(answer, close=True)))
    with pytest.raises(ProtocolError, match="ended after 2 of"):
        pool.request("GET", "/", {}, timeout=5)


def test_a_malformed_answer_reaches_the_caller_as_connection_failed(serve: Serve, tmp_path: Path) -> None:
    server = serve(fixed(b"HTTP/1.1 \xb200 OK\r\nContent-Length: 2\r\n\r\n{}", close=True))
    client = load_config(_kubeconfig(tmp_path, f"http://127.0.0.1:{server.port}"), max_retries=0)
    try:
        with pytest.raises(ConnectionFailed, match="ProtocolError: malformed status line"):
            client.get_bytes("/healthz")
    finally:
        client.close()


# --- Connection header --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "connection",
    [
        b"Connection: close, x-foo\r\n",
        b"Connection: x-foo,close\r\n",
        b"Connection: x-foo\r\nConnection: Close\r\n",
    ],
)
def test_a_close_token_anywhere_in_connection_headers_closes(serve: Serve, connection: bytes) -> None:
    # The server keeps the connection open: only the header says it must not be reused.
    server = serve(fixed(b"HTTP/1.1 200 OK\r\n" + connection + b"Content-Length: 2\r\n\r\n{}"))
    pool = pool_for(server)
    pool.request("GET", "/", {}, timeout=5)
    pool.request("GET", "/", {}, timeout=5)
    assert server.connections == 2


def test_an_http10_answer_with_a_keep_alive_token_is_reused(serve: Serve) -> None:
    server = serve(fixed(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive, x-foo\r\nContent-Length: 2\r\n\r\n{}"))
    pool = pool_for(server)
    pool.request("GET", "/", {}, timeout=5)
    pool.request("GET", "/", {}, timeout=5)
    assert server.connections == 1


# --- an answer before the whole request was sent ------------------------------------------------


def test_an_early_final_answer_is_returned_not_lost_as_a_reset(serve: Serve) -> None:
    def refuse_large(sock: socket.socket) -> None:
        read_head(sock)  # and not the body: answer at once and close (unread data: a reset)
        sock.sendall(
            b"HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\n"
            b"Content-Length: 9\r\n\r\ntoo large"
        )

    server = serve(handler=refuse_large)
    response = pool_for(server).request("PUT", "/big", {}, b"x" * (32 << 20), timeout=30)
    assert (response.status, response.data) == (413, b"too large")


# --- requests the client refuses to send --------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/api/v1/pods HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET /x", {}),
        ("/api/v1/pods\n", {}),
        ("/api v1", {}),
        ("/", {"Authorization": "Bearer abc\r\nX-Injected: 1"}),
        ("/", {"User-Agent": "agent\n"}),
        ("/", {"User-Agent": "agent\rX"}),
        ("/", {"X-Null": "a\x00b"}),
        ("/", {"Bad Name": "v"}),
        ("/", {"Bad\r\nName": "v"}),
    ],
)
def test_control_characters_in_a_target_or_header_are_refused_before_sending(
    serve: Serve, target: str, headers: dict[str, str]
) -> None:
    server = serve(fixed(OK))
    with pytest.raises(InvalidRequest) as raised:
        pool_for(server).request("GET", target, headers, timeout=5)
    assert "abc" not in str(raised.value)  # a header's value is never part of the message
    assert server.connections == 0


def test_a_token_with_a_line_break_fails_the_request_without_sending_or_showing_it(
    serve: Serve, tmp_path: Path
) -> None:
    server = serve(fixed(OK))
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{server.port}", token="secret\r\nX-Injected: 1")
    client = load_config(kubeconfig, max_retries=0)
    try:
        with pytest.raises(ConnectionFailed, match="Authorization") as raised:
            client.get_bytes("/healthz")
    finally:
        client.close()
    assert "secret" not in str(raised.value)
    assert server.requests == []


# --- one deadline per request -------------------------------------------------------------------


def test_a_server_dribbling_bytes_cannot_stretch_the_request_past_its_timeout(serve: Serve) -> None:
    # Every read gets a byte within 0.4 s, so a per-read timeout of 1 s never fires: the
    # server's 20 bytes would take 8 s. One deadline for the whole request ends it after 1 s.
    def dribble(sock: socket.socket) -> None:
        read_head(sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n")
        for _ in range(20):
            if server.stopped.wait(0.4):
                return
            sock.sendall(b"x")

    server = serve(handler=dribble)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        pool_for(server).request("GET", "/", {}, timeout=1)
    assert time.monotonic() - started < 5  # 1 s and a margin for a loaded machine; 8 s before


def test_at_most_five_interim_answers_are_skipped(serve: Serve) -> None:
    hints = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
    assert pool_for(serve(fixed(hints * 5 + OK))).request("GET", "/", {}, timeout=5).data == b"{}"
    with pytest.raises(ProtocolError, match="1xx"):
        pool_for(serve(fixed(hints * 6 + OK))).request("GET", "/", {}, timeout=5)


# --- helpers ------------------------------------------------------------------------------------


def _kubeconfig(tmp_path: Path, server: str, token: str = "t") -> str:
    import yaml

    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)

"""Request-head parsing without the email package, and the server's answers to malformed heads."""

from __future__ import annotations

import io
import socket

import pytest

from mcm.emulator import Emulator
from mcm.emulator.httphead import MAX_HEADERS, HeadTooLarge, parse_version, read_headers


def test_headers_are_case_insensitive_first_value_wins_and_folds_join() -> None:
    raw = (
        b"Content-Type: application/json\r\nX-A: 1\r\nx-a: 2\r\n"
        b"X-Fold: one\r\n  two\r\nbogus line\r\n\r\nBODY"
    )
    stream = io.BytesIO(raw)
    headers = read_headers(stream)
    assert headers["content-type"] == "application/json"
    assert headers.get("CONTENT-TYPE") == "application/json"
    assert headers.get("X-A") == "1"
    assert headers.get("x-fold") == "one two"
    assert headers.get("missing", "d") == "d"
    assert "x-a" in headers and "bogus line" not in headers
    assert list(headers) == ["Content-Type", "X-A", "X-Fold"]
    assert stream.read() == b"BODY"


def test_too_many_or_too_long_headers_raise() -> None:
    with pytest.raises(HeadTooLarge):
        read_headers(io.BytesIO(b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS + 1)) + b"\r\n"))
    with pytest.raises(HeadTooLarge):
        read_headers(io.BytesIO(b"X: " + b"v" * 70000 + b"\r\n\r\n"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("HTTP/1.1", (1, 1)), ("HTTP/1.0", (1, 0)), ("HTTP/2.0", (2, 0)), ("HTTP/1", None), ("HTTX/1.1", None)],
)
def test_parse_version(text: str, expected: tuple[int, int] | None) -> None:
    assert parse_version(text) == expected


def _raw(emulator: Emulator, data: bytes) -> bytes:
    host, port = emulator.url.rsplit("//", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"GET /version HTTP/2.0\r\n\r\n", b" 505 "),
        (b"GET /version HTTP/x\r\n\r\n", b" 400 "),
        (b"GET /version extra HTTP/1.1\r\n\r\n", b" 400 "),
        (b"GET /version HTTP/1.1\r\n" + b"X-Big: " + b"v" * 70000 + b"\r\n\r\n", b" 431 "),
    ],
)
def test_malformed_heads_get_errors(emulator: Emulator, head: bytes, status: bytes) -> None:
    assert status in _raw(emulator, head).split(b"\r\n", 1)[0]


def test_keep_alive_and_connection_close(emulator: Emulator) -> None:
    two = (
        b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    reply = _raw(emulator, two)
    assert reply.count(b"HTTP/1.1 200") == 2
    assert b"Connection: close" in reply

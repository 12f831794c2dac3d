"""The head of an answer as pure functions: status lines, header lines, framing (Go's
``net/http`` rules, table by table)."""

from __future__ import annotations

import pytest

from mcm.runtime.client.httphead import (
    MAX_HEADERS,
    ProtocolError,
    connection_tokens,
    framing,
    parse_headers,
    parse_status_line,
)

BIG = 2**63 - 1


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("HTTP/1.1 200 OK", (1, 200, "OK")),
        ("HTTP/1.0 404 Not Found\r", (0, 404, "Not Found")),
        ("HTTP/1.1 999", (1, 999, "")),
        ("HTTP/1.1 100 ", (1, 100, "")),
    ],
)
def test_status_lines(line: str, parsed: tuple[int, int, str]) -> None:
    assert parse_status_line(line) == parsed


@pytest.mark.parametrize("line", ["HTTP/2 200 OK", "HTTP/1.1 099 X", "HTTP/1.1 20 OK", "http/1.1 200 OK", ""])
def test_malformed_status_lines(line: str) -> None:
    with pytest.raises(ProtocolError, match="malformed status line"):
        parse_status_line(line)


@pytest.mark.parametrize(
    ("text", "fields", "listed"),
    [
        ("A: 1\r\nB:2\n", {"a": "1", "b": "2"}, {}),
        (
            "Content-Length: 5\r\nconnection: close\r\n",
            {"content-length": "5", "connection": "close"},
            {"content-length": ["5"], "connection": ["close"]},
        ),
        (
            "X: 1\r\nx: 2\r\nConnection: a\r\nCONNECTION: b\r\n",
            {"x": "1", "connection": "a"},
            {"connection": ["a", "b"]},
        ),
        ("X: a\r\n  b\r\n\tc\r\nY: 2\r\n", {"x": "a b c", "y": "2"}, {}),
        ("X:   \r\n", {"x": ""}, {}),
    ],
)
def test_header_lines(text: str, fields: dict[str, str], listed: dict[str, list[str]]) -> None:
    assert parse_headers(text) == (fields, listed)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("X: 1\r\nabc\r\n", "malformed header line 'abc'"),
        ("X: 1\r\nBad Name: 2\r\n", "malformed header line 'Bad Name: 2'"),
        ("X: 1\r\na\rb: 2\r\n", "a bare CR in header line 'a\\rb: 2'"),
        ("X: 1\r\n" + "n" * 100 + "\r\n", f"malformed header line {'n' * 80!r}"),
        ("X: 1\r\n" + "\r" * 100 + "x\r\n", f"a bare CR in header line {chr(13) * 80!r}"),
    ],
)
def test_malformed_header_lines_are_named_up_to_80_characters(text: str, message: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_headers(text)
    assert str(raised.value) == message


def test_at_most_max_headers_lines() -> None:
    parse_headers("X: 1\r\n" * MAX_HEADERS)
    with pytest.raises(ProtocolError, match=f"more than {MAX_HEADERS} header lines"):
        parse_headers("X: 1\r\n" * (MAX_HEADERS + 1))


@pytest.mark.parametrize(
    ("minor", "listed", "framed"),
    [
        (1, {}, (False, None)),
        (1, {"content-length": ["5"]}, (False, 5)),
        (1, {"content-length": ["0"]}, (False, 0)),
        (1, {"content-length": ["5", "5"]}, (False, 5)),
        (1, {"content-length": [str(BIG)]}, (False, BIG)),
        (1, {"transfer-encoding": ["chunked"]}, (True, None)),
        (1, {"transfer-encoding": ["Chunked"], "content-length": ["5"]}, (True, None)),
        (0, {"transfer-encoding": ["chunked"]}, (False, None)),
        (0, {"transfer-encoding": ["chunked"], "content-length": ["5"]}, (False, 5)),
        (0, {"transfer-encoding": ["gzip", "chunked"]}, (False, None)),
    ],
)
def test_framing(minor: int, listed: dict[str, list[str]], framed: tuple[bool, int | None]) -> None:
    assert framing(minor, listed) == framed


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        ({"transfer-encoding": ["chunked", "chunked"]}, "too many transfer encodings"),
        ({"transfer-encoding": ["gzip"]}, "unsupported transfer encoding"),
        ({"content-length": ["5", "6"]}, "conflicting Content-Length"),
        ({"content-length": [str(BIG + 1)]}, "malformed Content-Length"),
        ({"content-length": ["9" * 19]}, "malformed Content-Length"),
        ({"content-length": ["1" * 20]}, "malformed Content-Length"),
        ({"content-length": ["-1"]}, "malformed Content-Length"),
        ({"content-length": ["+5"]}, "malformed Content-Length"),
        ({"content-length": [""]}, "malformed Content-Length"),
    ],
)
def test_framing_errors(listed: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        framing(1, listed)


def test_connection_tokens_from_every_value() -> None:
    assert connection_tokens(["Keep-Alive, Upgrade", " close ,\tX"]) == {
        "keep-alive",
        "upgrade",
        "close",
        "x",
    }

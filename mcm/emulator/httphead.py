"""Request-head parsing for the HTTP transport, without the ``email`` package.

The stdlib request handler parses headers with ``email.parser``, which costs about a fifth of the
emulator's CPU per small request. This module reads the same bytes with plain string operations.

Guarantees:

- :func:`read_headers` reads header lines up to the blank line; at most ``MAX_HEADERS`` lines of at
  most ``MAX_LINE`` bytes each, else :class:`HeadTooLarge` (the caller answers 431).
- Names are case-insensitive; a repeated header keeps its first value (as ``email.message`` does);
  obsolete folded continuation lines are joined to the previous value; lines without a colon are
  ignored.
- :func:`parse_version` accepts ``HTTP/<major>.<minor>`` with digit-only components of at most 10
  characters, as the stdlib does, and returns ``(major, minor)`` or None.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

__all__ = ["MAX_HEADERS", "MAX_LINE", "HeadTooLarge", "RequestHeaders", "parse_version", "read_headers"]

MAX_LINE = 65536
MAX_HEADERS = 100


class LineReader(Protocol):
    """A buffered binary stream (the connection's ``rfile``)."""

    def readline(self, size: int = -1, /) -> bytes: ...


class HeadTooLarge(Exception):
    """A header line is too long or there are too many header lines."""


class RequestHeaders(Mapping[str, str]):
    """Case-insensitive, read-only request headers."""

    __slots__ = ("_names", "_values")

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._values: dict[str, str] = {}
        self._names: list[str] = []
        for name, value in pairs:
            key = name.lower()
            if key not in self._values:
                self._values[key] = value
                self._names.append(name)

    def __getitem__(self, key: str) -> str:
        return self._values[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def read_headers(rfile: LineReader) -> RequestHeaders:
    """Read header lines up to and including the blank line."""
    pairs: list[tuple[str, str]] = []
    for _ in range(MAX_HEADERS + 1):
        raw = rfile.readline(MAX_LINE + 1)
        if len(raw) > MAX_LINE:
            raise HeadTooLarge("Line too long")
        if raw in (b"\r\n", b"\n", b""):
            return RequestHeaders(pairs)
        line = raw.decode("iso-8859-1").rstrip("\r\n")
        if line[:1] in (" ", "\t"):
            if pairs:
                name, value = pairs[-1]
                pairs[-1] = (name, f"{value} {line.strip()}".strip())
            continue
        name, colon, value = line.partition(":")
        if colon and name and name == name.strip():
            pairs.append((name, value.strip()))
    raise HeadTooLarge(f"got more than {MAX_HEADERS} headers")


def parse_version(text: str) -> tuple[int, int] | None:
    """``(major, minor)`` of an ``HTTP/x.y`` version string, or None when malformed."""
    if not text.startswith("HTTP/"):
        return None
    parts = text[5:].split(".")
    if len(parts) != 2 or any(not (p.isascii() and p.isdigit()) or len(p) > 10 for p in parts):
        return None
    return int(parts[0]), int(parts[1])

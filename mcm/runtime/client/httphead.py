"""The head of an HTTP/1.x answer, parsed as Go's ``net/http`` parses a response.

Pure functions over text (the head decoded as Latin-1); :mod:`mcm.runtime.client.http11` reads
the bytes. Guarantees:

- A status line is ``HTTP/1.<digit> <three ASCII digits, 100-999>[ <reason>]``.
- A header line is ``<token>: <value>``; a line starting with a space or tab continues the
  previous value (an obsolete line folding); a bare CR, a name that is not a token or a line
  without a colon is an error. The first value of a repeated header is the one kept, and every
  value of ``Content-Length``, ``Transfer-Encoding`` and ``Connection`` is kept for
  :func:`framing` and :func:`connection_tokens`.
- :func:`framing` applies ``transferReader.parseTransferEncoding`` and ``fixLength``
  (``net/http/transfer.go``): one ``Transfer-Encoding`` header saying ``chunked`` (ignored in
  HTTP/1.0) wins over ``Content-Length``; repeated ``Content-Length`` values must agree; a
  length is ASCII digits below 2**63.
- Every failure raises :class:`ProtocolError` (an ``OSError``: a transport failure to callers).
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_HEADERS",
    "TOKEN",
    "ProtocolError",
    "connection_tokens",
    "framing",
    "parse_headers",
    "parse_status_line",
]

MAX_HEADERS = 200
"""Header (or trailer) lines accepted in one answer."""

TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP token (RFC 9110), e.g. a header name or a method."""

_MAX_CONTENT_LENGTH = 2**63 - 1
_LISTED = ("content-length", "transfer-encoding", "connection")
_STATUS_LINE = re.compile(r"HTTP/1\.([0-9]) ([1-9][0-9][0-9])(?: ([^\r\n]*))?\r?")
_FIELD = re.compile(
    r"^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*((?:[^\r\n]*[^ \t\r\n])?)[ \t]*\r?\n", re.MULTILINE
)
_DIGITS = re.compile(r"[0-9]{1,19}")


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.x as expected (or ended in the middle)."""


def connection_tokens(values: list[str]) -> set[str]:
    """The comma-separated tokens of every value, in lower case."""
    return {token.strip(" \t").lower() for value in values for token in value.split(",")}


def parse_status_line(line: str) -> tuple[int, int, str]:
    """(HTTP/1 minor version, status, reason) of ``HTTP/1.x NNN reason``."""
    match = _STATUS_LINE.fullmatch(line)
    if match is None:
        raise ProtocolError(f"malformed status line {line[:80]!r}")
    minor, status, reason = match.groups()
    return int(minor), int(status), reason or ""


def parse_headers(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The header lines of ``text`` as a dict (names in lower case, the first value of each)
    and every value of the framing headers (``Content-Length``, ``Transfer-Encoding``,
    ``Connection``)."""
    pairs = _FIELD.findall(text)
    if len(pairs) != text.count("\n"):
        pairs = _fold(text)  # folded lines, or a malformed line to name
    if len(pairs) > MAX_HEADERS:
        raise ProtocolError(f"more than {MAX_HEADERS} header lines")
    fields: dict[str, str] = {}
    repeated = False
    for name, value in pairs:
        lowered = name.lower()
        if lowered in fields:
            repeated = True
        else:
            fields[lowered] = value
    if not repeated:
        return fields, {name: [fields[name]] for name in _LISTED if name in fields}
    listed: dict[str, list[str]] = {}
    for name, value in pairs:
        if name.lower() in _LISTED:
            listed.setdefault(name.lower(), []).append(value)
    return fields, listed


def _fold(text: str) -> list[tuple[str, str]]:
    """The header lines one by one: an obsolete line folding (a line starting with a space or
    tab) continues the previous value; a line that is not ``token: value`` is an error."""
    pairs: list[tuple[str, str]] = []
    for raw in text.split("\n")[:-1]:
        line = raw[:-1] if raw.endswith("\r") else raw
        if "\r" in line:
            raise ProtocolError(f"a bare CR in header line {line[:80]!r}")
        if line[:1] in (" ", "\t") and pairs:
            name, value = pairs[-1]
            pairs[-1] = (name, (value + " " + line.strip(" \t")).strip(" \t"))
            continue
        name, sep, value = line.partition(":")
        if not sep or not TOKEN.fullmatch(name):
            raise ProtocolError(f"malformed header line {line[:80]!r}")
        pairs.append((name, value.strip(" \t")))
    return pairs


def framing(minor: int, listed: dict[str, list[str]]) -> tuple[bool, int | None]:
    """(chunked, Content-Length or None), checked as Go's ``net/http`` checks a response
    (``transferReader.parseTransferEncoding`` and ``fixLength``), for every status."""
    encodings = listed.get("transfer-encoding")
    if encodings is not None and minor >= 1:
        if len(encodings) != 1:
            raise ProtocolError(f"too many transfer encodings: {encodings!r}")
        if encodings[0].lower() != "chunked":
            raise ProtocolError(f"unsupported transfer encoding: {encodings[0]!r}")
    lengths = listed.get("content-length")
    if lengths is not None and any(value != lengths[0] for value in lengths):
        raise ProtocolError(f"the answer has conflicting Content-Length headers: {lengths!r}")
    if encodings is not None and minor >= 1:
        return True, None
    if lengths is None:
        return False, None
    if not _DIGITS.fullmatch(lengths[0]) or int(lengths[0]) > _MAX_CONTENT_LENGTH:
        raise ProtocolError(f"malformed Content-Length {lengths[0][:40]!r}")
    return False, int(lengths[0])

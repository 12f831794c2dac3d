"""Keep secret data out of messages that cross the driver boundary.

A driver gets the class's secret data (cloud credentials, ``userData`` with the bootstrap token)
with every call, and its error messages travel on: into logs, gRPC status details and the
Machine's ``lastOperation.description``. :func:`scrub_message` is the one place that cleans such
a message; the gRPC server and client and :class:`~mcm.driver.safe.SafeDriver` all use it.

Guarantees of :func:`scrub_message`:

- Every occurrence of a non-empty secret value is replaced by :data:`REDACTED`. The *pieces* of
  a value are the value itself, each of its lines of at least :data:`MIN_SHORT_LINE` characters
  (a PEM key line, a cloud-init command, a password on a line of its own), each word of at least
  :data:`MIN_WORD` characters (words are split at whitespace, quotes, ``=``, ``:`` and ``,``),
  and each part of such a word of at least :data:`MIN_WORD` characters (split at ``.``, ``/``,
  ``@``, ``;``, ``&``, ``?``, ``#``: the 16-character secret of a bootstrap token
  ``<id>.<secret>``, a password in a URL).
- Each piece is matched as text and re-encoded: lower- and upper-case hex, URL-encoded (``%20``
  and ``+`` for spaces), JSON-escaped, and base64 (standard and URL-safe alphabet) whether it
  starts at a byte offset of 0, 1 or 2 inside a longer base64 stream (the characters that do not
  depend on the surrounding bytes). Encoded forms shorter than :data:`MIN_ENCODED` characters are
  not used.
- Lines shorter than :data:`MIN_LINE` characters are matched only as whole words (not inside a
  longer run of letters and digits), so ``set -e`` goes but ``setting`` stays. Lines shorter
  than :data:`MIN_SHORT_LINE` characters, and short lines that are one lower-case word (``done``,
  ``else``: script syntax), carry too little to be told from ordinary text and are left alone
  (the whole value is still matched).
- Longer matches win over shorter ones. Values that are not UTF-8 are matched in their Latin-1
  reading, which is how such bytes usually end up in text.
- The result is at most ``limit`` characters plus a short note saying how much was cut. Scrubbing
  happens before cutting, so a cut never leaves the start of a secret behind.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import urllib.parse
from collections.abc import Iterator, Mapping

__all__ = [
    "MAX_MESSAGE",
    "MIN_ENCODED",
    "MIN_LINE",
    "MIN_SHORT_LINE",
    "MIN_WORD",
    "REDACTED",
    "cap_message",
    "scrub_message",
]

REDACTED = "[redacted]"
"""What a secret value is replaced with."""
MAX_MESSAGE = 4096
"""Default cap, in characters, of a message crossing the driver boundary."""
MIN_LINE = 8
"""Lines of a multi-line secret value at least this long are matched anywhere in a message."""
MIN_SHORT_LINE = 4
"""Lines shorter than :data:`MIN_LINE` but at least this long are matched as whole words."""
MIN_WORD = 16
"""Words (and parts of words) of a secret value shorter than this are not matched on their own."""
MIN_ENCODED = 8
"""Encoded forms (hex, URL, base64 slices) shorter than this are not matched."""

_WORD_SEPARATORS = re.compile(r"[\s'\"=:,]+")
_PART_SEPARATORS = re.compile(r"[./@;&?#]+")
_PLAIN_WORD = re.compile(r"[a-z]+")
"""A short line that is one lower-case word (``done``, ``then``, ``else``) is script syntax."""
_PATTERN_CACHE = 64


def scrub_message(text: str, secret_data: Mapping[str, bytes] | None, limit: int = MAX_MESSAGE) -> str:
    """``text`` without any of the values of ``secret_data``, cut to ``limit`` characters."""
    values = tuple(sorted(_as_bytes(v) for v in (secret_data or {}).values()))
    pattern = _pattern(values)
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    return cap_message(text, limit)


def cap_message(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, with a note when it was longer."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters cut)"


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


@functools.lru_cache(maxsize=_PATTERN_CACHE)
def _pattern(values: tuple[bytes, ...]) -> re.Pattern[str] | None:
    """One alternation of every secret form, longest first (so a line never hides its value)."""
    anywhere: set[str] = set()
    whole_word: set[str] = set()
    for value in values:
        for form, bounded in _forms(value):
            (whole_word if bounded else anywhere).add(form)
    whole_word -= anywhere
    alternatives = [(form, re.escape(form)) for form in anywhere]
    alternatives += [(form, rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])") for form in whole_word]
    if not alternatives:
        return None
    alternatives.sort(key=lambda pair: len(pair[0]), reverse=True)
    return re.compile("|".join(regex for _, regex in alternatives))


def _forms(value: bytes) -> Iterator[tuple[str, bool]]:
    """Every way ``value`` may show up in a message, with whether it must stand as a whole word."""
    if not value:
        return
    text = _text(value)
    yield text, False
    yield from _encodings(value, whole=True)
    for piece, bounded in _pieces(text):
        yield piece, bounded
        if not bounded:
            yield from _encodings(_raw(piece), whole=False)


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _raw(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("latin-1", errors="ignore")


def _pieces(text: str) -> Iterator[tuple[str, bool]]:
    """Lines, words and parts of words worth matching on their own (with the whole-word flag)."""
    for line in text.splitlines():
        stripped = line.strip()
        if len(stripped) >= MIN_LINE:
            yield stripped, False
        elif len(stripped) >= MIN_SHORT_LINE and not _PLAIN_WORD.fullmatch(stripped):
            yield stripped, True
    for word in _WORD_SEPARATORS.split(text):
        if len(word) < MIN_WORD:
            continue
        yield word, False
        for part in _PART_SEPARATORS.split(word):
            if len(part) >= MIN_WORD and part != word:
                yield part, False


def _encodings(raw: bytes, *, whole: bool) -> Iterator[tuple[str, bool]]:
    """Hex, URL, JSON and base64 forms of ``raw`` (the full padded base64 too when ``whole``)."""
    text = _text(raw)
    forms = {
        raw.hex(),
        raw.hex().upper(),
        urllib.parse.quote(raw, safe=""),
        urllib.parse.quote_plus(raw, safe=""),
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        *_base64_slices(raw),
    }
    if whole:
        forms.add(base64.b64encode(raw).decode("ascii"))
        forms.add(base64.urlsafe_b64encode(raw).decode("ascii"))
    for form in forms:
        if form != text and len(form) >= MIN_ENCODED:
            yield form, False


def _base64_slices(raw: bytes) -> Iterator[str]:
    """The base64 characters that encode ``raw`` alone, for each of the 3 offsets it may start at."""
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        start = -(-offset * 8 // 6)  # characters that also carry the bytes before ``raw``
        end = (offset + len(raw)) * 8 // 6  # characters not touched by the bytes after it
        core = encoded[start:end]
        yield core
        yield core.replace("+", "-").replace("/", "_")

"""The scrubber's reference: every form of every value, matched by a plain left-to-right scan.

:mod:`mcm.driver.scrub` is checked against it (``tests/driver/test_scrub_reference.py``). The forms
are built as the scrubber built them before it was made fast (one regular expression of all of
them): the value, its lines and long words and their parts, and their hex, URL, JSON and base64
forms, all spelled out here. The matching is the slowest obvious way: at each position of the
message, the longest form that starts there (a short line only where it is a whole word) is
replaced, and the scan goes on after it; where none starts, the character stays.
"""

from __future__ import annotations

import base64
import json
import re
import string
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping

from mcm.driver.scrub import MIN_ENCODED, MIN_LINE, MIN_SHORT_LINE, MIN_WORD, REDACTED


def reference_scrub(text: str, secret_data: Mapping[str, bytes]) -> str:
    """``text`` with every form of every value of ``secret_data`` replaced (no cap)."""
    anywhere, whole_word = _all_forms(secret_data.values())
    out: list[str] = []
    at = 0
    while at < len(text):
        length = _longest_at(text, at, anywhere, whole_word)
        out.append(REDACTED if length else text[at])
        at += length or 1
    return "".join(out)


def _all_forms(values: Iterable[bytes | str]) -> tuple[set[str], set[str]]:
    """The forms matched anywhere and those matched only as whole words."""
    anywhere: set[str] = set()
    whole_word: set[str] = set()
    for value in values:
        for form, bounded in _forms(_as_bytes(value)):
            (whole_word if bounded else anywhere).add(form)
    return anywhere, whole_word - anywhere


def _longest_at(text: str, at: int, anywhere: set[str], whole_word: set[str]) -> int:
    """The length of the longest form starting at ``at`` (0 for none)."""
    found = [len(form) for form in anywhere if text.startswith(form, at)]
    found += [len(form) for form in whole_word if text.startswith(form, at) and _alone(text, at, len(form))]
    return max(found, default=0)


def _alone(text: str, at: int, length: int) -> bool:
    """Whether ``text[at:at + length]`` has no ASCII letter or digit right before or after it."""
    end = at + length
    return (at == 0 or text[at - 1] not in _ALNUM) and (end == len(text) or text[end] not in _ALNUM)


_ALNUM = string.ascii_letters + string.digits
_WORD_SEPARATORS = re.compile(r"[\s'\"=:,]+")
_PART_SEPARATORS = re.compile(r"[./@;&?#]+")
_PLAIN_WORD = re.compile(r"[a-z]+")
"""A short line that is one lower-case word (``done``, ``then``, ``else``) is script syntax."""


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


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

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
- The result is at most ``limit`` characters plus a short note saying how many more characters
  the message had. Scrubbing happens before cutting, so a cut never leaves the start of a secret
  behind; the part of a long message that no shown character depends on is not scrubbed, and the
  note counts it as it came.

Cost: linear in the size of the secret data and in ``limit`` (not in the size of the message),
with no regular expression built from secret data. The pieces are indexed once per secret (and
cached) by their 2nd to 7th character; their encoded forms are built only when a message needs
them. A message is read in chunks until ``limit`` characters of output are known. In each chunk
the keys of the text forms (the pieces, their URL and JSON forms) are found, by a search for each
key or a look-up at each position, whichever is cheaper; the runs of hex or base64 characters are
decoded (hex from both parities, base64 at its 4 alignments) and the pieces' keys found in their
bytes the same way. Every candidate is compared with the exact form before it is replaced.
``benchmarks/scrub.py`` measures it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import json.encoder
import operator
import re
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, compress, repeat

from mcm.driver.scrub_index import KeyIndex, key_starts

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

_MIN_PIECE = min(MIN_LINE, MIN_WORD)
"""The shortest piece indexed with its encoded forms (a shorter whole value is a literal)."""
_KEY = slice(1, 7)
"""What a form is indexed by: its 2nd to 7th character (a piece, for the decoded runs of a
message: its 2nd to 7th byte, which every encoded form of a piece of 8 bytes or more carries
whole; the first byte of a base64 slice has lost bits to the byte before it)."""
_KEY_LEN = _KEY.stop - _KEY.start
_INDEXED = _KEY.stop
"""The shortest form in the index; shorter ones are indexed by their first :data:`_SHORT_KEY`
characters, and the tiny rest (a whole value of 1 to 3 characters) is searched for."""
_KEY_OF = operator.itemgetter(_KEY)
_START_OF = operator.itemgetter(slice(_INDEXED))
_SHORT_KEY = MIN_SHORT_LINE
_MIN_CHUNK = 1024
"""The fewest message characters read at once."""
_HEAD = 256
"""A piece longer than this (in bytes) has its forms built only where the forms of its first
:data:`_HEAD` characters and bytes are in a message, and tries hold only those."""
_LOOKAHEAD = 2 * _HEAD + 8
"""How far past a chunk's end a run of hex or base64 characters is decoded: as far as the bytes
a trie may compare (the head of a piece) reach from a piece that starts in the chunk."""
_MEMO = 4096
"""Encoded forms kept built (those of the pieces found in recent messages)."""
_CACHE_ENTRIES = 64
_CACHE_BYTES = 4 * 1024 * 1024
"""Matchers kept: at most this many, built from at most this many bytes of secret data in all
(the most recent is always kept). A matcher holds about 16 times its secret data (16 MiB for a
1 MiB Secret, ``benchmarks/scrub.py --memory``), so the cache stays under about 64 MiB."""

_WORD_SEPARATORS = str.maketrans(dict.fromkeys("'\"=:,", " "))
"""What separates words besides whitespace (turned into spaces to split at)."""
_PART_SEPARATORS = str.maketrans(dict.fromkeys("./@;&?#", " "))
_PLAIN_WORD = re.compile(r"[a-z]+")
"""A short line that is one lower-case word (``done``, ``then``, ``else``) is script syntax."""
_URL_UNSAFE = re.compile(r"[^A-Za-z0-9_.~-]")
_JSON_ESCAPED_ASCII = re.compile(r"[^ !#-\[\]-~]")
"""What JSON escapes with ``ensure_ascii`` (anything but printable ASCII, ``"`` and ``\\``)."""
_HEX_RUN = re.compile(rf"[0-9A-Fa-f]{{{2 * _MIN_PIECE},}}")
_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{_MIN_PIECE * 8 // 6},}}")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")
_QUOTED = [chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in range(256)]
"""``urllib.parse.quote(…, safe="")`` as a table for ``str.translate`` of Latin-1 text."""
_QUOTED_PLUS = [*_QUOTED[:32], "+", *_QUOTED[33:]]
_TO_STANDARD = str.maketrans("-_", "+/")
_TO_URLSAFE = str.maketrans("+/", "-_")
_SLICE_START = (0, 2, 3)
"""Where in its 4 characters the base64 slice of bytes from offset 0, 1, 2 of a group begins."""

_PLAIN, _URL, _JSON, _LITERAL = range(4)
"""Kinds of entries of the text index (``number << 3 | kind``): a piece with all its text forms
(itself, URL-encoded and JSON-escaped), its URL forms, its JSON forms, a literal."""
_HEX, _BASE64 = 8, 9
"""Kinds of encoded forms found through the decoded runs (``_BASE64 + offset``)."""
_TEXT, _SHORT, _TINY = 16, 17, 18
"""Kinds of the other hits: through the text index, the index of short forms, a tiny form."""

Hit = tuple[int, str, int]
"""Where a form may start: its kind, and the subject and position its key was found at (a tiny
form: the form itself)."""


def scrub_message(text: str, secret_data: Mapping[str, bytes] | None, limit: int = MAX_MESSAGE) -> str:
    """``text`` without any of the values of ``secret_data``, cut to ``limit`` characters."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    values = tuple(sorted({_as_bytes(v) for v in (secret_data or {}).values()} - {b""}))
    if not values:
        return cap_message(text, limit)
    return _MATCHERS.get(values).scrub(text, limit)


def cap_message(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, with a note when it was longer."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters cut)"


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


class _Matcher:
    """The forms of one secret's values, indexed; finds and replaces them in messages."""

    def __init__(self, values: Iterable[bytes]) -> None:
        pieces = _Pieces(values)
        self.texts, self.raws, self.whole = pieces.texts, pieces.raws, pieces.whole
        self.literals = sorted(form for form in pieces.literals if len(form) >= _INDEXED)
        keys, entries = _text_keys(self.texts, self.raws, self.literals)
        self.index = KeyIndex(keys, entries, self._key_strings, key_len=_KEY_LEN)
        self.raw_index = KeyIndex(
            map(bytes.decode, map(_KEY_OF, self.raws), repeat("latin-1")),
            range(len(self.raws)),
            self._raw_key_strings,
            key_len=_KEY_LEN,
        )
        self.short = _short_index(pieces.literals, pieces.bounded)
        self.whole_word = frozenset(pieces.bounded - pieces.literals)
        self.tiny = tuple(form for form in pieces.literals if len(form) < _SHORT_KEY)
        self._memo: dict[tuple[int, int], tuple[str, ...]] = {}

    def scrub(self, text: str, limit: int) -> str:
        """``text`` scrubbed and cut to ``limit`` characters (read only as far as that needs)."""
        out: list[str] = []
        size = pos = 0  # characters in ``out``; ``text[:pos]`` is done
        end = len(text)
        while pos < end and size <= limit:
            hi = min(end, pos + max(limit + 1 - size, _MIN_CHUNK))
            hits = self.hits(text, pos, hi)
            for at in sorted(hits):
                length = self.longest(text, at, hits[at]) if at >= pos else 0
                if length:
                    out += (text[pos:at], REDACTED)
                    size += at - pos + len(REDACTED)
                    pos = at + length
            if pos < hi:
                out.append(text[pos:hi])
                size, pos = size + hi - pos, hi
        scrubbed = "".join(out)
        if pos >= end and size <= limit:
            return scrubbed
        return f"{scrubbed[:limit]}... ({size - limit + end - pos} more characters cut)"

    def hits(self, text: str, lo: int, hi: int) -> dict[int, list[Hit]]:
        """The positions in ``[lo, hi)`` where a form may start, with where to look it up."""
        hits: dict[int, list[Hit]] = {}
        for at in key_starts(text, self.index.keys, lo, hi, shift=1, width=_KEY_LEN):
            hits[at] = [(_TEXT, text, at + 1)]
        for at in key_starts(text, self.short, lo, hi, shift=0, width=_SHORT_KEY):
            hits.setdefault(at, []).append((_SHORT, text, at))
        for form in self.tiny:
            for at in key_starts(text, (form,), lo, hi, shift=0, width=len(form)):
                hits.setdefault(at, []).append((_TINY, form, 0))
        self._hex_hits(text, lo, hi, hits)
        self._base64_hits(text, lo, hi, hits)
        return hits

    def _hex_hits(self, text: str, lo: int, hi: int, hits: dict[int, list[Hit]]) -> None:
        """Hex forms: each run of hex digits decoded from both parities, its bytes looked up."""
        views = []
        for run in _HEX_RUN.finditer(text, lo, min(len(text), hi + _LOOKAHEAD)):
            for first in (run.start(), run.start() + 1):
                digits = text[first : first + (run.end() - first) // 2 * 2]
                views.append((bytes.fromhex(digits).decode("latin-1"), first))
        for joined, byte, first, local in self._raw_hits(views):
            at = first + 2 * local
            if lo <= at < hi:
                hits.setdefault(at, []).append((_HEX, joined, byte + 1))

    def _base64_hits(self, text: str, lo: int, hi: int, hits: dict[int, list[Hit]]) -> None:
        """Base64 slices: each run (and 3 characters before it) decoded at its 4 alignments."""
        views = []
        for run in _BASE64_RUN.finditer(text, lo, min(len(text), hi + _LOOKAHEAD)):
            chars = "AAA" + run.group().translate(_TO_STANDARD)
            for align in range(4):
                group = chars[align:]
                view = binascii.a2b_base64(group + "A" * (-len(group) % 4)).decode("latin-1")
                views.append((view, run.start() - 3 + align))
        for joined, byte, origin, local in self._raw_hits(views):
            quad, offset = divmod(local, 3)
            at = origin + 4 * quad + _SLICE_START[offset]
            if lo <= at < hi:
                hits.setdefault(at, []).append((_BASE64 + offset, joined, byte + 1))

    def _raw_hits(self, views: list[tuple[str, int]]) -> Iterator[tuple[str, int, int, int]]:
        """Where a piece may start in decoded runs (``views``: the bytes, and where the run's
        encoding starts): the runs joined into one subject (searched at once), the byte there,
        and the run's start and byte. A key across two runs only adds a candidate that is
        compared with the message like every other."""
        joined = "".join(view for view, _ in views)
        starts = list(accumulate((len(view) for view, _ in views), initial=0))
        for byte in key_starts(joined, self.raw_index.keys, 0, len(joined) - 1, shift=1, width=_KEY_LEN):
            run = bisect.bisect_right(starts, byte) - 1
            yield joined, byte, views[run][1], byte - starts[run]

    def longest(self, text: str, at: int, hits: list[Hit]) -> int:
        """The length of the longest form at ``at`` of ``text`` (0 for none), given its hits."""
        best = 0
        for kind, subject, key_at in hits:
            for form in self._forms(kind, subject, key_at, text, at):
                if (
                    len(form) > best
                    and text.startswith(form, at)
                    and not self._cut_from_word(kind, form, text, at)
                ):
                    best = len(form)
        return best

    def _cut_from_word(self, kind: int, form: str, text: str, at: int) -> bool:
        """Whether a short line found at ``at`` is part of a longer word (and so not matched)."""
        return kind == _SHORT and form in self.whole_word and _inside_word(text, at, len(form))

    def _forms(self, kind: int, subject: str, key_at: int, text: str, at: int) -> Iterator[str]:
        """The forms a hit at ``at`` of ``text`` may be: by the index of its kind, at ``key_at`` of
        ``subject``."""
        if kind == _TEXT:
            for entry in self.index.candidates(subject, key_at):
                yield from self._text_forms(entry, text, at)
        elif kind == _SHORT:
            yield from self.short[subject[key_at : key_at + _SHORT_KEY]]
        elif kind == _TINY:
            yield subject
        else:
            for piece in self.raw_index.candidates(subject, key_at):
                yield from self._forms_at(piece, kind, text, at)

    def _text_forms(self, entry: int, text: str, at: int) -> Sequence[str]:
        """The forms an entry of the text index stands for that may be at ``at`` of ``text``."""
        number, kind = entry >> 3, entry & 7
        if kind == _LITERAL:
            return (self.literals[number],)
        return self._forms_at(number, kind, text, at)

    def _forms_at(self, piece: int, kind: int, text: str, at: int) -> Sequence[str]:
        """The forms of ``piece`` of a kind, or none when a piece longer than :data:`_HEAD` bytes
        does not start there with the forms of its head (so its own are built only then)."""
        if len(self.raws[piece]) > _HEAD and not any(
            text.startswith(head, at) for head in self._head_forms(piece, kind)
        ):
            return ()
        return self._encoded_forms(piece, kind)

    def _head_forms(self, piece: int, kind: int) -> Sequence[str]:
        """The forms of the first :data:`_HEAD` characters and bytes of ``piece``: each a prefix
        of one of its forms (a base64 slice ends before the characters later bytes change)."""
        raw = self.raws[piece]
        if len(raw) <= _HEAD:
            return self._encoded_forms(piece, kind)
        return _encode(kind, self.texts[piece][:_HEAD], raw[:_HEAD], whole=False)

    def _key_strings(self, entry: int) -> list[str]:
        """What a trie tells an entry's forms apart by: what follows the key, in their heads."""
        number, kind = entry >> 3, entry & 7
        if kind == _LITERAL:
            return [self.literals[number][1:]]
        return [form[1:] for form in self._head_forms(number, kind)]

    def _raw_key_strings(self, piece: int) -> tuple[str]:
        """The piece's bytes after the first (in its head), but its last byte, which a base64
        slice may have cut."""
        raw = self.raws[piece]
        return (raw[1 : min(len(raw) - 1, _HEAD)].decode("latin-1"),)

    def _encoded_forms(self, piece: int, kind: int) -> tuple[str, ...]:
        """The forms of ``piece`` of a kind, built on first use and kept for the next message."""
        key = (piece, kind)
        forms = self._memo.get(key)
        if forms is None:
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            forms = self._memo[key] = _encode(kind, self.texts[piece], self.raws[piece], piece in self.whole)
        return forms


def _inside_word(text: str, at: int, length: int) -> bool:
    """Whether ``text[at:at + length]`` touches a letter or digit on either side."""
    end = at + length
    return (at > 0 and text[at - 1] in _ALNUM) or (end < len(text) and text[end] in _ALNUM)


def _encode(kind: int, text: str, raw: bytes, whole: bool) -> tuple[str, ...]:
    """The forms of a piece of one kind (text, URL, JSON, hex, or base64 at an offset)."""
    if kind == _PLAIN:
        return (text, *_encode(_URL, text, raw, whole), *_encode(_JSON, text, raw, whole))
    if kind == _URL:
        latin = raw.decode("latin-1")
        return tuple({_quote(latin), _quote_plus(latin)} - {text})
    if kind == _JSON:
        return tuple({_json_ascii(text), _json(text)} - {text})
    if kind == _HEX:
        return raw.hex(), raw.hex().upper()
    offset = kind - _BASE64
    core = _base64_slice(raw, offset)
    forms = {core, core.translate(_TO_URLSAFE)}
    if whole and offset == 0:
        padded = base64.b64encode(raw).decode("ascii")
        forms |= {padded, padded.translate(_TO_URLSAFE)}
    return tuple(forms)


class _Pieces:
    """The pieces of some values, as text and as bytes, and the forms too short to index so."""

    def __init__(self, values: Iterable[bytes]) -> None:
        long: set[str] = set()
        wholes: list[tuple[str, bytes]] = []
        self.literals: set[str] = set()
        """Forms of the values shorter than a piece: the value and its encoded forms."""
        self.bounded: set[str] = set()
        """Short lines, matched as whole words only."""
        for value in values:
            text = _text(value)
            if len(text) >= _MIN_PIECE:
                wholes.append((text, value))
            else:
                self.literals.add(text)
                self.literals.update(_encodings(value, whole=True))
            lines = list(map(str.strip, text.splitlines()))
            long.update(_at_least(MIN_LINE, lines))
            long.update(_long_words(text))
            self.bounded.update(_short_lines(lines))
        self.texts = list(long)
        self.raws = list(map(str.encode, self.texts))
        self.whole = self._add_wholes(wholes)

    def _add_wholes(self, wholes: list[tuple[str, bytes]]) -> frozenset[int]:
        """The numbers of the pieces that are whole values (added where no line or word is one)."""
        numbers = dict(zip(self.texts, range(len(self.texts)), strict=True))
        whole = set()
        for text, raw in wholes:
            number = numbers.get(text)
            if number is None or self.raws[number] != raw:
                number = len(self.texts)
                self.texts.append(text)
                self.raws.append(raw)
            whole.add(number)
        return frozenset(whole)


def _long_words(text: str) -> Iterator[str]:
    """The words of ``text`` and the parts of them that are long enough to be pieces."""
    words = _at_least(MIN_WORD, text.translate(_WORD_SEPARATORS).split())
    yield from words
    yield from _at_least(MIN_WORD, " ".join(words).translate(_PART_SEPARATORS).split())


def _at_least(length: int, strings: list[str]) -> list[str]:
    return list(compress(strings, map(operator.ge, map(len, strings), repeat(length))))


def _short_lines(lines: list[str]) -> Iterator[str]:
    short = compress(lines, map(operator.lt, map(len, lines), repeat(MIN_LINE)))
    return (line for line in short if len(line) >= MIN_SHORT_LINE and not _PLAIN_WORD.fullmatch(line))


def _text_keys(texts: list[str], raws: list[bytes], literals: list[str]) -> tuple[list[str], list[int]]:
    """The keys and entries of the text index.

    Each piece has an entry (standing for its URL and JSON forms too); its URL and JSON forms
    have entries of their own where their first characters differ from the piece's (and so their
    key may): only those first characters are encoded here.
    """
    numbers = range(len(texts))
    keys = list(map(_KEY_OF, texts))
    entries = list(range(_PLAIN, len(texts) << 3, 8))
    raw_starts = list(map(bytes.decode, map(_START_OF, raws), repeat("latin-1")))
    text_starts = list(map(_START_OF, texts))
    special = (
        (_URL, compress(numbers, map(_URL_UNSAFE.search, raw_starts)), raw_starts, _URL_TABLES),
        (_JSON, compress(numbers, map(_JSON_ESCAPED_ASCII.search, text_starts)), text_starts, _JSON_ENCODERS),
    )
    for kind, chosen, starts, encoders in special:
        numbers_chosen = list(chosen)
        for encode in encoders:
            keys += map(_KEY_OF, map(encode, map(starts.__getitem__, numbers_chosen)))
            entries += map(operator.or_, map(operator.lshift, numbers_chosen, repeat(3)), repeat(kind))
    keys += map(_KEY_OF, literals)
    entries += range(_LITERAL, len(literals) << 3, 8)
    return keys, entries


def _quote(head: str) -> str:
    return head.translate(_QUOTED)


def _quote_plus(head: str) -> str:
    return head.translate(_QUOTED_PLUS)


def _json_ascii(text: str) -> str:
    return json.encoder.encode_basestring_ascii(text)[1:-1]


def _json(text: str) -> str:
    return json.encoder.encode_basestring(text)[1:-1]


_URL_TABLES = (_quote, _quote_plus)
_JSON_ENCODERS = (_json_ascii, _json)


def _short_index(literals: set[str], bounded: set[str]) -> dict[str, list[str]]:
    """Forms shorter than :data:`_INDEXED` (and short lines) by their first characters."""
    index: dict[str, list[str]] = {}
    for form in {form for form in literals if _SHORT_KEY <= len(form) < _INDEXED} | bounded:
        index.setdefault(form[:_SHORT_KEY], []).append(form)
    return index


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _encodings(raw: bytes, *, whole: bool) -> set[str]:
    """Hex, URL, JSON and base64 forms of ``raw`` (the full padded base64 too when ``whole``)
    that differ from its text and are long enough to be matched."""
    text = _text(raw)
    forms = {
        raw.hex(),
        raw.hex().upper(),
        urllib.parse.quote(raw, safe=""),
        urllib.parse.quote_plus(raw, safe=""),
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
    }
    for offset in range(3):
        core = _base64_slice(raw, offset)
        forms |= {core, core.translate(_TO_URLSAFE)}
    if whole:
        forms.add(base64.b64encode(raw).decode("ascii"))
        forms.add(base64.urlsafe_b64encode(raw).decode("ascii"))
    return {form for form in forms if form != text and len(form) >= MIN_ENCODED}


def _base64_slice(raw: bytes, offset: int) -> str:
    """The standard base64 characters that encode ``raw`` alone when it starts at ``offset``."""
    encoded = binascii.b2a_base64(b"\0" * offset + raw, newline=False).decode("ascii")
    start = -(-offset * 8 // 6)  # characters that also carry the bytes before ``raw``
    end = (offset + len(raw)) * 8 // 6  # characters not touched by the bytes after it
    return encoded[start:end]


class _Cache:
    """The matchers of the secrets used last (see :data:`_CACHE_ENTRIES`, :data:`_CACHE_BYTES`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._matchers: OrderedDict[tuple[bytes, ...], tuple[_Matcher, int]] = OrderedDict()
        self._bytes = 0

    def get(self, values: tuple[bytes, ...]) -> _Matcher:
        with self._lock:
            found = self._matchers.get(values)
            if found is not None:
                self._matchers.move_to_end(values)
                return found[0]
        matcher, size = _Matcher(values), sum(map(len, values))
        with self._lock:
            if values not in self._matchers:
                self._matchers[values] = (matcher, size)
                self._bytes += size
            while len(self._matchers) > 1 and (
                len(self._matchers) > _CACHE_ENTRIES or self._bytes > _CACHE_BYTES
            ):
                self._bytes -= self._matchers.popitem(last=False)[1][1]
        return matcher


_MATCHERS = _Cache()

"""Keep secret data out of messages that cross the driver boundary.

A driver gets the class's secret data (cloud credentials, ``userData`` with the bootstrap token)
with every call, and its error messages travel on: into logs, gRPC status details and the
Machine's ``lastOperation.description``. :func:`scrub_message` is the one place that cleans such
a message; the gRPC server and client and :class:`~mcm.driver.safe.SafeDriver` all use it.

Guarantees of :func:`scrub_message`:

- Every occurrence of a non-empty secret value is replaced by :data:`REDACTED`: the value as
  UTF-8 text, its standard base64 form, each of its lines of at least :data:`MIN_LINE`
  characters (a PEM key, a cloud-init script) and each word of at least :data:`MIN_WORD`
  characters (a bootstrap token inside ``userData``; words are split at whitespace, quotes,
  ``=``, ``:`` and ``,``). Longer matches win over shorter ones. Values that are not UTF-8
  are matched in their Latin-1 reading, which is how such bytes usually end up in text.
- The result is at most ``limit`` characters plus a short note saying how much was cut. Scrubbing
  happens before cutting, so a cut never leaves the start of a secret behind.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping

__all__ = ["MAX_MESSAGE", "MIN_LINE", "MIN_WORD", "REDACTED", "cap_message", "scrub_message"]

REDACTED = "[redacted]"
"""What a secret value is replaced with."""
MAX_MESSAGE = 4096
"""Default cap, in characters, of a message crossing the driver boundary."""
MIN_LINE = 8
"""Lines of a multi-line secret value shorter than this are not scrubbed on their own."""
MIN_WORD = 16
"""Words of a secret value shorter than this are not scrubbed on their own."""

_WORD_SEPARATORS = re.compile(r"[\s'\"=:,]+")


def scrub_message(text: str, secret_data: Mapping[str, bytes] | None, limit: int = MAX_MESSAGE) -> str:
    """``text`` without any of the values of ``secret_data``, cut to ``limit`` characters."""
    pattern = _pattern(secret_data or {})
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


def _pattern(secret_data: Mapping[str, bytes]) -> re.Pattern[str] | None:
    """One alternation of every secret form, longest first (so a line never hides its value)."""
    forms = {form for value in secret_data.values() for form in _forms(value) if form}
    if not forms:
        return None
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(re.escape(form) for form in ordered))


def _forms(value: bytes | str) -> Iterator[str]:
    """The ways ``value`` may show up in a message."""
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if not raw:
        return
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    yield text
    yield base64.b64encode(raw).decode("ascii")
    for line in text.splitlines():
        if len(line.strip()) >= MIN_LINE:
            yield line.strip()
    for word in _WORD_SEPARATORS.split(text):
        if len(word) >= MIN_WORD:
            yield word

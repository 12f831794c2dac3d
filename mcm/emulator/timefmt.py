"""Wire formats of time and quantities, as the real API server reads and writes them.

Guarantees:

- ``metav1.Time`` accepts any RFC 3339 input (``Z`` or an offset, any fraction) and is emitted as
  ``YYYY-MM-DDTHH:MM:SSZ`` in UTC, truncated to seconds.
- ``metav1.MicroTime`` accepts exactly six fractional digits (Go's
  ``2006-01-02T15:04:05.000000Z07:00``) and is emitted as ``....ffffffZ`` in UTC.
- Quantities given as JSON numbers become their decimal string; strings are kept as sent.
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = [
    "format_microtime",
    "format_time",
    "human_duration",
    "normalize_microtime",
    "normalize_time",
    "parse_time",
    "quantity_string",
]

_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_MICROTIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def parse_time(value: str) -> _dt.datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime; raise ``ValueError`` if malformed."""
    match = _RFC3339.match(value)
    if match is None:
        raise ValueError(f'parsing time "{value}" as RFC 3339: cannot parse')
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7)
    micros = int((fraction[1:] + "000000")[:6]) if fraction else 0
    zone = match.group(8)
    if zone in ("Z", "z"):
        offset = _dt.timedelta(0)
    else:
        sign = -1 if zone[0] == "-" else 1
        offset = sign * _dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    moment = _dt.datetime(year, month, day, hour, minute, second, micros, tzinfo=_dt.timezone(offset))
    return moment.astimezone(_dt.UTC)


def format_time(moment: _dt.datetime) -> str:
    """``metav1.Time`` wire form: UTC, seconds, ``Z``."""
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_microtime(moment: _dt.datetime) -> str:
    """``metav1.MicroTime`` wire form: UTC, six fractional digits, ``Z``."""
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def normalize_time(value: str) -> str:
    """Re-emit an RFC 3339 input as ``metav1.Time``; raise ``ValueError`` if malformed."""
    return format_time(parse_time(value))


def normalize_microtime(value: str) -> str:
    """Re-emit a MicroTime input in UTC; raise ``ValueError`` unless it has exactly six digits."""
    if _MICROTIME.match(value) is None:
        raise ValueError(f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse')
    return format_microtime(parse_time(value))


def quantity_string(value: object) -> object:
    """A quantity as the server stores it: numbers become decimal strings, anything else is kept."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if years < 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"

"""Values as Go's pflag parses and prints them: durations, booleans, integers, IPs, klog severities.

Guarantees: :func:`parse_duration` accepts exactly what Go's ``time.ParseDuration`` accepts
(``90s``, ``1m30s``, ``1.5h``, ``-5m``, ``0``; a bare number other than ``0`` is an error);
:func:`format_duration` prints Go's ``Duration.String`` (``12h0m0s``, ``1m30s``, ``500ms``);
:func:`parse_bool` accepts what ``strconv.ParseBool`` accepts; :func:`parse_severity` what
klog's ``--stderrthreshold`` accepts (a severity name in any case, or a number). Errors are
``ValueError`` with a message in Go's words.
"""

from __future__ import annotations

import ipaddress
import re

__all__ = [
    "SEVERITIES",
    "format_duration",
    "parse_bool",
    "parse_duration",
    "parse_int32",
    "parse_ip",
    "parse_severity",
    "parse_uint64",
]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT64_MAX = 2**64 - 1
SEVERITIES = ("INFO", "WARNING", "ERROR", "FATAL")
"""klog's severity names; a severity's number is its index."""


def parse_duration(text: str) -> float:
    """Seconds of a Go duration string."""
    body = text[1:] if text[:1] in "+-" else text
    sign = -1.0 if text.startswith("-") else 1.0
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f'time: invalid duration "{text}"')
    total, pos = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(body):
        if re.fullmatch(r"\d+\.?\d*", body):
            raise ValueError(f'time: missing unit in duration "{text}"')
        raise ValueError(f'time: invalid duration "{text}"')
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String``."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    nanos = round(abs(seconds) * 1e9)
    if nanos < 1_000_000_000:
        for unit, scale in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= scale:
                return f"{sign}{_fraction(nanos, scale)}{unit}"
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    secs = f"{_fraction(rest, 10**9)}s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return sign + secs


def _fraction(value: int, scale: int) -> str:
    whole, frac = divmod(value, scale)
    if not frac:
        return str(whole)
    digits = len(str(scale)) - 1
    return f"{whole}.{str(frac).zfill(digits).rstrip('0')}"


def parse_bool(text: str) -> bool:
    """``strconv.ParseBool``."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def parse_int32(text: str) -> int:
    """``strconv.ParseInt(text, 0, 32)`` (decimal, ``0x``, ``0o``, ``0b``, ``_`` separators)."""
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def parse_uint64(text: str) -> int:
    """``strconv.ParseUint(text, 0, 64)``."""
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax') from None
    if value < 0 or text.lstrip().startswith(("-", "+")):
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    if value > UINT64_MAX:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def parse_severity(text: str) -> int:
    """klog's ``severityValue.Set``: a name (``INFO`` … ``FATAL``, any case) or a decimal int32."""
    if text.upper() in SEVERITIES:
        return SEVERITIES.index(text.upper())
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def parse_ip(text: str) -> str:
    """An IPv4 or IPv6 address, as pflag's ``ip`` type checks it."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise ValueError(f'"{text}" is not a valid IP address') from None

"""Request-body JSON as the real server reads it: standard JSON only, errors in Go's words.

Guarantees:

- :func:`loads` refuses what ``encoding/json`` refuses and Python accepts: ``NaN``,
  ``Infinity`` and ``-Infinity``. Such a value can never be stored (a stored NaN would make every
  later list of the resource unencodable for strict clients).
- Errors are :class:`BodyError` (a ``ValueError``) whose text is Go's wording
  (``invalid character 'N' looking for beginning of value``, ``unexpected end of JSON input``),
  never Python's.
- :func:`check_finite` applies the same rule to values decoded from YAML (``.nan``, ``.inf``);
  :func:`from_yaml` also turns what YAML has and JSON has not into JSON values, as the real
  server's YAML-to-JSON step does: keys become strings, timestamps their ISO text, ``!!binary``
  base64.
- :func:`yaml_loads` reads a YAML body with the same nesting limit as JSON bodies
  (:data:`MAX_DEPTH`): deeper flow collections (``[[[[…``) are refused in linear time, before the
  YAML parser (whose cost grows much faster than the body) sees them.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from typing import Any

import yaml

__all__ = ["MAX_DEPTH", "BodyError", "check_finite", "from_yaml", "loads", "yaml_loads"]

MAX_DEPTH = 500
"""Nesting a YAML body may have (Python's JSON decoder stops near 1,000 by recursion)."""


class BodyError(ValueError):
    """An undecodable request body; the text is what the real server's decoder says."""


_CONTEXTS = {
    "Expecting value": "looking for beginning of value",
    "Extra data": "after top-level value",
    "Expecting ':' delimiter": "after object key",
    "Expecting ',' delimiter": "after object key:value pair",
    "Expecting property name enclosed in double quotes": "looking for beginning of object key string",
}


def _refuse_constant(name: str) -> Any:
    if name.startswith("-"):
        raise BodyError("invalid character 'I' in numeric literal")
    raise BodyError(f"invalid character '{name[0]}' looking for beginning of value")


def loads(raw: bytes | str) -> Any:
    """Decode standard JSON (RFC 8259); raise :class:`BodyError` otherwise."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise BodyError("invalid character looking for beginning of value: invalid UTF-8") from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except BodyError:
        raise
    except json.JSONDecodeError as exc:
        raise BodyError(_go_message(text, exc.pos, exc.msg)) from exc
    except (ValueError, RecursionError) as exc:
        raise BodyError("exceeded max depth") from exc


def _go_message(text: str, pos: int, msg: str) -> str:
    rest = text[pos:].lstrip(" \t\r\n")
    if not rest:
        return "unexpected end of JSON input"
    char = rest[0]
    shown = char if char.isprintable() else repr(char)[1:-1]
    context = _CONTEXTS.get(msg, "looking for beginning of value")
    if msg.startswith(("Invalid control character", "Unterminated string", "Invalid \\escape")):
        return "invalid character in string literal"
    return f"invalid character '{shown}' {context}"


def check_finite(value: Any) -> None:
    """Raise :class:`BodyError` if a decoded value holds NaN or an infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BodyError("json: unsupported value: " + ("NaN" if math.isnan(value) else "+Inf"))
    if isinstance(value, dict):
        for item in value.values():
            check_finite(item)
    elif isinstance(value, list):
        for item in value:
            check_finite(item)


def from_yaml(value: Any) -> Any:
    """A YAML-decoded value as JSON (see the module guarantees); :class:`BodyError` for NaN/Inf."""
    if isinstance(value, dict):
        return {_key(key): from_yaml(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [from_yaml(item) for item in value]
    if isinstance(value, _dt.date | _dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    check_finite(value)
    return value


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    converted = from_yaml(key)
    return converted if isinstance(converted, str) else json.dumps(converted, separators=(",", ":"))


def yaml_loads(raw: bytes) -> Any:
    """Decode a YAML body into JSON values; raise :class:`BodyError` (or ``yaml.YAMLError``)."""
    text = raw.decode("utf-8")
    if _flow_depth(text) > MAX_DEPTH:
        raise BodyError("exceeded max depth")
    return from_yaml(yaml.safe_load(text))


def _flow_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` (brackets inside quotes count too: a bound, not a parse)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest

"""A deep copy of an Event for the recording pipeline: dicts and lists copied directly, strings,
numbers, booleans and ``None`` shared (they are immutable), anything else ``copy.deepcopy``-ed.
Several times faster than ``copy.deepcopy`` on JSON-shaped data, with the same guarantee: the
copy shares nothing mutable with the original."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["clone"]

_SHARED = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    if kind in _SHARED:
        return value
    return copy.deepcopy(value)


def clone(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``event`` that may be changed without affecting the original."""
    copied: dict[str, Any] = _copied(event)
    return copied

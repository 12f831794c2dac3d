"""Normalisation of wire values on every write: quantities as strings, ``metav1.Time`` in seconds.

Guarantees:

- :func:`map_at` is copy-on-write: it returns a new object along the changed path and never
  mutates its input; a missing path leaves the object as it is.
- :func:`normalizer` builds a per-kind ``normalize(obj)`` from dotted paths (``[]`` maps over a
  list): quantity maps become strings, ``metav1.Time`` values are re-emitted as
  ``YYYY-MM-DDTHH:MM:SSZ``, MicroTime values must have six fractional digits. A malformed time
  raises :class:`~mcm.emulator.validation.DecodeError` (the server answers 400).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcm.emulator.store import Obj
from mcm.emulator.timefmt import normalize_microtime, normalize_time, quantity_string
from mcm.emulator.validation import DecodeError

__all__ = ["map_at", "normalizer", "time_map"]


def map_at(obj: Obj, path: str, fn: Callable[[Any], Any]) -> Obj:
    """Copy-on-write update of the value at a dotted path; ``[]`` maps over a list."""
    head, _, rest = path.partition(".")
    if head.endswith("[]"):
        key = head[:-2]
        items = obj.get(key)
        if not isinstance(items, list):
            return obj
        mapped = [map_at(item, rest, fn) if isinstance(item, dict) and rest else item for item in items]
        return {**obj, key: mapped}
    if head not in obj or obj[head] is None:
        return obj
    if not rest:
        return {**obj, head: fn(obj[head])}
    child = obj[head]
    if not isinstance(child, dict):
        return obj
    return {**obj, head: map_at(child, rest, fn)}


def _quantity_map(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: quantity_string(q) for k, q in value.items()}


def _time(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return normalize_time(value)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None


def _microtime(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return normalize_microtime(value)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None


def time_map(value: Any) -> Any:
    """Normalise every value of a map of ``metav1.Time`` (PDB ``disruptedPods``)."""
    if not isinstance(value, dict):
        return value
    return {k: _time(t) for k, t in value.items()}


def normalizer(
    quantities: tuple[str, ...] = (), times: tuple[str, ...] = (), micro: tuple[str, ...] = ()
) -> Callable[[Obj], Obj]:
    """A ``normalize(obj)`` for the given quantity-map, Time and MicroTime paths."""

    def normalize(obj: Obj) -> Obj:
        for path in quantities:
            obj = map_at(obj, path, _quantity_map)
        for path in times:
            obj = map_at(obj, path, _time)
        for path in micro:
            obj = map_at(obj, path, _microtime)
        return obj

    return normalize

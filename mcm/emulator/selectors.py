"""Field selectors: parsing and matching. Label selectors are :mod:`mcm.runtime.labels`.

Guarantees:

- Field selectors accept ``f=v``, ``f==v``, ``f!=v``; values may escape ``\\,``, ``\\=`` and
  ``\\\\``. Unsupported fields are rejected by :func:`compile_field_selector`.
- A compiled selector is a pure predicate on a stored object dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldRequirement", "compile_field_selector", "parse_field_selector"]

Predicate = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class FieldRequirement:
    """One field requirement: ``field op value`` with ``op`` in ``= !=``."""

    field: str
    op: str
    value: str


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        raise ValueError("invalid field selector: trailing escape")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(text: str) -> list[FieldRequirement]:
    """Parse a field selector string; ``ValueError`` on bad syntax."""
    requirements: list[FieldRequirement] = []
    if not text.strip():
        return requirements
    for part in _split_unescaped(text, ","):
        match = re.match(r"^\s*([^=!\s]+)\s*(==|!=|=)(.*)$", part)
        if match is None:
            raise ValueError(f"invalid selector: '{text}'; can't understand '{part}'")
        op = "!=" if match.group(2) == "!=" else "="
        value = match.group(3).strip()
        if re.search(r"(?<!\\)[=!]", value):
            raise ValueError(f"invalid selector: '{text}'; can't understand '{part}'")
        requirements.append(FieldRequirement(match.group(1), op, _unescape(value)))
    return requirements


def compile_field_selector(
    text: str, extractors: Mapping[str, Callable[[dict[str, Any]], str | None]], namespaced: bool
) -> Predicate:
    """Compile a field selector using the kind's extractors; ``ValueError`` names an unsupported field."""
    requirements = parse_field_selector(text)
    if not requirements:
        return _match_all
    getters: list[tuple[Callable[[dict[str, Any]], str | None], FieldRequirement]] = []
    for req in requirements:
        getter = _standard_getter(req.field, namespaced) or extractors.get(req.field)
        if getter is None:
            raise ValueError(f"field label not supported: {req.field}")
        getters.append((getter, req))

    def predicate(obj: dict[str, Any]) -> bool:
        for getter, req in getters:
            have = getter(obj)
            have_text = "" if have is None else have
            if (have_text == req.value) != (req.op == "="):
                return False
        return True

    return predicate


def _standard_getter(field: str, namespaced: bool) -> Callable[[dict[str, Any]], str | None] | None:
    if field == "metadata.name":
        return lambda obj: obj.get("metadata", {}).get("name")
    if field == "metadata.namespace" and namespaced:
        return lambda obj: obj.get("metadata", {}).get("namespace")
    return None


def _match_all(obj: dict[str, Any]) -> bool:
    del obj
    return True

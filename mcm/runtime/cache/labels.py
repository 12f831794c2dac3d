"""Label selectors for listers: parse the API's selector syntax and match label maps.

Supports every operator of ``k8s.io/apimachinery/pkg/labels``: ``k=v``, ``k==v``, ``k!=v``,
``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not exist), ``k>n`` and ``k<n``
(integers). Requirements are separated by commas and all must hold; the empty selector matches
everything. ``!=`` and ``notin`` also match objects without the label, as upstream.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Requirement", "Selector", "everything", "parse_selector", "selector_from_set"]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_RE = re.compile(rf"^({_KEY})\s+(in|notin)\s*\((.*)\)$")
_BINARY_RE = re.compile(rf"^({_KEY})\s*(==|=|!=|>|<)\s*([-A-Za-z0-9_.]*)$")
_EXISTS_RE = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclass(frozen=True)
class Requirement:
    """One condition on one label key."""

    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op in ("=", "in"):
            return present and value in self.values
        if op in ("!=", "notin"):
            return not present or value not in self.values
        if op == "exists":
            return present
        if op == "!":
            return not present
        return present and _compare(value, op, self.values[0])

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in ("in", "notin"):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        return f"{self.key}{self.operator}{self.values[0]}"


def _compare(value: str | None, op: str, bound: str) -> bool:
    try:
        number = int(value or "")
    except ValueError:
        return False
    return number > int(bound) if op == ">" else number < int(bound)


@dataclass(frozen=True)
class Selector:
    """A conjunction of requirements; no requirements means "everything"."""

    requirements: tuple[Requirement, ...] = ()

    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def everything() -> Selector:
    return Selector()


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """A selector requiring each ``key=value`` of ``labels``."""
    return Selector(tuple(Requirement(k, "=", (v,)) for k, v in sorted(labels.items())))


def parse_selector(text: str) -> Selector:
    """Parse a selector string; ``ValueError`` names the part that cannot be parsed."""
    return Selector(tuple(_parse_requirement(part) for part in _split_top_level(text)))


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    parts.append(current)
    stripped = [p.strip() for p in parts]
    if stripped == [""]:
        return []
    if any(not p for p in stripped) or depth != 0:
        raise ValueError(f"unable to parse requirement: {text!r}")
    return stripped


def _parse_requirement(part: str) -> Requirement:
    if match := _SET_RE.match(part):
        values = tuple(v.strip() for v in match.group(3).split(","))
        if any(not v for v in values):
            raise ValueError(f"unable to parse requirement: {part!r}: empty value in set")
        return Requirement(match.group(1), match.group(2), values)
    if match := _BINARY_RE.match(part):
        key, op, value = match.groups()
        if op in (">", "<") and not re.fullmatch(r"-?\d+", value):
            raise ValueError(f"unable to parse requirement: {part!r}: {op} needs an integer")
        return Requirement(key, "=" if op == "==" else op, (value,))
    if match := _EXISTS_RE.match(part):
        return Requirement(match.group(2), "!" if match.group(1) else "exists")
    raise ValueError(f"unable to parse requirement: {part!r}")

"""Label and field selectors: parsing (with the real server's error cases) and matching.

Guarantees:

- Label selectors accept ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``,
  ``!k``, ``k>N`` and ``k<N``, comma-joined (AND), with whitespace around operators.
  ``!=`` and ``notin`` also match objects without the key. Bad syntax or an invalid label key
  or value raises ``ValueError`` with a parser message.
- Field selectors accept ``f=v``, ``f==v``, ``f!=v``; values may escape ``\\,``, ``\\=`` and
  ``\\\\``. Unsupported fields are rejected by :func:`compile_field_selector`.
- A compiled selector is a pure predicate on a stored object dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldRequirement",
    "LabelRequirement",
    "compile_field_selector",
    "labels_match",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_label_selector_object",
]

Predicate = Callable[[dict[str, Any]], bool]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_TOKEN = re.compile(r"\s*(\(|\)|,|==|=|!=|!|<|>|[^\s(),=!<>]+)")


@dataclass(frozen=True)
class LabelRequirement:
    """One label requirement; ``op`` is one of ``= != in notin exists !exists > <``."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if not present or value is None:
            return False
        try:
            have, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > bound if self.op == ">" else have < bound


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if not key or _KEY.match(key) is None or len(name) > 63 or len(prefix) > 253:
        raise ValueError(f"invalid label key {key!r}: name part must consist of alphanumeric characters")


def _check_value(value: str) -> None:
    if len(value) > 63 or _VALUE.match(value) is None:
        raise ValueError(
            f"invalid label value: {value!r}: a valid label must be an empty string or consist of "
            "alphanumeric characters, '-', '_' or '.'"
        )


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    stripped = text.rstrip()
    while pos < len(stripped):
        match = _TOKEN.match(stripped, pos)
        if match is None:
            raise ValueError(f"unable to parse requirement: unexpected input at {pos}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError("unable to parse requirement: unexpected end of selector")
        self.pos += 1
        return token

    def parse(self) -> list[LabelRequirement]:
        requirements: list[LabelRequirement] = []
        if self.peek() is None:
            return requirements
        while True:
            requirements.append(self.requirement())
            token = self.peek()
            if token is None:
                return requirements
            if token != ",":
                raise ValueError(f"found '{token}', expected: ',' or 'end of string'")
            self.pos += 1

    def requirement(self) -> LabelRequirement:
        token = self.take()
        if token == "!":
            key = self.take()
            _check_key(key)
            return LabelRequirement(key, "!exists")
        key = token
        _check_key(key)
        op = self.peek()
        if op is None or op == ",":
            return LabelRequirement(key, "exists")
        self.pos += 1
        if op in ("=", "=="):
            return LabelRequirement(key, "=", (self.single_value(),))
        if op == "!=":
            return LabelRequirement(key, "!=", (self.single_value(),))
        if op in (">", "<"):
            bound = self.take()
            if not re.fullmatch(r"-?\d+", bound):
                raise ValueError(f"for 'Gt', 'Lt' operators, the value must be an integer: {bound!r}")
            return LabelRequirement(key, op, (bound,))
        if op in ("in", "notin"):
            return LabelRequirement(key, op, self.value_set())
        raise ValueError(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")

    def single_value(self) -> str:
        token = self.peek()
        if token is None or token == ",":
            return ""
        if token in ("(", ")", "=", "==", "!=", "!", "<", ">"):
            raise ValueError(f"found '{token}', expected: identifier")
        self.pos += 1
        _check_value(token)
        return token

    def value_set(self) -> tuple[str, ...]:
        if self.take() != "(":
            raise ValueError("found '', expected: '('")
        values: list[str] = []
        expect_value = True
        while True:
            token = self.take()
            if token == ")":
                if expect_value and values:
                    values.append("")
                return tuple(values) if values else ("",)
            if token == ",":
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if not expect_value:
                raise ValueError(f"found '{token}', expected: ',' or ')'")
            _check_value(token)
            values.append(token)
            expect_value = False


def parse_label_selector(text: str) -> Predicate:
    """Compile a label selector string into a predicate over objects; ``ValueError`` if invalid."""
    requirements = _LabelParser(text).parse()
    if not requirements:
        return _match_all

    def predicate(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(req.matches(labels) for req in requirements)

    return predicate


def labels_match(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Match a ``metav1.LabelSelector`` object; a nil or empty selector matches nothing here."""
    if not selector:
        return False
    requirements = _requirements_from_object(selector)
    if not requirements:
        return False
    return all(req.matches(labels) for req in requirements)


def selector_from_label_selector_object(selector: Mapping[str, Any]) -> Predicate:
    """Compile a ``metav1.LabelSelector`` object; an empty one matches everything."""
    requirements = _requirements_from_object(selector)

    def predicate(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(req.matches(labels) for req in requirements)

    return predicate


def _requirements_from_object(selector: Mapping[str, Any]) -> list[LabelRequirement]:
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    requirements = [
        LabelRequirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or []:
        op = operators.get(str(expr.get("operator")))
        if op is None:
            raise ValueError(f"{expr.get('operator')!r} is not a valid label selector operator")
        requirements.append(LabelRequirement(str(expr.get("key")), op, tuple(expr.get("values") or ())))
    return requirements


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

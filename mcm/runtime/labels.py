"""Label selectors (``k8s.io/apimachinery/pkg/labels``): the one parser and matcher in mcm.

Listers, the emulator's list/watch filtering and its PodDisruptionBudget matching all use this
module; it imports nothing else from mcm, so the emulator may import it.

Guarantees:

- :func:`parse_selector` accepts what ``labels.Parse`` accepts: ``k=v``, ``k==v``, ``k!=v``,
  ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not exist), ``k>n`` and ``k<n``
  (integers), comma-joined (all must hold), whitespace around tokens. Empty values are valid
  (``k=``, ``k in (a,,b)``, ``k in ()``). The empty selector matches everything.
- Invalid input raises ``ValueError`` whose message is upstream's (``unable to parse requirement:
  ...``, ``found 'x', expected: ...``): the emulator returns it verbatim as kube-apiserver does.
- Requirements are sorted by key and set values are sorted and de-duplicated, so ``str()`` is
  deterministic like upstream's ``String()``.
- ``!=`` and ``notin`` also match objects without the label; ``>``/``<`` match only labels whose
  value is an integer.
- :func:`selector_from_label_selector` converts a ``metav1.LabelSelector`` dict like
  ``LabelSelectorAsSelector``: ``None`` matches nothing, an empty one matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Requirement",
    "Selector",
    "everything",
    "is_valid_label_value",
    "new_requirement",
    "nothing",
    "parse_selector",
    "selector_from_label_selector",
    "selector_from_set",
]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_INTEGER_RE = re.compile(r"^-?\d+$")
_TOKEN_RE = re.compile(r"\s*(!=|==|=|!|\(|\)|,|<|>|[^\s!=(),<>]+)")

_KEY_MESSAGE = (
    "invalid label key: must be a qualified name (at most 63 characters, matching regex "
    "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]), with an optional DNS subdomain prefix (at most 253 "
    "characters, matching regex [a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*) and "
    'slash (/): e.g. "MyName" or "example.com/MyName"'
)
_VALUE_MESSAGE = (
    "invalid label value: must have at most 63 characters, matching regex "
    '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?: e.g. "MyValue" or ""'
)

#: Operators as ``Requirement.operator`` spells them; ``!`` is "does not exist".
OPERATORS = ("=", "==", "!=", "in", "notin", "exists", "!", ">", "<")
_SELECTOR_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


@dataclass(frozen=True)
class Requirement:
    """One condition on one label key; build checked ones with :func:`new_requirement`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op in ("=", "==", "in"):
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
    if value is None or _INTEGER_RE.match(value) is None:
        return False
    return int(value) > int(bound) if op == ">" else int(value) < int(bound)


def new_requirement(key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
    """A validated requirement (upstream ``NewRequirement``); ``ValueError`` says what is wrong."""
    _check_key(key)
    chosen = tuple(sorted(set(values)))
    if operator in ("in", "notin") and not chosen:
        raise ValueError("values: Invalid value: for 'in', 'notin' operators, values set can't be empty")
    if operator in ("=", "==", "!=") and len(chosen) != 1:
        raise ValueError("values: Invalid value: exact-match compatibility requires one single value")
    if operator in ("exists", "!") and chosen:
        raise ValueError("values: Invalid value: values set must be empty for exists and does not exist")
    if operator in (">", "<"):
        if len(chosen) != 1:
            raise ValueError("values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required")
        if _INTEGER_RE.match(chosen[0]) is None:
            raise ValueError(
                f'values[0]: Invalid value: "{chosen[0]}": '
                "for 'Gt', 'Lt' operators, the value must be an integer"
            )
    elif operator not in OPERATORS:
        raise ValueError(f'operator: Unsupported value: "{operator}"')
    for value in chosen:
        _check_value(value)
    return Requirement(key, operator, chosen)


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if _KEY_RE.match(key) is None or len(name) > 63 or len(prefix) > 253:
        raise ValueError(_KEY_MESSAGE)


def _check_value(value: str) -> None:
    if is_valid_label_value(value):
        raise ValueError(_VALUE_MESSAGE)


MAX_LABEL_VALUE = 63


def is_valid_label_value(value: str) -> list[str]:
    """apimachinery's ``validation.IsValidLabelValue``: what is wrong with ``value`` (empty: valid)."""
    problems = []
    if len(value) > MAX_LABEL_VALUE:
        problems.append(f"must be no more than {MAX_LABEL_VALUE} characters")
    if _VALUE_RE.match(value) is None:
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character"
        )
    return problems


@dataclass(frozen=True)
class Selector:
    """A conjunction of requirements; none means "everything" unless built by :func:`nothing`."""

    requirements: tuple[Requirement, ...] = ()
    match_nothing: bool = False

    def empty(self) -> bool:
        """Whether this selector matches everything (upstream ``Empty()``)."""
        return not self.requirements and not self.match_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether a label map satisfies every requirement."""
        if self.match_nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def matches_object(self, obj: Mapping[str, Any]) -> bool:
        """Whether an API object's ``metadata.labels`` satisfy every requirement."""
        return self.matches((obj.get("metadata") or {}).get("labels"))

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def everything() -> Selector:
    """The selector that matches every label map."""
    return Selector()


def nothing() -> Selector:
    """The selector that matches no label map."""
    return Selector(match_nothing=True)


def selector_from_set(labels: Mapping[str, str] | None) -> Selector:
    """A selector requiring each ``key=value`` of ``labels``; ``ValueError`` on an invalid pair."""
    return Selector(tuple(new_requirement(k, "=", (v,)) for k, v in sorted((labels or {}).items())))


def selector_from_label_selector(selector: Mapping[str, Any] | None) -> Selector:
    """Convert a ``metav1.LabelSelector`` dict; ``ValueError`` on an invalid operator, key or value."""
    if selector is None:
        return nothing()
    requirements = [
        new_requirement(str(k), "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or []:
        operator = _SELECTOR_OPERATORS.get(str(expression.get("operator")))
        if operator is None:
            raise ValueError(f'"{expression.get("operator")}" is not a valid label selector operator')
        values = [str(v) for v in expression.get("values") or ()]
        requirements.append(new_requirement(str(expression.get("key")), operator, values))
    return Selector(tuple(sorted(requirements, key=lambda r: r.key)))


def parse_selector(text: str) -> Selector:
    """Parse a selector string as ``labels.Parse`` does; ``ValueError`` carries upstream's message."""
    return Selector(tuple(sorted(_Parser(text).parse(), key=lambda r: r.key)))


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN_RE.match(stripped, position)
        if match is None:  # unreachable: every character starts some token
            raise ValueError(f"unable to parse requirement: unexpected input at {position}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


_SYMBOLS = frozenset({"!=", "==", "=", "!", "(", ")", ",", "<", ">"})
_BINARY = {"=": "=", "==": "==", "!=": "!=", ">": ">", "<": "<", "in": "in", "notin": "notin"}


def _is_identifier(token: str | None) -> bool:
    """Identifier in the "values" context, where ``in`` and ``notin`` are plain words."""
    return token is not None and token not in _SYMBOLS


class _Parser:
    """Recursive descent over the token list, mirroring upstream's states and messages."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.position += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        token = self.peek()
        if token is None:
            return requirements
        while True:
            if not (_is_identifier(token) or token == "!"):
                raise ValueError(f"found '{token}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except ValueError as exc:
                raise ValueError(f"unable to parse requirement: {exc}") from None
            separator = self.take()
            if separator is None:
                return requirements
            if separator != ",":
                raise ValueError(f"found '{separator}', expected: ',' or 'end of string'")
            token = self.peek()
            if not (_is_identifier(token) or token == "!"):
                raise ValueError(f"found '{token or ''}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = self.peek() == "!"
        if negated:
            self.position += 1
        key = self.take()
        if not _is_identifier(key) or key is None:
            raise ValueError(f"found '{key or ''}', expected: identifier")
        _check_key(key)
        if negated or self.peek() in (None, ","):
            return new_requirement(key, "!" if negated else "exists")
        token = self.take() or ""
        operator = _BINARY.get(token)
        if operator is None:
            raise ValueError(f"found '{token}', expected: '=', '!=', '==', 'in', notin'")
        if operator in ("in", "notin"):
            return new_requirement(key, operator, self.value_set())
        return new_requirement(key, operator, (self.exact_value(),))

    def exact_value(self) -> str:
        if self.peek() in (None, ","):
            return ""
        token = self.take()
        if not _is_identifier(token) or token is None:
            raise ValueError(f"found '{token}', expected: identifier")
        return token

    def value_set(self) -> list[str]:
        token = self.take()
        if token != "(":
            raise ValueError(f"found '{token or ''}' expected: '('")
        token = self.peek()
        if token == ")":
            self.position += 1
            return [""]
        if not (_is_identifier(token) or token == ","):
            raise ValueError(f"found '{token or ''}', expected: ',', ')' or identifier")
        values = self.value_list()
        closing = self.take()
        if closing != ")":
            raise ValueError(f"found '{closing or ''}', expected: ')'")
        return values

    def value_list(self) -> list[str]:
        values: list[str] = []
        while True:
            token = self.take()
            if _is_identifier(token) and token is not None:
                values.append(token)
                following = self.peek()
                if following == ")":
                    return values
                if following != ",":
                    raise ValueError(f"found '{following or ''}', expected: ',' or ')'")
            elif token == ",":
                if not values:
                    values.append("")
                if self.peek() == ")":
                    values.append("")
                    return values
                if self.peek() == ",":
                    self.position += 1
                    values.append("")
            else:
                raise ValueError(f"found '{token or ''}', expected: ',', or identifier")

"""Known fields of the built-in kinds, for ``fieldValidation=Strict`` (as kube-apiserver
refuses unknown fields of a write with it).

The table ``builtin_fields.json`` is generated from the ``kubernetes`` client's model field lists
(``tests/emulator/builtin_fields_gen.py``); it is loaded on first use.

Guarantees:

- :func:`unknown_paths` returns the paths of fields the kind's model does not declare, in document
  order, formatted like the real server's strict decoding errors (``spec.containers[0].bogus``).
  It descends into objects, lists and maps of declared models; free-form values (``object``,
  int-or-string, raw JSON) are not inspected.
- Kinds missing from the table (custom objects) report nothing.
- Never raises on malformed objects: a value of the wrong shape is not descended into (the kind's
  own decoding rules report it).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["TypeMismatch", "check_types", "json_kind", "unknown_paths"]

_TABLE = Path(__file__).with_name("builtin_fields.json")


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    data = json.loads(_TABLE.read_text(encoding="utf-8"))
    return data["kinds"], data["types"]


def unknown_paths(group: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """Paths of undeclared fields in ``obj``, a ``group``/``kind`` object; [] for unknown kinds."""
    kinds, types = _table()
    model = kinds.get(f"{group}/{kind}")
    if model is None:
        return []
    found: list[str] = []
    _walk(obj, model, "", types, found)
    return found


def _walk(value: Any, spec: str, path: str, types: dict[str, dict[str, str]], found: list[str]) -> None:
    if not spec or spec[0].islower():
        return
    if spec[0] == "[":
        if isinstance(value, list):
            for index, item in enumerate(value):
                _walk(item, spec[1:-1], f"{path}[{index}]", types, found)
        return
    if spec[0] == "{":
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(item, spec[1:-1], f"{path}[{key}]", types, found)
        return
    fields = types.get(spec)
    if fields is None or not isinstance(value, dict):
        return
    for key, item in value.items():
        child = f"{path}.{key}" if path else str(key)
        sub = fields.get(key)
        if sub is None:
            found.append(child)
        else:
            _walk(item, sub, child, types, found)


# --------------------------------------------------------------------------- JSON types

_QUANTITY_FIELDS = frozenset(
    {
        "limits",
        "requests",
        "capacity",
        "allocatable",
        "overhead",
        "hard",
        "used",
        "sizeLimit",
        "allocatedResources",
    }
)
_GO_SCALARS = {"string": "string", "integer": "int64", "boolean": "bool", "number": "float64"}
_PREFIX = re.compile(r"^(?:[A-Z][a-z]+)?V\d+(?:(?:alpha|beta)\d+)?(?=[A-Z])")


class TypeMismatch(ValueError):
    """A value whose JSON type the kind's Go struct cannot hold (Go's ``UnmarshalTypeError`` text)."""


def check_types(group: str, kind: str, obj: dict[str, Any]) -> None:
    """Raise :class:`TypeMismatch` for the first value of the wrong JSON type; unknown kinds pass.

    The message is Go's: ``json: cannot unmarshal number into Go struct field
    Container.spec.containers.name of type string``. ``null`` is accepted everywhere (Go leaves the
    zero value); quantity fields accept numbers, as ``resource.Quantity`` does.
    """
    kinds, types = _table()
    model = kinds.get(f"{group}/{kind}")
    if model is not None:
        _check_struct(obj, model, "", types)


def _struct_name(model: str) -> str:
    return _PREFIX.sub("", model)


def json_kind(value: Any) -> str:
    """How Go's ``encoding/json`` names a decoded JSON value in an ``UnmarshalTypeError``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "object"


def _go_type(spec: str) -> str:
    if spec[0] == "[":
        return "[]" + _go_type(spec[1:-1])
    if spec[0] == "{":
        return "map[string]" + _go_type(spec[1:-1])
    if spec[0].islower():
        return _GO_SCALARS[spec]
    return "v1." + _struct_name(spec)


_QUANTITY = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?")
QUANTITY_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def _check_quantities(value: Any) -> None:
    items = value.values() if isinstance(value, dict) else [value]
    for item in items:
        if item is None or (isinstance(item, int | float) and not isinstance(item, bool)):
            continue
        if not isinstance(item, str) or not _QUANTITY.fullmatch(item):
            raise TypeMismatch(QUANTITY_MESSAGE)


def _check_struct(value: Any, model: str, path: str, types: dict[str, dict[str, str]]) -> None:
    fields = types.get(model, {})
    owner = _struct_name(model)
    for key, item in value.items():
        spec = fields.get(key)
        if spec and key in _QUANTITY_FIELDS:
            _check_quantities(item)
        elif spec:
            _check(item, spec, f"{path}.{key}" if path else str(key), owner, types)


def _check(value: Any, spec: str, path: str, owner: str, types: dict[str, dict[str, str]]) -> None:
    if value is None or not spec:
        return
    if not _fits(value, spec):
        shown = json_kind(value)
        if spec == "integer" and isinstance(value, float):
            shown = f"number {value!r}"
        raise TypeMismatch(
            f"json: cannot unmarshal {shown} into Go struct field {owner}.{path} of type {_go_type(spec)}"
        )
    if spec[0] == "[":
        for item in value:
            _check(item, spec[1:-1], path, owner, types)
    elif spec[0] == "{":
        for item in value.values():
            _check(item, spec[1:-1], path, owner, types)
    elif not spec[0].islower():
        _check_struct(value, spec, path, types)


def _fits(value: Any, spec: str) -> bool:
    if spec[0] == "[":
        return isinstance(value, list)
    if spec[0] == "{" or not spec[0].islower():
        return isinstance(value, dict)
    if spec == "string":
        return isinstance(value, str)
    if spec == "boolean":
        return isinstance(value, bool)
    if spec == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    return isinstance(value, (int, float)) and not isinstance(value, bool)

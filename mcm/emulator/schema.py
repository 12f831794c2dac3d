"""Structural-schema handling of custom objects: pruning, defaulting and validation.

Implements the subset of apiextensions' OpenAPI v3 structural schemas that CRDs use in practice.

Guarantees:

- :func:`prune` drops every field the schema does not declare, unless the enclosing schema has
  ``x-kubernetes-preserve-unknown-fields: true`` (or ``additionalProperties``). At the root, and in
  ``x-kubernetes-embedded-resource`` objects, ``apiVersion``/``kind``/``metadata`` are kept and
  ``metadata`` keeps only ``ObjectMeta`` fields. It returns the dropped paths (``spec.foo``,
  ``spec.items[0].bar``) so the server can warn or, with ``fieldValidation=Strict``, reject.
- :func:`apply_defaults` fills the ``default`` of missing properties, top-down, inside objects that
  exist; a ``null`` in a non-nullable field is treated as missing (defaulted, or dropped when there
  is no default), as the real server does before validating.
- :func:`validate` checks ``type``, ``nullable``, ``required``, ``properties``,
  ``additionalProperties``, ``items``, ``enum``, ``pattern``, ``format`` (int32, int64, date-time),
  ``x-kubernetes-int-or-string``, minimum/maximum (with exclusive forms), min/max length and items,
  and uniqueness for ``x-kubernetes-list-type: set|map``. Messages follow kube-openapi's wording.
- All three are pure and never raise on malformed objects or schemas.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from mcm.emulator import validation as v
from mcm.emulator.timefmt import parse_time
from mcm.emulator.validation import FieldError

__all__ = ["OBJECT_META_FIELDS", "apply_defaults", "prune", "validate"]

Schema = Mapping[str, Any]

OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, with the common case (a JSON dict) without the ABC check."""
    return type(value) is dict or isinstance(value, Mapping)


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value: dicts, lists and scalars copied directly (several times faster
    than ``copy.deepcopy``); anything else is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


# --------------------------------------------------------------------------- pruning


def prune(obj: Mapping[str, Any], schema: Schema) -> tuple[dict[str, Any], list[str]]:
    """Return ``obj`` without undeclared fields, and the paths of the fields dropped."""
    dropped: list[str] = []
    result = _prune_resource(obj, schema, "", dropped)
    return result, dropped


def _prune_resource(obj: Mapping[str, Any], schema: Schema, path: str, dropped: list[str]) -> dict[str, Any]:
    rest = {k: val for k, val in obj.items() if k not in _RESOURCE_FIELDS}
    pruned = _prune_object(rest, schema, path, dropped)
    result = {k: json_copy(obj[k]) for k in ("apiVersion", "kind") if k in obj}
    meta = obj.get("metadata")
    if _is_map(meta):
        result["metadata"] = {k: json_copy(val) for k, val in meta.items() if k in OBJECT_META_FIELDS}
        dropped.extend(_child(_child(path, "metadata"), k) for k in meta if k not in OBJECT_META_FIELDS)
    elif meta is not None:
        result["metadata"] = json_copy(meta)
    result.update(pruned)
    return result


def _prune_value(value: Any, schema: Schema, path: str, dropped: list[str]) -> Any:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource"):
            return _prune_resource(value, schema, path, dropped)
        return _prune_object(value, schema, path, dropped)
    if isinstance(value, list):
        items = schema.get("items")
        if not _is_map(items):
            return json_copy(value)
        return [_prune_value(item, items, f"{path}[{i}]", dropped) for i, item in enumerate(value)]
    return value


def _prune_object(value: Mapping[str, Any], schema: Schema, path: str, dropped: list[str]) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if _is_map(properties) else {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    result: dict[str, Any] = {}
    for key, item in value.items():
        sub = properties.get(key)
        if _is_map(sub):
            result[key] = _prune_value(item, sub, _child(path, key), dropped)
        elif _is_map(additional):
            result[key] = _prune_value(item, additional, _child(path, key), dropped)
        elif preserve or additional is True:
            result[key] = json_copy(item)
        else:
            dropped.append(_child(path, key))
    return result


# --------------------------------------------------------------------------- defaulting


def apply_defaults(obj: Mapping[str, Any], schema: Schema, *, in_place: bool = False) -> dict[str, Any]:
    """Return ``obj`` with the schema's ``default`` values filled in where fields are missing: a
    copy, or ``obj`` itself changed with ``in_place`` (for a dict nobody else holds, such as what
    :func:`prune` returned)."""
    target = obj if in_place and type(obj) is dict else json_copy(dict(obj))
    result = _default_value(target, schema)
    return result if isinstance(result, dict) else dict(obj)


def _default_or_prune_null(value: dict[str, Any], key: str, schema: Schema) -> None:
    """Fill a missing field's default; a ``null`` in a non-nullable field counts as missing.

    Like apiextensions, a non-nullable ``null`` without a default is dropped before validation
    (Go clients send ``null`` for empty times), instead of failing with "must be of type".
    """
    if key in value and value[key] is None and not schema.get("nullable"):
        del value[key]
    if key not in value and "default" in schema:
        value[key] = json_copy(schema["default"])


_DEFAULTED: dict[int, tuple[Mapping[str, Any], tuple[tuple[str, Schema], ...]]] = {}
"""id of a ``properties`` map → (the map, its properties that have a ``default``). The entry
holds the map, so its id cannot be reused by another while the entry exists."""


def _defaulted(properties: Mapping[str, Any]) -> tuple[tuple[str, Schema], ...]:
    """The properties of ``properties`` that declare a ``default`` (computed once per map)."""
    entry = _DEFAULTED.get(id(properties))
    if entry is None or entry[0] is not properties:
        found = tuple((key, sub) for key, sub in properties.items() if _is_map(sub) and "default" in sub)
        entry = _DEFAULTED[id(properties)] = (properties, found)
    return entry[1]


def _default_value(value: Any, schema: Schema) -> Any:
    if isinstance(value, dict):
        properties = schema.get("properties")
        if _is_map(properties):
            # What _default_or_prune_null does for every property, without visiting the ones
            # the value lacks and the schema gives no default (most of a large schema).
            for key in [key for key, item in value.items() if item is None]:
                sub = properties.get(key)
                if _is_map(sub) and not sub.get("nullable"):
                    del value[key]
            for key, sub in _defaulted(properties):
                if key not in value:
                    value[key] = json_copy(sub["default"])
            for key, item in value.items():
                sub = properties.get(key)
                if isinstance(item, dict | list) and _is_map(sub):
                    value[key] = _default_value(item, sub)
        additional = schema.get("additionalProperties")
        if _is_map(additional):
            for key in list(value):
                if not (_is_map(properties) and key in properties):
                    _default_or_prune_null(value, key, additional)
                    if key in value:
                        value[key] = _default_value(value[key], additional)
        return value
    if isinstance(value, list):
        items = schema.get("items")
        if _is_map(items):
            return [_default_value(item, items) for item in value]
    return value


# --------------------------------------------------------------------------- validation


def validate(obj: Mapping[str, Any], schema: Schema) -> list[FieldError]:
    """Field errors of ``obj`` against ``schema`` (apiVersion/kind/metadata are not checked here)."""
    errors: list[FieldError] = []
    rest = {k: val for k, val in obj.items() if k not in _RESOURCE_FIELDS}
    _check(rest, schema, "", errors, root=True)
    return errors


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_matches(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == expected


def _check(value: Any, schema: Schema, path: str, errors: list[FieldError], *, root: bool = False) -> None:
    shown = path or "<root>"
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            errors.append(
                v.invalid(shown, "null", f'{shown} in body must be of type {schema["type"]}: "null"')
            )
        return
    if schema.get("x-kubernetes-int-or-string"):
        if _json_type(value) not in ("integer", "string") and not _type_matches(value, "integer"):
            detail = f"{shown} in body must be of type integer,string: {json.dumps(_json_type(value))}"
            errors.append(v.invalid(shown, _json_type(value), detail))
            return
    else:
        expected = schema.get("type")
        if isinstance(expected, str) and not _type_matches(value, expected):
            detail = f"{shown} in body must be of type {expected}: {json.dumps(_json_type(value))}"
            errors.append(v.invalid(shown, _json_type(value), detail))
            return
    _check_enum(value, schema, shown, errors)
    if isinstance(value, str):
        _check_string(value, schema, shown, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(value, schema, shown, errors)
    elif isinstance(value, list):
        _check_array(value, schema, path, errors)
    elif isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource") and not root:
            value = {k: val for k, val in value.items() if k not in _RESOURCE_FIELDS}
        _check_object(value, schema, path, errors)


def _check_enum(value: Any, schema: Schema, shown: str, errors: list[FieldError]) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        errors.append(v.not_supported(shown, value, [str(e) for e in enum]))


def _check_string(value: str, schema: Schema, shown: str, errors: list[FieldError]) -> None:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True
        if not matched:
            errors.append(v.invalid(shown, value, f"{shown} in body should match '{pattern}'"))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        errors.append(v.invalid(shown, value, f"{shown} in body should be at least {min_length} chars long"))
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        errors.append(
            FieldError("FieldValueTooLong", shown, f"may not be more than {max_length} bytes", value)
        )
    if schema.get("format") == "date-time":
        try:
            parse_time(value)
        except ValueError:
            errors.append(v.invalid(shown, value, f'{shown} in body must be of type date-time: "{value}"'))


def _check_number(value: float, schema: Schema, shown: str, errors: list[FieldError]) -> None:
    bounds = {"int32": _INT32, "int64": _INT64}.get(str(schema.get("format")))
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        errors.append(
            v.invalid(shown, value, f'{shown} in body must be of type {schema["format"]}: "{value}"')
        )
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float):
        if schema.get("exclusiveMinimum") and value <= minimum:
            errors.append(v.invalid(shown, value, f"{shown} in body should be greater than {minimum}"))
        elif value < minimum:
            errors.append(
                v.invalid(shown, value, f"{shown} in body should be greater than or equal to {minimum}")
            )
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float):
        if schema.get("exclusiveMaximum") and value >= maximum:
            errors.append(v.invalid(shown, value, f"{shown} in body should be less than {maximum}"))
        elif value > maximum:
            errors.append(
                v.invalid(shown, value, f"{shown} in body should be less than or equal to {maximum}")
            )


def _check_array(value: list[Any], schema: Schema, path: str, errors: list[FieldError]) -> None:
    shown = path or "<root>"
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        errors.append(v.invalid(shown, len(value), f"{shown} in body should have at least {min_items} items"))
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        errors.append(
            FieldError("FieldValueTooMany", shown, f"must have at most {max_items} items", len(value))
        )
    items = schema.get("items")
    if _is_map(items):
        for index, item in enumerate(value):
            _check(item, items, f"{path}[{index}]", errors)
    _check_list_uniqueness(value, schema, path, errors)


def _check_list_uniqueness(value: list[Any], schema: Schema, path: str, errors: list[FieldError]) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        identity = [json.dumps(item, sort_keys=True) for item in value]
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        identity = [
            json.dumps([item.get(k) for k in keys] if isinstance(item, dict) else item, sort_keys=True)
            for item in value
        ]
    else:
        return
    seen: set[str] = set()
    for index, marker in enumerate(identity):
        if marker in seen:
            errors.append(v.duplicate(f"{path}[{index}]", value[index]))
        seen.add(marker)


def _check_object(value: dict[str, Any], schema: Schema, path: str, errors: list[FieldError]) -> None:
    required = schema.get("required")
    if isinstance(required, list):
        errors.extend(v.required(_child(path, str(key))) for key in required if key not in value)
    properties = schema.get("properties")
    properties = properties if _is_map(properties) else {}
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        sub = properties.get(key)
        if _is_map(sub):
            _check(item, sub, _child(path, key), errors)
        elif _is_map(additional):
            _check(item, additional, _child(path, key), errors)

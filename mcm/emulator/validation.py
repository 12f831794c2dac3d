"""Field errors and the shared validators of well-known value syntaxes (names, labels, percents).

Guarantees:

- :class:`FieldError` mirrors upstream ``field.Error``: ``type`` is the cause reason
  (``FieldValueInvalid``, ``FieldValueRequired``, ...), ``field`` the dotted path with ``[i]``
  indices, ``detail`` the upstream wording; ``errors.field_error_message`` renders it.
- :class:`DecodeError` is raised by normalisation when a body cannot be decoded at all (a
  MicroTime without six digits, bad base64 in a Secret); the server answers 400
  ``<Kind> in version "<v>" cannot be handled as a <Kind>: <message>``.
- Validators never raise on malformed input: wrong types become field errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DecodeError",
    "FieldError",
    "duplicate",
    "forbidden",
    "invalid",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "label_errors",
    "not_supported",
    "qualified_name_errors",
    "required",
    "validate_int_or_percent",
]

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PERCENT = re.compile(r"^[0-9]+%$")

QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
    "regex used for validation is '[0-9]+%')"
)


@dataclass(frozen=True)
class FieldError:
    """One validation failure, as upstream's ``field.Error``."""

    type: str
    field: str
    detail: str
    value: Any = None


class DecodeError(ValueError):
    """The body cannot be decoded into the kind (the server answers 400 BadRequest)."""


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, detail, value)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, detail)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, detail)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", field, "", value)


def not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(json.dumps(v) for v in supported)
    return FieldError("FieldValueNotSupported", field, detail, value)


def is_dns1123_label(name: str) -> bool:
    return len(name) <= 63 and _DNS1123_LABEL.match(name) is not None


def is_dns1123_subdomain(name: str) -> bool:
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.match(name) is not None


def qualified_name_errors(name: str) -> list[str]:
    """Upstream ``IsQualifiedName`` messages for a label key, taint key or annotation key."""
    parts = name.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + QUALIFIED_NAME_MESSAGE.removeprefix("name part ")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif not is_dns1123_subdomain(prefix):
            errors.append("prefix part " + DNS1123_SUBDOMAIN_MESSAGE)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif _QUALIFIED_NAME.match(name) is None:
        errors.append(QUALIFIED_NAME_MESSAGE)
    return errors


def label_errors(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [invalid(path, labels, "must be a map of string keys to string values")]
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors.extend(invalid(path, key, msg) for msg in qualified_name_errors(str(key)))
        if not isinstance(value, str):
            errors.append(invalid(f"{path}[{key}]", value, "must be a string"))
        elif len(value) > 63:
            errors.append(invalid(path, value, "must be no more than 63 characters"))
        elif _LABEL_VALUE.match(value) is None:
            errors.append(invalid(path, value, LABEL_VALUE_MESSAGE))
    return errors


def validate_int_or_percent(value: Any, path: str) -> list[FieldError]:
    """A non-negative integer, or a string ``"<n>%"`` (PDB minAvailable/maxUnavailable)."""
    if isinstance(value, bool):
        return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    if isinstance(value, int):
        return [] if value >= 0 else [invalid(path, value, "must be greater than or equal to 0")]
    if isinstance(value, str):
        if _PERCENT.match(value) is None:
            return [invalid(path, value, PERCENT_MESSAGE)]
        if int(value[:-1]) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]

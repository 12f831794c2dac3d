"""ObjectMeta rules shared by every kind: names, generateName, labels, annotations, owner refs,
and the system fields the server owns (uid, resourceVersion, creationTimestamp, generation,
managedFields), as apimachinery's ``ValidateObjectMeta`` and the generic registry do.

All functions are pure: they return new dicts or lists of field errors and never mutate input.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Mapping
from typing import Any

from mcm.emulator.builtinfields import json_kind
from mcm.emulator.errors import Raw
from mcm.emulator.kinds import FieldError

__all__ = [
    "SYSTEM_FIELDS",
    "generate_name",
    "validate_metadata",
    "validate_name",
]


SYSTEM_FIELDS = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
)

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    r"is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
MAX_ANNOTATIONS_BYTES = 256 * 1024

_rng = random.Random()


def generate_name(base: str) -> str:
    """``base[:58]`` plus five random characters from the upstream alphabet."""
    return base[:58] + "".join(_rng.choice(_NAME_ALPHABET) for _ in range(5))


def new_uid() -> str:
    """A random UUID string."""
    return str(uuid.uuid4())


def validate_name(name: str, *, dns_label: bool = False, field: str = "metadata.name") -> list[FieldError]:
    """DNS-1123 subdomain (or label) rules for object names."""
    if dns_label:
        if len(name) > 63:
            return [FieldError("FieldValueInvalid", field, "must be no more than 63 characters", name)]
        if _DNS1123_LABEL.match(name) is None:
            return [FieldError("FieldValueInvalid", field, _LABEL_MESSAGE, name)]
        return []
    if len(name) > 253:
        return [FieldError("FieldValueInvalid", field, "must be no more than 253 characters", name)]
    if _DNS1123_SUBDOMAIN.match(name) is None:
        return [FieldError("FieldValueInvalid", field, _SUBDOMAIN_MESSAGE, name)]
    return []


def _qualified_name_errors(key: str, field: str) -> list[FieldError]:
    prefix, slash, name = key.rpartition("/")
    errors: list[FieldError] = []
    if slash and (not prefix or len(prefix) > 253 or _DNS1123_SUBDOMAIN.match(prefix) is None):
        errors.append(FieldError("FieldValueInvalid", field, "prefix part " + _SUBDOMAIN_MESSAGE, key))
    if not name or len(name) > 63 or _QUALIFIED_NAME.match(name) is None:
        detail = (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
        errors.append(FieldError("FieldValueInvalid", field, detail, key))
    return errors


def _label_errors(labels: Any) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [FieldError("FieldValueInvalid", "metadata.labels", "must be a map of strings", Raw("…"))]
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors += _qualified_name_errors(str(key), "metadata.labels")
        if not isinstance(value, str) or len(value) > 63 or _LABEL_VALUE.match(value) is None:
            detail = (
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            )
            errors.append(FieldError("FieldValueInvalid", "metadata.labels", detail, value))
    return errors


def _annotation_errors(annotations: Any) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return [FieldError("FieldValueInvalid", "metadata.annotations", "must be a map of strings", Raw("…"))]
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errors += _qualified_name_errors(str(key).lower(), "metadata.annotations")
        if not isinstance(value, str):
            errors.append(FieldError("FieldValueInvalid", "metadata.annotations", "must be a string", value))
            continue
        total += len(key) + len(value)
    if total > MAX_ANNOTATIONS_BYTES:
        errors.append(
            FieldError(
                "FieldValueTooLong",
                "metadata.annotations",
                f"must have at most {MAX_ANNOTATIONS_BYTES} bytes",
            )
        )
    return errors


def _owner_reference_errors(refs: Any) -> list[FieldError]:
    if refs is None:
        return []
    if not isinstance(refs, list):
        return [FieldError("FieldValueInvalid", "metadata.ownerReferences", "must be a list", Raw("…"))]
    errors: list[FieldError] = []
    controllers = 0
    for index, ref in enumerate(refs):
        field = f"metadata.ownerReferences[{index}]"
        if not isinstance(ref, Mapping):
            errors.append(FieldError("FieldValueInvalid", field, "must be an object", Raw("…")))
            continue
        for name in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(name):
                errors.append(FieldError("FieldValueRequired", f"{field}.{name}", ""))
        if ref.get("controller") is True:
            controllers += 1
    if controllers > 1:
        errors.append(
            FieldError(
                "FieldValueInvalid",
                "metadata.ownerReferences",
                "Only one reference can have Controller set to true",
                Raw("…"),
            )
        )
    return errors


def _finalizer_errors(finalizers: Any) -> list[FieldError]:
    if finalizers is None:
        return []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        return [FieldError("FieldValueInvalid", "metadata.finalizers", "must be a list of strings", Raw("…"))]
    errors: list[FieldError] = []
    for index, finalizer in enumerate(finalizers):
        if "/" not in finalizer and finalizer not in ("kubernetes", "orphan", "foregroundDeletion"):
            continue
        errors += _qualified_name_errors(finalizer, f"metadata.finalizers[{index}]")
    return errors


def validate_metadata(meta: Mapping[str, Any]) -> list[FieldError]:
    """Labels, annotations, owner references and finalizers."""
    return (
        _label_errors(meta.get("labels"))
        + _annotation_errors(meta.get("annotations"))
        + _owner_reference_errors(meta.get("ownerReferences"))
        + _finalizer_errors(meta.get("finalizers"))
    )


def drop_nulls(value: Any) -> Any:
    """Fields sent as ``null`` are treated as absent (recursively in maps)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


__all__ += ["drop_nulls", "new_uid"]


_STRING_FIELDS = (
    "name",
    "generateName",
    "namespace",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "selfLink",
)


def _unmarshal(value: Any, key: str, go_type: str) -> str:
    field = f"ObjectMeta.metadata.{key}"
    return f"json: cannot unmarshal {json_kind(value)} into Go struct field {field} of type {go_type}"


def decode_error(meta: Mapping[str, Any]) -> str | None:
    """The decoder's complaint about wrongly typed ObjectMeta fields, or None."""
    for key in _STRING_FIELDS:
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            return _unmarshal(value, key, "string")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            return _unmarshal(value, key, "map[string]string")
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        return _unmarshal(finalizers, "finalizers", "[]string")
    refs = meta.get("ownerReferences")
    if refs is not None and (not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs)):
        return _unmarshal(refs, "ownerReferences", "[]v1.OwnerReference")
    for key in ("generation", "deletionGracePeriodSeconds"):
        value = meta.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return _unmarshal(value, key, "int64")
    return None


__all__ += ["decode_error"]

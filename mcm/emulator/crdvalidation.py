"""CustomResourceDefinition validation, defaults and the establishment it gets on create
(as kube-apiserver's apiextensions validation and establishing controller do).

Guarantees:

- :func:`crd_errors` rejects what the real server rejects for these rules (name equals
  ``<plural>.<group>``, lowercase plural and singular, scope, at least one version, exactly one
  storage version, a schema on every served version) and immutable ``group``/``scope`` on update.
- :func:`crd_defaults` fills ``singular``/``listKind``, the conversion strategy, the cleanup
  finalizer, and the established status (``acceptedNames``, ``storedVersions``, the
  ``NamesAccepted`` and ``Established`` conditions). Running it on create makes a CRD established
  before the create is answered, so a client can use it at once.
- :func:`schemas_by_version` and :func:`is_established` read what the registry needs.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from mcm.emulator.store import Obj
from mcm.emulator.timefmt import format_time
from mcm.emulator.validation import (
    DNS1123_LABEL_MESSAGE,
    FieldError,
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    not_supported,
    required,
)

__all__ = [
    "CLEANUP_FINALIZER",
    "crd_defaults",
    "crd_errors",
    "established_status",
    "is_established",
    "schemas_by_version",
    "storage_version",
]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_SCOPES = ["Cluster", "Namespaced"]


def _names(crd: Mapping[str, Any]) -> dict[str, Any]:
    names = (crd.get("spec") or {}).get("names")
    return dict(names) if isinstance(names, Mapping) else {}


def _versions(crd: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    versions = (crd.get("spec") or {}).get("versions")
    if not isinstance(versions, list):
        return []
    return [v for v in versions if isinstance(v, Mapping)]


def storage_version(crd: Mapping[str, Any]) -> str | None:
    """The name of the version marked ``storage: true`` (the first, if several)."""
    for version in _versions(crd):
        if version.get("storage") is True:
            return str(version.get("name"))
    return None


def schemas_by_version(crd: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Served version name → its ``openAPIV3Schema`` (an empty schema if absent)."""
    result: dict[str, dict[str, Any]] = {}
    for version in _versions(crd):
        if version.get("served") is False:
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        result[str(version.get("name"))] = dict(schema) if isinstance(schema, Mapping) else {}
    return result


def is_established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(
        isinstance(c, Mapping) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )


def _name_errors(crd: Mapping[str, Any]) -> list[FieldError]:
    spec = crd.get("spec") or {}
    names = _names(crd)
    group = spec.get("group")
    errors: list[FieldError] = []
    if not group:
        errors.append(required("spec.group"))
    elif not is_dns1123_subdomain(str(group)) or "." not in str(group):
        errors.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    plural, singular, kind = names.get("plural"), names.get("singular"), names.get("kind")
    if not plural:
        errors.append(required("spec.names.plural"))
    elif not is_dns1123_label(str(plural)):
        errors.append(invalid("spec.names.plural", plural, DNS1123_LABEL_MESSAGE))
    if singular and not is_dns1123_label(str(singular)):
        errors.append(invalid("spec.names.singular", singular, DNS1123_LABEL_MESSAGE))
    if not kind:
        errors.append(required("spec.names.kind"))
    name = (crd.get("metadata") or {}).get("name")
    if plural and group and name != f"{plural}.{group}":
        errors.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    return errors


def _version_errors(crd: Mapping[str, Any]) -> list[FieldError]:
    versions = _versions(crd)
    if not versions:
        return [required("spec.versions", "must have exactly one version marked as storage version")]
    errors: list[FieldError] = []
    storage = [v for v in versions if v.get("storage") is True]
    if len(storage) != 1:
        errors.append(
            invalid(
                "spec.versions",
                [v.get("name") for v in versions],
                "must have exactly one version marked as storage version",
            )
        )
    seen: set[str] = set()
    for index, version in enumerate(versions):
        name = str(version.get("name") or "")
        if not name:
            errors.append(required(f"spec.versions[{index}].name"))
        elif name in seen:
            errors.append(FieldError("FieldValueDuplicate", f"spec.versions[{index}].name", "", name))
        seen.add(name)
        schema = (
            (version.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(version.get("schema"), Mapping)
            else None
        )
        if version.get("served", True) and not isinstance(schema, Mapping):
            errors.append(required(f"spec.versions[{index}].schema.openAPIV3Schema", "schemas are required"))
    return errors


def crd_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    """Validation of a CRD on create (``old`` None) and update."""
    spec = new.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    errors = _name_errors(new)
    scope = spec.get("scope")
    if scope not in _SCOPES:
        errors.append(not_supported("spec.scope", scope, _SCOPES))
    errors.extend(_version_errors(new))
    if old is not None:
        old_spec = old.get("spec") or {}
        for name in ("group", "scope"):
            if spec.get(name) != old_spec.get(name):
                errors.append(invalid(f"spec.{name}", spec.get(name), "field is immutable"))
    return errors


def _defaulted_names(names: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(names)
    kind = str(result.get("kind") or "")
    result.setdefault("singular", kind.lower())
    result.setdefault("listKind", f"{kind}List")
    return result


def established_status(crd: Mapping[str, Any], now: _dt.datetime) -> dict[str, Any]:
    """The status the establisher writes: accepted names, stored version, two True conditions."""
    stamp = format_time(now)
    stored = storage_version(crd)
    return {
        "acceptedNames": _defaulted_names(_names(crd)),
        "storedVersions": [stored] if stored else [],
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
    }


def crd_defaults(crd: Obj) -> Obj:
    """Defaults of a CRD; on create (no status yet) also its established status and cleanup finalizer."""
    spec = dict(crd.get("spec") or {})
    if isinstance(spec.get("names"), Mapping):
        spec["names"] = _defaulted_names(spec["names"])
    spec.setdefault("conversion", {"strategy": "None"})
    if (crd.get("status") or {}).get("conditions"):
        return {**crd, "spec": spec}
    meta = dict(crd.get("metadata") or {})
    finalizers = list(meta.get("finalizers") or [])
    if CLEANUP_FINALIZER not in finalizers:
        finalizers.append(CLEANUP_FINALIZER)
    meta["finalizers"] = finalizers
    result = {**crd, "spec": spec, "metadata": meta}
    result["status"] = established_status(result, _dt.datetime.now(_dt.UTC))
    return result

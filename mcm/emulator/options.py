"""Query parameters of writes, checked as the real server checks its ``*Options``
(``CreateOptions``, ``UpdateOptions``, ``PatchOptions``, ``DeleteOptions``).

Guarantees:

- Integers parse like Go's ``strconv.ParseInt`` (base 10, 64 bits); a bad one is 400 BadRequest
  with Go's text (``strconv.ParseInt: parsing "x": invalid syntax``), never Python's.
- ``dryRun``, ``fieldManager``, ``fieldValidation`` and (on deletes) ``propagationPolicy`` are
  validated in upstream order; failures are 422 Invalid against ``CreateOptions.meta.k8s.io``,
  ``UpdateOptions…``, ``PatchOptions…`` or ``DeleteOptions…``, as ``ValidateCreateOptions`` and
  friends report them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcm.emulator import errors
from mcm.emulator.errors import Raw
from mcm.emulator.validation import FieldError

__all__ = ["go_int", "validate_delete", "validate_write"]

_INT64_MAX = 2**63 - 1
_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}
_PROPAGATION = ("Foreground", "Background", "Orphan")
FIELD_MANAGER_MAX = 128


def go_int(text: str) -> int:
    """Go ``strconv.ParseInt(text, 10, 64)``; 400 BadRequest with Go's message otherwise."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def _dry_run_errors(query: Mapping[str, str]) -> list[FieldError]:
    value = query.get("dryRun")
    if value is None or value == "All":
        return []
    return [
        FieldError(
            "FieldValueNotSupported", "dryRun", 'supported values: "All"', Raw(f'[]string{{"{value}"}}')
        )
    ]


def _field_manager_errors(query: Mapping[str, str]) -> list[FieldError]:
    manager = query.get("fieldManager", "")
    if len(manager.encode("utf-8")) > FIELD_MANAGER_MAX:
        return [
            FieldError("FieldValueTooLong", "fieldManager", f"may not be more than {FIELD_MANAGER_MAX} bytes")
        ]
    if any(not ch.isprintable() for ch in manager):
        return [
            FieldError("FieldValueInvalid", "fieldManager", "must only contain printable characters", manager)
        ]
    return []


def _field_validation_errors(query: Mapping[str, str]) -> list[FieldError]:
    value = query.get("fieldValidation", "")
    if value in ("", "Ignore", "Warn", "Strict"):
        return []
    return [
        FieldError(
            "FieldValueNotSupported",
            "fieldValidation",
            'supported values: "", "Ignore", "Strict", "Warn"',
            value,
        )
    ]


def _options_invalid(kind: str, errs: list[FieldError]) -> errors.ApiStatusError:
    return errors.invalid(kind, "meta.k8s.io", "", errs, qualified_kind=f"{kind}.meta.k8s.io")


def validate_write(verb: str, query: Mapping[str, str], *, apply_patch: bool = False) -> None:
    """Check the options of a create, update or patch (422 Invalid on failure)."""
    errs = _field_manager_errors(query) + _dry_run_errors(query) + _field_validation_errors(query)
    if verb == "patch" and "force" in query and not apply_patch:
        errs.append(FieldError("FieldValueForbidden", "force", "may not be specified for non-apply patch"))
    if errs:
        raise _options_invalid(_OPTIONS_KIND[verb], errs)


def validate_delete(options: Mapping[str, Any], query: Mapping[str, str]) -> None:
    """Check delete options (body or query) like ``ValidateDeleteOptions`` (422 Invalid)."""
    errs: list[FieldError] = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        errs.append(
            FieldError(
                "FieldValueInvalid",
                "propagationPolicy",
                "orphanDependents and deletionPropagation cannot be both set",
                policy,
            )
        )
    if policy is not None and policy not in _PROPAGATION:
        errs.append(
            FieldError(
                "FieldValueNotSupported",
                "propagationPolicy",
                'supported values: "Foreground", "Background", "Orphan", "nil"',
                policy,
            )
        )
    dry_run = options.get("dryRun")
    if isinstance(dry_run, list) and any(v != "All" for v in dry_run):
        shown = ", ".join(f'"{v}"' for v in dry_run)
        errs.append(
            FieldError(
                "FieldValueNotSupported", "dryRun", 'supported values: "All"', Raw(f"[]string{{{shown}}}")
            )
        )
    else:
        errs += _dry_run_errors(query)
    if errs:
        raise _options_invalid("DeleteOptions", errs)

"""API error bodies (``metav1.Status``) and the exception that carries them.

Every failure inside the emulator is raised as :class:`ApiStatusError`; the HTTP layer turns it
into a response with ``err.code``, ``err.status`` as the JSON body and ``err.headers``. There is
one builder per kind of ``Status`` the real server answers with (apimachinery's
``pkg/api/errors``); messages match the real server's.

Guarantees:

- Bodies are complete ``Status`` objects (``kind``, ``apiVersion``, ``metadata``, ``status``,
  ``message``, ``reason``, ``details``, ``code``), so typed clients decode them.
- ``details.group`` is omitted for the core group; ``details.kind`` is the resource name except
  for ``Invalid``, where it is the Kind.
- Field errors render like upstream ``field.Error``: ``<field>: <Type text>: <value>: <detail>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "ApiStatusError",
    "FieldErrorLike",
    "Raw",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "field_error_message",
    "forbidden",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "namespace_terminating",
    "not_acceptable",
    "not_found",
    "resource_not_found",
    "service_unavailable",
    "status_failure",
    "status_success",
    "timeout",
    "too_large_resource_version",
    "too_many_requests",
    "unauthorized",
    "unsupported_media_type",
]

Status = dict[str, Any]


class ApiStatusError(Exception):
    """A request failure: HTTP ``code``, the ``Status`` body, and extra response headers."""

    def __init__(self, status: Status, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status.get("message", ""))
        self.status = status
        self.code: int = int(status.get("code", 500))
        self.message: str = str(status.get("message", ""))
        self.reason: str = str(status.get("reason", ""))
        self.headers: dict[str, str] = dict(headers or {})


class FieldErrorLike(Protocol):
    """What :func:`invalid` needs from a field error (``strategies.FieldError`` fits)."""

    @property
    def type(self) -> str: ...

    @property
    def field(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def value(self) -> Any: ...


class Raw(str):
    """A field-error value rendered verbatim (no quotes), e.g. ``Raw("0x0")``."""

    __slots__ = ()


_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTypeInvalid": "Invalid value",
    "InternalError": "Internal error",
}
_TYPES_WITH_VALUE = {
    "FieldValueNotFound",
    "FieldValueDuplicate",
    "FieldValueInvalid",
    "FieldValueNotSupported",
    "FieldValueTypeInvalid",
}


def _render_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def _error_body(err: FieldErrorLike) -> str:
    text = _TYPE_TEXT.get(err.type, err.type)
    if err.type in _TYPES_WITH_VALUE:
        text += ": " + _render_value(err.value)
    if err.detail:
        text += ": " + err.detail
    return text


def field_error_message(err: FieldErrorLike) -> str:
    """The full upstream rendering, ``<field>: <body>``."""
    body = _error_body(err)
    return f"{err.field}: {body}" if err.field else body


def status_failure(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> Status:
    """A failure ``Status`` body; ``details`` is left out when empty or None."""
    status: Status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        status["details"] = dict(details)
    status["code"] = code
    if not reason:
        del status["reason"]
    return status


def status_success(name: str, group: str, resource: str, uid: str) -> Status:
    """The success ``Status`` answered for an immediate delete of some kinds."""
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def _err(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> ApiStatusError:
    return ApiStatusError(status_failure(code, reason, message, details))


def not_found(group: str, resource: str, name: str) -> ApiStatusError:
    """404: ``<res> "<name>" not found``."""
    return _err(
        404, "NotFound", f'{_qualified(resource, group)} "{name}" not found', _details(name, group, resource)
    )


def resource_not_found() -> ApiStatusError:
    """404 for an unknown path or resource."""
    return _err(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, resource: str, name: str) -> ApiStatusError:
    """409 AlreadyExists."""
    message = f'{_qualified(resource, group)} "{name}" already exists'
    return _err(409, "AlreadyExists", message, _details(name, group, resource))


def conflict(group: str, resource: str, name: str, reason_text: str | None = None) -> ApiStatusError:
    """409 Conflict; by default the optimistic-concurrency text."""
    text = reason_text or (
        "the object has been modified; please apply your changes to the latest version and try again"
    )
    message = f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {text}'
    return _err(409, "Conflict", message, _details(name, group, resource))


def invalid(
    kind: str, group: str, name: str, errors: Sequence[FieldErrorLike], *, qualified_kind: str | None = None
) -> ApiStatusError:
    """422 Invalid with one cause per field error."""
    rendered = [field_error_message(e) for e in errors]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    kind_text = qualified_kind or (f"{kind}.{group}" if group else kind)
    details = _details(name, group, kind)
    if not name:
        del details["name"]
    details["causes"] = [{"reason": e.type, "message": _error_body(e), "field": e.field} for e in errors]
    return _err(422, "Invalid", f'{kind_text} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiStatusError:
    """400 BadRequest."""
    return _err(400, "BadRequest", message)


def namespace_terminating(group: str, resource: str, name: str, namespace: str) -> ApiStatusError:
    """403 for a create inside a terminating namespace."""
    message = (
        f'{_qualified(resource, group)} "{name}" is forbidden: unable to create new content in namespace '
        f"{namespace} because it is being terminated"
    )
    details = _details(name, group, resource)
    details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return _err(403, "Forbidden", message, details)


def forbidden(message: str, details: Mapping[str, Any] | None = None) -> ApiStatusError:
    """403 Forbidden with a free message."""
    return _err(403, "Forbidden", message, details)


def unauthorized() -> ApiStatusError:
    """401 Unauthorized."""
    return _err(401, "Unauthorized", "Unauthorized")


def method_not_allowed(method: str) -> ApiStatusError:
    """405 MethodNotAllowed."""
    return _err(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})"
    )


def unsupported_media_type(content_type: str, smp_allowed: bool) -> ApiStatusError:
    """415 for a patch type the resource does not accept."""
    accepted = "application/json-patch+json, application/merge-patch+json"
    if smp_allowed:
        accepted += ", application/strategic-merge-patch+json"
    message = f"the body of the request was in an unknown format - accepted media types include: {accepted}"
    del content_type
    return _err(415, "UnsupportedMediaType", message)


def unsupported_body_type(*, protobuf: bool) -> ApiStatusError:
    """415 for a create/update body in a format the resource does not read."""
    accepted = "application/json, application/yaml"
    if protobuf:
        accepted += ", application/vnd.kubernetes.protobuf"
    message = f"the body of the request was in an unknown format - accepted media types include: {accepted}"
    return _err(415, "UnsupportedMediaType", message)


__all__ += ["unsupported_body_type"]


def not_acceptable() -> ApiStatusError:
    """406 when JSON is not acceptable to the client."""
    return _err(406, "NotAcceptable", "only the following media types are accepted: application/json")


def expired(message: str) -> ApiStatusError:
    """410 Expired."""
    return _err(410, "Expired", message)


def too_large_resource_version(requested: int, current: int) -> ApiStatusError:
    """504 after waiting in vain for a future resourceVersion."""
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    message = f"Timeout: Too large resource version: {requested}, current: {current}"
    return ApiStatusError(status_failure(504, "Timeout", message, details), {"Retry-After": "1"})


def too_many_requests(
    message: str, details: Mapping[str, Any] | None, retry_after: int | None
) -> ApiStatusError:
    """429 TooManyRequests, with ``Retry-After`` when ``retry_after`` is given."""
    body_details = dict(details or {})
    headers: dict[str, str] = {}
    if retry_after is not None:
        body_details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiStatusError(status_failure(429, "TooManyRequests", message, body_details), headers)


def internal_error(text: str) -> ApiStatusError:
    """500 InternalError."""
    details = {"causes": [{"message": text}]}
    return _err(500, "InternalError", f"Internal error occurred: {text}", details)


def storage_error(text: str) -> ApiStatusError:
    """500 whose message is ``text`` and that has no reason: an error the storage layer returns
    without an API status (kube-apiserver's ``resourceVersion should not be set on objects to be
    created``)."""
    return _err(500, "", text)


def service_unavailable(text: str = "the server is currently unable to handle the request") -> ApiStatusError:
    """503 ServiceUnavailable."""
    return _err(503, "ServiceUnavailable", text)


def timeout(text: str) -> ApiStatusError:
    """504 Timeout."""
    return _err(504, "Timeout", f"Timeout: {text}")


def entity_too_large(limit: int) -> ApiStatusError:
    """413 for an oversized request body."""
    return _err(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def entity_too_large_object() -> ApiStatusError:
    """413 for an object over the storage limit (etcd's ``request is too large``)."""
    return _err(413, "RequestEntityTooLarge", "Request entity too large: etcdserver: request is too large")


__all__ += ["entity_too_large", "entity_too_large_object"]

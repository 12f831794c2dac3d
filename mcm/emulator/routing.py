"""URL -> RequestInfo, like the real server's request-info resolver
(apiserver's ``pkg/endpoints/request/requestinfo.go``).

Guarantees:

- ``/api/v1/...`` is the core group; ``/apis/{group}/{version}/...`` any other group.
- ``namespaces/{ns}/{resource}...`` selects a namespace, except ``namespaces/{name}/status`` and
  ``.../finalize``, which are subresources of the namespace object (upstream's rule).
- The verb follows the audit classification: GET object ``get``, GET collection ``list`` (or
  ``watch`` with ``watch=true``), POST ``create``, PUT ``update``, PATCH ``patch``, DELETE object
  ``delete``, DELETE collection ``deletecollection``.
- Path segments are percent-decoded; a name that is ``.``/``..`` or contains ``/`` or ``%`` after
  decoding is rejected (``RequestInfo.bad_name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["RequestInfo", "parse_bool", "resolve"]

_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_TRUE = ("1", "t", "T", "true", "TRUE", "True")
_FALSE = ("0", "f", "F", "false", "FALSE", "False")


def parse_bool(value: str | None) -> bool | None:
    """Go ``strconv.ParseBool``; None for absent, ``ValueError`` for anything else."""
    if value is None:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{value}": invalid syntax')


@dataclass(frozen=True)
class RequestInfo:
    """What a request addresses. ``kind`` is ``resource`` or a non-resource path kind."""

    kind: str
    path: str
    verb: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    bad_name: bool = False
    extra_parts: int = 0

    @property
    def is_collection(self) -> bool:
        """Whether the path addresses a collection (no object name)."""
        return not self.name


def _segments(path: str) -> list[str]:
    return [unquote(p) for p in path.split("/") if p != ""]


def _bad(name: str) -> bool:
    return name in (".", "..") or "/" in name or "%" in name


def resolve(method: str, path: str, watch: bool) -> RequestInfo:
    """Classify a request path."""
    parts = _segments(path)
    if not parts:
        return RequestInfo("root", path)
    head = parts[0]
    if head in ("version", "healthz", "livez", "readyz", "openapi"):
        return RequestInfo(head, path)
    if head == "api":
        if len(parts) == 1:
            return RequestInfo("api", path)
        if len(parts) == 2:
            return RequestInfo("resourcelist", path, group="", version=parts[1])
        return _resource(method, path, "", parts[1], parts[2:], watch=watch)
    if head == "apis":
        if len(parts) == 1:
            return RequestInfo("apis", path)
        if len(parts) == 2:
            return RequestInfo("group", path, group=parts[1])
        if len(parts) == 3:
            return RequestInfo("resourcelist", path, group=parts[1], version=parts[2])
        return _resource(method, path, parts[1], parts[2], parts[3:], watch=watch)
    return RequestInfo("unknown", path)


def _resource(
    method: str, path: str, group: str, version: str, parts: list[str], *, watch: bool
) -> RequestInfo:
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
        else:
            namespace = ""
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else ""
    subresource = parts[2] if len(parts) > 2 else ""
    extra = max(0, len(parts) - 3)
    bad = bool(name) and _bad(name)
    verb = _verb(method, bool(name), watch)
    return RequestInfo(
        "resource",
        path,
        verb=verb,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        name=name,
        subresource=subresource,
        bad_name=bad,
        extra_parts=extra,
    )


def _verb(method: str, has_name: bool, watch: bool) -> str:
    if method in ("GET", "HEAD"):
        if has_name:
            return "get"
        return "watch" if watch else "list"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    return _VERBS.get(method, method.lower())

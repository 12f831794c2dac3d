"""Store keys and deletion tombstones: client-go's key functions and ``DeletedFinalStateUnknown``.

Guarantees:

- A namespaced object's key is ``"<namespace>/<name>"``; a cluster-scoped object's key is
  ``"<name>"`` (never ``"/<name>"``).
- :class:`ExplicitKey` values are their own key.
- A :class:`DeletedFinalStateUnknown` tombstone keys as the key it carries, when the
  deletion-handling key function is used (the informer's indexer uses it).
- :func:`split_meta_namespace_key` accepts one or two ``/``-separated parts and rejects anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcm.runtime.client.types import Object

__all__ = [
    "NAMESPACE_INDEX",
    "DeletedFinalStateUnknown",
    "ExplicitKey",
    "KeyFunc",
    "KeyFuncError",
    "deletion_handling_meta_namespace_key_func",
    "key_with",
    "meta_namespace_index_func",
    "meta_namespace_key_func",
    "object_key",
    "object_meta",
    "split_meta_namespace_key",
]

NAMESPACE_INDEX = "namespace"
"""Name of the standard index from namespace to keys (``cache.NamespaceIndex``)."""


class ExplicitKey(str):
    """A string that is already a store key; key functions return it unchanged."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """A delete the client never saw as an event (it happened while the watch was down).

    ``obj`` is the last known state and may be stale, or ``None``. Every delete handler must
    accept either an object or one of these and unwrap ``obj``.
    """

    key: str
    obj: Object | None


KeyFunc = Callable[[Any], str]
"""Computes the store key of an object; raises :class:`ValueError` when it cannot."""


class KeyFuncError(Exception):
    """A store could not compute the key of an object (``cache.KeyError``)."""

    def __init__(self, obj: object, err: BaseException) -> None:
        self.obj = obj
        self.err = err
        super().__init__(f"couldn't create key for object {_describe(obj)}: {err}")


def key_with(key_func: KeyFunc, obj: Any) -> str:
    """``key_func(obj)``; any failure is raised as :class:`KeyFuncError` (every store keys so)."""
    try:
        return key_func(obj)
    except Exception as exc:
        raise KeyFuncError(obj, exc) from exc


def _describe(obj: object) -> str:
    """A short description that never dumps object contents (they may hold secret data)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            return f"{obj.get('kind', 'object')} {meta.get('namespace', '')}/{meta.get('name', '')}"
        return f"{obj.get('kind', 'object')} without metadata"
    return type(obj).__name__


def object_meta(obj: Any) -> dict[str, Any]:
    """The ``metadata`` dict of an API object; ``ValueError`` if it has none."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        raise ValueError(f"object has no meta: {_describe(obj)}")
    return meta


def meta_namespace_key_func(obj: Any) -> str:
    """``"<namespace>/<name>"``, or ``"<name>"`` for cluster-scoped objects."""
    if isinstance(obj, ExplicitKey):
        return str(obj)
    meta = object_meta(obj)
    name = meta.get("name") or ""
    namespace = meta.get("namespace")
    if namespace:
        return f"{namespace}/{name}"
    return str(name)


def object_key(obj: Mapping[str, Any]) -> str:
    """:func:`meta_namespace_key_func` for any mapping, malformed ones included: never raises (a
    missing ``metadata``, name or namespace counts as empty). For log lines, queue keys and tallies
    of objects that came from a cache or a list."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) else ""
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


def deletion_handling_meta_namespace_key_func(obj: Any) -> str:
    """Like :func:`meta_namespace_key_func`, but a tombstone gives the key it carries."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return meta_namespace_key_func(obj)


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """Split a key into ``(namespace, name)``; the namespace is ``""`` for cluster-scoped keys."""
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f'unexpected key format: "{key}"')


def meta_namespace_index_func(obj: Any) -> list[str]:
    """Index function of :data:`NAMESPACE_INDEX`: the object's namespace."""
    return [str(object_meta(obj).get("namespace") or "")]

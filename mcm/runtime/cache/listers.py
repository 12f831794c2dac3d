"""Listers: read-only views of an informer's indexer, by namespace and label selector.

Guarantees:

- Reads never call the API; they return the cached instances, which must not be mutated.
- ``get`` raises :class:`~mcm.runtime.client.errors.NotFound` (404, reason ``NotFound``, message
  ``<resource>[.<group>] "<name>" not found`` with the lower-case singular kind) on a miss.
- ``list(selector)`` accepts a selector string, a parsed :class:`~mcm.runtime.labels.Selector`,
  a ``{label: value}`` map or ``None`` (everything, no matching done).
- Namespaced lists use the ``namespace`` index, falling back to a full scan (with a warning) when
  the index is missing; namespace ``""`` means all namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.runtime.cache.index import IndexerError
from mcm.runtime.cache.keys import NAMESPACE_INDEX
from mcm.runtime.cache.store import Indexer
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.types import Object
from mcm.runtime.labels import Selector, parse_selector, selector_from_set

__all__ = ["Lister", "NamespaceLister", "SelectorLike", "new_not_found", "to_selector"]

log = structlog.get_logger(__name__)

SelectorLike = str | Selector | Mapping[str, str] | None


def to_selector(selector: SelectorLike) -> Selector:
    if selector is None:
        return Selector()
    if isinstance(selector, Selector):
        return selector
    if isinstance(selector, str):
        return parse_selector(selector)
    return selector_from_set(selector)


def new_not_found(group: str, resource: str, name: str) -> NotFound:
    """The error the API server (and client-go's ``errors.NewNotFound``) gives for a missing object."""
    qualified = f"{resource}.{group}" if group else resource
    return NotFound(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'{qualified} "{name}" not found',
            "reason": "NotFound",
            "details": {"name": name, "group": group, "kind": resource},
            "code": 404,
        }
    )


def _labels_of(obj: Any) -> Mapping[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _select(objects: list[Object], selector: SelectorLike) -> list[Object]:
    parsed = to_selector(selector)
    if parsed.empty():
        return objects
    return [obj for obj in objects if parsed.matches(_labels_of(obj))]


class Lister:
    """Lists and gets one resource from an indexer.

    ``group`` and ``resource`` (the lower-case singular kind, e.g. ``"machine"``) name the
    resource in NotFound errors; ``namespaced`` says whether keys carry a namespace.
    """

    def __init__(self, indexer: Indexer, *, group: str, resource: str, namespaced: bool) -> None:
        self._indexer = indexer
        self.group = group
        self.resource = resource
        self.namespaced_resource = namespaced

    def list(self, selector: SelectorLike = None) -> list[Object]:
        """Every cached object (all namespaces) whose labels match ``selector``."""
        return _select(self._indexer.list(), selector)

    def get(self, name: str) -> Object:
        """The cached object stored under key ``name`` (cluster-scoped resources)."""
        obj = self._indexer.get_by_key(name)
        if obj is None:
            raise new_not_found(self.group, self.resource, name)
        return obj

    def namespaced(self, namespace: str) -> NamespaceLister:
        return NamespaceLister(self, namespace)

    @property
    def indexer(self) -> Indexer:
        return self._indexer


class NamespaceLister:
    """A lister restricted to one namespace."""

    def __init__(self, lister: Lister, namespace: str) -> None:
        self._lister = lister
        self.namespace = namespace

    def list(self, selector: SelectorLike = None) -> list[Object]:
        if not self.namespace:
            return self._lister.list(selector)
        indexer = self._lister.indexer
        try:
            objects = indexer.by_index(NAMESPACE_INDEX, self.namespace)
        except IndexerError:
            log.warning("namespace_index_missing", resource=self._lister.resource)
            objects = [
                o for o in indexer.list() if (o.get("metadata") or {}).get("namespace") == self.namespace
            ]
        return _select(objects, selector)

    def get(self, name: str) -> Object:
        key = f"{self.namespace}/{name}" if self.namespace else name
        obj = self._lister.indexer.get_by_key(key)
        if obj is None:
            raise new_not_found(self._lister.group, self._lister.resource, name)
        return obj

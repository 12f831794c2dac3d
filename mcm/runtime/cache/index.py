"""Index functions: how an indexer maps an object to the values it is found under.

An index function returns every value an object is indexed by (possibly none). The informer's
standard index is :data:`~mcm.runtime.cache.keys.NAMESPACE_INDEX`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcm.runtime.cache.keys import KeyFunc

__all__ = ["IndexFunc", "IndexerError", "Indexers", "index_func_to_key_func_adapter"]

IndexFunc = Callable[[Any], list[str]]
"""Computes the indexed values of an object; may raise for objects it cannot index."""

Indexers = dict[str, IndexFunc]
"""Index name → index function."""


class IndexerError(Exception):
    """An indexer operation that cannot be done (unknown index, adding indexers too late, a conflict)."""


def index_func_to_key_func_adapter(index_func: IndexFunc) -> KeyFunc:
    """A key function built from an index function that must yield exactly one value."""

    def key_func(obj: Any) -> str:
        values = index_func(obj)
        if len(values) != 1:
            raise ValueError(f"too many keys: {values}" if values else "unexpected empty indexKeys")
        return values[0]

    return key_func

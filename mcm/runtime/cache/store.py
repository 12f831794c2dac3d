"""The keyed store and indexer (``cache.NewStore`` / ``cache.NewIndexer``).

An :class:`Indexer` computes each object's key with its key function and keeps the objects in a
:class:`~mcm.runtime.cache.thread_safe_store.ThreadSafeStore`. Its guarantees are the
thread-safe store's: atomic operations, indices in step with items, and shared (read-only)
objects returned from every read.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

from mcm.runtime.cache.index import Indexers, IndexFunc
from mcm.runtime.cache.keys import KeyFunc, key_with, meta_namespace_key_func
from mcm.runtime.cache.thread_safe_store import ThreadSafeStore
from mcm.runtime.client.types import Object

__all__ = ["Indexer", "Store"]


class Indexer:
    """Objects keyed by a key function, with secondary indices."""

    def __init__(
        self,
        key_func: KeyFunc = meta_namespace_key_func,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> None:
        self._key_func = key_func
        self._store = ThreadSafeStore(indexers)

    def key_of(self, obj: Any) -> str:
        """The key of ``obj``; :class:`KeyFuncError` if it has none."""
        return key_with(self._key_func, obj)

    # -- writes ---------------------------------------------------------------------------------
    def add(self, obj: Any) -> None:
        self._store.add(self.key_of(obj), obj)

    def update(self, obj: Any) -> None:
        self._store.update(self.key_of(obj), obj)

    def delete(self, obj: Any) -> None:
        """Remove the object with ``obj``'s key (tombstones work with a deletion-handling key func)."""
        self._store.delete(self.key_of(obj))

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        """Make the store hold exactly ``objects``."""
        items = {self.key_of(obj): obj for obj in objects}
        self._store.replace(items, resource_version)

    def resync(self) -> None:
        self._store.resync()

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        self._store.add_indexers(indexers)

    # -- reads ----------------------------------------------------------------------------------
    def get(self, obj: Any) -> Object | None:
        """The stored object with ``obj``'s key, or ``None``."""
        stored: Object | None = self._store.get(self.key_of(obj))
        return stored

    def get_by_key(self, key: str) -> Object | None:
        stored: Object | None = self._store.get(key)
        return stored

    def list(self) -> builtins.list[Object]:
        return self._store.list()

    def list_keys(self) -> builtins.list[str]:
        return self._store.list_keys()

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        return key in self._store

    def get_indexers(self) -> Indexers:
        return self._store.get_indexers()

    def index(self, index_name: str, obj: Any) -> builtins.list[Object]:
        return self._store.index(index_name, obj)

    def by_index(self, index_name: str, value: str) -> builtins.list[Object]:
        return self._store.by_index(index_name, value)

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        return self._store.index_keys(index_name, value)

    def index_count(self, index_name: str, value: str) -> int:
        """How many objects ``by_index`` would return, without building the list."""
        return self._store.index_count(index_name, value)

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        return self._store.list_index_func_values(index_name)


Store = Indexer
"""A store is an indexer without indices (``cache.NewStore(keyFunc)``)."""

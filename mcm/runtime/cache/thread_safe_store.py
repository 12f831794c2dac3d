"""A key → object map with secondary indices, safe for concurrent use (``cache.ThreadSafeStore``).

Guarantees:

- Every operation is atomic with respect to the others (one lock guards items and indices).
- Indices are kept in step with the items on every add, update, delete and replace; a value
  whose key set becomes empty is removed from its index, so high-cardinality values do not leak.
- Every write is all or nothing: the index values of the new objects are computed before
  anything changes, so an index function that raises leaves items and indices exactly as they
  were (client-go panics there instead). The error is an :class:`IndexFuncError` naming the key
  and the index. The values an object was indexed under are remembered, so ``delete`` and the
  old side of an update never call an index function and cannot fail.
- Reads return the stored instances, not copies. They are shared with every handler and lister
  and must not be mutated (copy before changing); the indices would silently go stale.
- Iteration order of ``list``/``list_keys`` is unspecified; ``index_keys`` is sorted.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from mcm.runtime.cache.index import IndexerError, Indexers, IndexFunc

__all__ = ["IndexFuncError", "ThreadSafeStore"]

_IndexValues = tuple[tuple[str, ...], ...]
"""The values one object is indexed under, one tuple (without repeats) per index, in the order
of ``ThreadSafeStore._names``: tuples, because a store of thousands of objects keeps one of these
per object (a dict of frozensets cost four times as much)."""


class IndexFuncError(RuntimeError):
    """An index function raised for an object; the store was left unchanged."""

    def __init__(self, key: str, index_name: str, cause: Exception) -> None:
        self.key = key
        self.index_name = index_name
        super().__init__(
            f"unable to calculate an index entry for key {key!r} on index {index_name!r}: {cause}"
        )


class ThreadSafeStore:
    """Objects by key plus the indices computed by its index functions."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Any] = {}
        self._indexers: Indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._names = tuple(self._indexers)
        self._indexed: dict[str, _IndexValues] = {}  # key -> what it is indexed under now

    # -- writes ---------------------------------------------------------------------------------
    def add(self, key: str, obj: Any) -> None:
        """Store ``obj`` under ``key`` (replacing any previous object) and update the indices.

        Raises :class:`IndexFuncError` (and changes nothing) if an index function fails.
        """
        with self._lock:
            values = self._index_values(key, obj)
            self._items[key] = obj
            if self._indexed.get(key) == values:
                return  # an update that changes no index value (most do not) leaves them be
            self._unindex(key)
            self._index(key, values)

    update = add

    def delete(self, key: str) -> None:
        """Remove ``key`` and its index entries; a missing key is a no-op. Never raises."""
        with self._lock:
            self._items.pop(key, None)
            self._unindex(key)

    def replace(self, items: Mapping[str, Any], resource_version: str = "") -> None:
        """Swap in ``items`` and rebuild every index; on :class:`IndexFuncError` nothing changes."""
        del resource_version  # kept for the store interface; the store does not track it
        with self._lock:
            indexed = {key: self._index_values(key, obj) for key, obj in items.items()}
            self._items = dict(items)
            self._indices = {name: {} for name in self._indexers}
            self._indexed = {}
            for key, values in indexed.items():
                self._index(key, values)

    def resync(self) -> None:
        """Nothing to do: the store holds no pending work."""

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register more index functions; only allowed while the store is empty."""
        with self._lock:
            if self._items:
                raise IndexerError("cannot add indexers to running index")
            conflicts = sorted(set(indexers) & set(self._indexers))
            if conflicts:
                raise IndexerError(f"indexer conflict: {conflicts}")
            for name, func in indexers.items():
                self._indexers[name] = func
                self._indices[name] = {}
            self._names = tuple(self._indexers)

    # -- reads ----------------------------------------------------------------------------------
    def get(self, key: str) -> Any | None:
        """The object stored under ``key``, or ``None``."""
        return self._items.get(key)  # a single dict read is atomic under the GIL

    def list(self) -> builtins.list[Any]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get_indexers(self) -> Indexers:
        with self._lock:
            return dict(self._indexers)

    def index(self, index_name: str, obj: Any) -> builtins.list[Any]:
        """Objects sharing at least one indexed value with ``obj``."""
        with self._lock:
            func, index = self._index_named(index_name)
            keys: set[str] = set()
            for value in func(obj):
                keys |= index.get(value, set())
            return [self._items[k] for k in keys]

    def by_index(self, index_name: str, value: str) -> builtins.list[Any]:
        """Objects whose values for ``index_name`` include ``value``."""
        with self._lock:
            _, index = self._index_named(index_name)
            return [self._items[k] for k in index.get(value, ())]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """Sorted store keys whose values for ``index_name`` include ``value``."""
        with self._lock:
            _, index = self._index_named(index_name)
            return sorted(index.get(value, ()))

    def index_count(self, index_name: str, value: str) -> int:
        """How many keys ``index_name`` holds for ``value`` (O(1))."""
        with self._lock:
            _, index = self._index_named(index_name)
            return len(index.get(value, ()))

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """Every value currently present in ``index_name``."""
        with self._lock:
            return list(self._indices.get(index_name, {}))

    # -- internals (lock held) ------------------------------------------------------------------
    def _index_named(self, index_name: str) -> tuple[IndexFunc, dict[str, set[str]]]:
        func = self._indexers.get(index_name)
        if func is None:
            raise IndexerError(f"Index with name {index_name} does not exist")
        return func, self._indices[index_name]

    def _index_values(self, key: str, obj: Any) -> _IndexValues:
        """Every index value of ``obj``, computed before anything is changed."""
        values: list[tuple[str, ...]] = []
        for name in self._names:
            try:
                values.append(tuple(dict.fromkeys(self._indexers[name](obj))))
            except Exception as exc:
                raise IndexFuncError(key, name, exc) from exc
        return tuple(values)

    def _index(self, key: str, values: _IndexValues) -> None:
        for name, object_values in zip(self._names, values, strict=True):
            index = self._indices[name]
            for value in object_values:
                index.setdefault(value, set()).add(key)
        self._indexed[key] = values

    def _unindex(self, key: str) -> None:
        values = self._indexed.pop(key, None)
        if values is None:
            return
        for name, object_values in zip(self._names, values, strict=True):
            _remove_key(self._indices[name], object_values, key)


def _remove_key(index: dict[str, set[str]], values: Iterable[str], key: str) -> None:
    for value in values:
        keys = index.get(value)
        if keys is None:
            continue
        keys.discard(key)
        if not keys:
            del index[value]

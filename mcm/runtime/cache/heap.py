"""A keyed, thread-safe priority queue (client-go ``cache.Heap``).

Guarantees:

- :meth:`Heap.pop` hands out the item that is least by ``less_func`` (ties in no fixed order)
  and blocks while the heap is empty; after :meth:`Heap.close` it still hands out what is held,
  then raises :class:`HeapClosedError` instead of blocking.
- One item per key: ``add``/``update`` of a held key replaces its object and moves it to its new
  place; ``add_if_not_present`` keeps the held one. ``bulk_add`` adds all items under one lock
  before any waiting ``pop`` runs.
- ``delete`` works by key and raises :class:`ObjectNotFoundError` for an unknown key.
- Writes after ``close`` raise :class:`HeapClosedError`; a failing key function raises
  :class:`~mcm.runtime.cache.keys.KeyFuncError` before anything changes.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from typing import Any

from mcm.runtime.cache.keys import KeyFunc, key_with

__all__ = ["Heap", "HeapClosedError", "LessFunc", "ObjectNotFoundError"]

LessFunc = Callable[[Any, Any], bool]
"""``less(a, b)``: whether ``a`` comes out of the heap before ``b``."""

CLOSED_MSG = "heap is closed"


class HeapClosedError(Exception):
    def __init__(self) -> None:
        super().__init__(CLOSED_MSG)


class ObjectNotFoundError(LookupError):
    def __init__(self) -> None:
        super().__init__("object not found")


class _Item:
    __slots__ = ("index", "obj")

    def __init__(self, obj: Any, index: int) -> None:
        self.obj = obj
        self.index = index


class Heap:
    """Items by key, popped least first."""

    def __init__(self, key_func: KeyFunc, less_func: LessFunc) -> None:
        self._key_func = key_func
        self._less_func = less_func
        self._cond = threading.Condition()
        self._items: dict[str, _Item] = {}
        self._queue: list[str] = []  # binary min-heap of keys
        self._closed = False

    # -- writes ---------------------------------------------------------------------------------
    def add(self, obj: Any) -> None:
        """Insert ``obj`` or replace the object held under its key (and re-place it)."""
        key = self._key_of(obj)
        with self._cond:
            self._check_open()
            self._add_or_update(key, obj)
            self._cond.notify_all()

    update = add

    def bulk_add(self, objects: Iterable[Any]) -> None:
        """Add every object under one lock, so a waiting ``pop`` sees them all at once."""
        keyed = [(self._key_of(obj), obj) for obj in objects]
        with self._cond:
            self._check_open()
            for key, obj in keyed:
                self._add_or_update(key, obj)
            self._cond.notify_all()

    def add_if_not_present(self, obj: Any) -> None:
        """Insert ``obj`` unless its key is already held."""
        key = self._key_of(obj)
        with self._cond:
            self._check_open()
            if key not in self._items:
                self._push(key, obj)
            self._cond.notify_all()

    def delete(self, obj: Any) -> None:
        """Remove the item with ``obj``'s key; :class:`ObjectNotFoundError` if there is none."""
        key = self._key_of(obj)
        with self._cond:
            item = self._items.get(key)
            if item is None:
                raise ObjectNotFoundError()
            self._remove(item.index)

    def close(self) -> None:
        """Wake every blocked ``pop``; they and later ones raise :class:`HeapClosedError`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- consumer -------------------------------------------------------------------------------
    def pop(self, timeout: float | None = None) -> Any:
        """Remove and return the least item, waiting while the heap is empty.

        ``timeout`` (real seconds) raises ``TimeoutError``; a closed heap raises
        :class:`HeapClosedError`.
        """
        with self._cond:
            while not self._queue:
                if self._closed:
                    raise HeapClosedError()
                if not self._cond.wait(timeout) and not self._queue and not self._closed:
                    raise TimeoutError("nothing to pop")
            return self._remove(0)

    # -- reads ----------------------------------------------------------------------------------
    def list(self) -> builtins.list[Any]:
        with self._cond:
            return [item.obj for item in self._items.values()]

    def list_keys(self) -> builtins.list[str]:
        with self._cond:
            return list(self._items)

    def get(self, obj: Any) -> Any | None:
        return self.get_by_key(self._key_of(obj))

    def get_by_key(self, key: str) -> Any | None:
        with self._cond:
            item = self._items.get(key)
            return item.obj if item is not None else None

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    # -- internals (lock held) ------------------------------------------------------------------
    def _key_of(self, obj: Any) -> str:
        return key_with(self._key_func, obj)

    def _check_open(self) -> None:
        if self._closed:
            raise HeapClosedError()

    def _add_or_update(self, key: str, obj: Any) -> None:
        item = self._items.get(key)
        if item is None:
            self._push(key, obj)
            return
        item.obj = obj
        self._fix(item.index)

    def _push(self, key: str, obj: Any) -> None:
        self._items[key] = _Item(obj, len(self._queue))
        self._queue.append(key)
        self._up(len(self._queue) - 1)

    def _remove(self, index: int) -> Any:
        last = len(self._queue) - 1
        if index != last:
            self._swap(index, last)
            if not self._down(index, last):
                self._up(index)
        key = self._queue.pop()
        return self._items.pop(key).obj

    def _fix(self, index: int) -> None:
        if not self._down(index, len(self._queue)):
            self._up(index)

    def _less(self, i: int, j: int) -> bool:
        return self._less_func(self._items[self._queue[i]].obj, self._items[self._queue[j]].obj)

    def _swap(self, i: int, j: int) -> None:
        queue = self._queue
        queue[i], queue[j] = queue[j], queue[i]
        self._items[queue[i]].index = i
        self._items[queue[j]].index = j

    def _up(self, child: int) -> None:
        while child > 0:
            parent = (child - 1) // 2
            if not self._less(child, parent):
                break
            self._swap(parent, child)
            child = parent

    def _down(self, start: int, size: int) -> bool:
        """Sift ``start`` down within the first ``size`` entries; whether it moved."""
        index = start
        while True:
            child = 2 * index + 1
            if child >= size:
                break
            if child + 1 < size and self._less(child + 1, child):
                child += 1
            if not self._less(child, index):
                break
            self._swap(index, child)
            index = child
        return index > start

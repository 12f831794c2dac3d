"""RealFIFO: one queue entry per event, in arrival order (client-go 0.33+, ``InOrderInformers``).

An alternative to :class:`~mcm.runtime.cache.delta_fifo.DeltaFIFO` for shared informers
(``SharedIndexInformer(..., use_real_fifo=True)``). Guarantees:

- Every add, update, delete, replace item and sync is its own entry; nothing is merged per key,
  and :meth:`RealFIFO.pop` hands out one single-delta list at a time, in arrival order.
- ``replace`` first queues ``Deleted(DeletedFinalStateUnknown)`` for queued keys missing from
  the list (unless their last queued entry is already a deletion), then for known keys missing
  from the list with nothing queued, and only then ``Replaced`` for every listed object.
- ``resync`` queues ``Sync`` for known keys with nothing queued.
- ``has_synced`` is true once the entries queued by the first ``replace`` have been processed.
"""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from mcm.runtime.cache.delta_fifo import (
    Delta,
    Deltas,
    DeltaType,
    FIFOClosedError,
    KeyListerGetter,
    PopProcessFunc,
    RequeueError,
    TransformFunc,
)
from mcm.runtime.cache.keys import DeletedFinalStateUnknown, KeyFunc, KeyFuncError, meta_namespace_key_func

__all__ = ["RealFIFO"]


class RealFIFO:
    """Events in arrival order, one entry each."""

    def __init__(
        self,
        *,
        key_function: KeyFunc = meta_namespace_key_func,
        known_objects: KeyListerGetter | None = None,
        transformer: TransformFunc | None = None,
    ) -> None:
        self._cond = threading.Condition()
        self._items: deque[tuple[str, Delta]] = deque()
        self._queued: dict[str, int] = {}  # key -> number of entries queued
        self._populated = False
        self._initial_population_count = 0
        self._key_func = key_function
        self._known = known_objects
        self._transformer = transformer
        self._closed = False

    def key_of(self, obj: Any) -> str:
        if isinstance(obj, list) and obj and isinstance(obj[-1], Delta):
            obj = obj[-1].object
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        try:
            return self._key_func(obj)
        except Exception as exc:
            raise KeyFuncError(obj, exc) from exc

    # -- producers ------------------------------------------------------------------------------
    def add(self, obj: Any) -> None:
        with self._cond:
            self._populated = True
            self._append(DeltaType.ADDED, obj)

    def update(self, obj: Any) -> None:
        with self._cond:
            self._populated = True
            self._append(DeltaType.UPDATED, obj)

    def delete(self, obj: Any) -> None:
        with self._cond:
            self._populated = True
            self._append(DeltaType.DELETED, obj)

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        del resource_version
        objects = list(objects)
        with self._cond:
            listed = {self.key_of(obj) for obj in objects}
            for key, obj in self._last_queued_not_listed(listed):
                self._append(DeltaType.DELETED, DeletedFinalStateUnknown(key, obj))
            if self._known is not None:
                for key in self._known.list_keys():
                    if key in listed or self._queued.get(key):
                        continue
                    self._append(
                        DeltaType.DELETED, DeletedFinalStateUnknown(key, self._known.get_by_key(key))
                    )
            for obj in objects:
                self._append(DeltaType.REPLACED, obj)
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(self._items)

    def resync(self) -> None:
        if self._known is None:
            return
        with self._cond:
            for key in self._known.list_keys():
                if self._queued.get(key):
                    continue
                obj = self._known.get_by_key(key)
                if obj is not None:
                    self._append(DeltaType.SYNC, obj)

    def add_if_not_present(self, deltas: Deltas) -> None:
        key = self.key_of(deltas)
        with self._cond:
            if self._queued.get(key):
                return
            for delta in deltas:
                self._push(key, delta)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- consumer -------------------------------------------------------------------------------
    def pop(self, process: PopProcessFunc, timeout: float | None = None) -> Deltas:
        """Take the oldest entry and call ``process([delta], is_in_initial_list)`` under the lock."""
        with self._cond:
            while not self._items:
                if self._closed:
                    raise FIFOClosedError()
                if not self._cond.wait(timeout) and not self._items and not self._closed:
                    raise TimeoutError("nothing to pop")
            in_initial_list = not self._has_synced()
            key, delta = self._items.popleft()
            self._forget_one(key)
            if self._initial_population_count > 0:
                self._initial_population_count -= 1
            deltas = [delta]
            try:
                process(deltas, in_initial_list)
            except RequeueError as exc:
                if not self._queued.get(key):
                    self._push(key, delta)
                if exc.err is not None:
                    raise exc.err from exc
            return deltas

    # -- reads ----------------------------------------------------------------------------------
    def has_synced(self) -> bool:
        with self._cond:
            return self._has_synced()

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    def list_keys(self) -> builtins.list[str]:
        with self._cond:
            return list(dict.fromkeys(key for key, _ in self._items))

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    # -- internals (lock held) ------------------------------------------------------------------
    def _has_synced(self) -> bool:
        return self._populated and self._initial_population_count == 0

    def _append(self, action: DeltaType, obj: Any) -> None:
        key = self.key_of(obj)
        if self._transformer is not None:
            obj = self._transformer(obj)
        self._push(key, Delta(action, obj))

    def _push(self, key: str, delta: Delta) -> None:
        self._items.append((key, delta))
        self._queued[key] = self._queued.get(key, 0) + 1
        self._cond.notify_all()

    def _forget_one(self, key: str) -> None:
        left = self._queued[key] - 1
        if left:
            self._queued[key] = left
        else:
            del self._queued[key]

    def _last_queued_not_listed(self, listed: set[str]) -> builtins.list[tuple[str, Any]]:
        last: dict[str, Delta] = {}
        for key, delta in self._items:
            last[key] = delta
        result = []
        for key, delta in last.items():
            if key in listed or delta.type is DeltaType.DELETED:
                continue
            obj = delta.object
            result.append((key, obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj))
        return result

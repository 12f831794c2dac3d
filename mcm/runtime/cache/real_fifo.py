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
from collections import deque
from collections.abc import Iterable
from typing import Any

from mcm.runtime.cache.fifo_base import (
    Delta,
    Deltas,
    DeltaType,
    KeyedFIFO,
    KeyListerGetter,
    PopProcessFunc,
    RequeueError,
    TransformFunc,
)
from mcm.runtime.cache.keys import DeletedFinalStateUnknown, KeyFunc, meta_namespace_key_func

__all__ = ["RealFIFO"]


class RealFIFO(KeyedFIFO):
    """Events in arrival order, one entry each."""

    def __init__(
        self,
        *,
        key_function: KeyFunc = meta_namespace_key_func,
        known_objects: KeyListerGetter | None = None,
        transformer: TransformFunc | None = None,
    ) -> None:
        super().__init__(key_function, known_objects, transformer)
        self._items: deque[tuple[str, Delta]] = deque()
        self._queued: dict[str, int] = {}  # key -> number of entries queued

    # -- producers ------------------------------------------------------------------------------
    def delete(self, obj: Any) -> None:
        with self._cond:
            self._populated = True
            self._queue_action(DeltaType.DELETED, obj)

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        del resource_version
        objects = list(objects)
        with self._cond:
            listed = {self.key_of(obj) for obj in objects}
            for key, obj in self._last_queued_not_listed(listed):
                self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, obj))
            if self._known is not None:
                for key in self._known.list_keys():
                    if key in listed or self._queued.get(key):
                        continue
                    self._queue_action(
                        DeltaType.DELETED, DeletedFinalStateUnknown(key, self._known.get_by_key(key))
                    )
            for obj in objects:
                self._queue_action(DeltaType.REPLACED, obj)
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
                    self._queue_action(DeltaType.SYNC, obj)

    def add_if_not_present(self, deltas: Deltas) -> None:
        key = self.key_of(deltas)
        with self._cond:
            if self._queued.get(key):
                return
            for delta in deltas:
                self._push(key, delta)

    # -- consumer -------------------------------------------------------------------------------
    def pop(self, process: PopProcessFunc, timeout: float | None = None) -> Deltas:
        """Take the oldest entry and call ``process([delta], is_in_initial_list)`` under the lock."""
        with self._cond:
            self._wait_for_items(timeout)
            in_initial_list = self._count_initial_pop()
            key, delta = self._items.popleft()
            self._forget_one(key)
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
    def list_keys(self) -> builtins.list[str]:
        with self._cond:
            return list(dict.fromkeys(key for key, _ in self._items))

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    # -- internals (lock held) ------------------------------------------------------------------
    def _has_items(self) -> bool:
        return bool(self._items)

    def _queue_action(self, action: DeltaType, obj: Any) -> None:
        key = self.key_of(obj)
        self._push(key, Delta(action, self._transform(obj)))

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

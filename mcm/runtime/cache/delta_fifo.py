"""DeltaFIFO: a queue of per-key change lists between a reflector and its consumer (client-go 0.28).

Guarantees:

- Each key is queued at most once, in the order it first became pending; its deltas are kept
  oldest first and handed out together by :meth:`DeltaFIFO.pop`.
- Only two consecutive ``Deleted`` deltas are merged (keeping the non-tombstone one, or the
  newer if the older is a tombstone); nothing else is coalesced.
- ``delete`` of a key that is neither queued nor known is dropped (it was already deleted).
- ``replace`` queues ``Replaced`` (or ``Sync``) for every listed object, then a
  ``Deleted(DeletedFinalStateUnknown)`` for every queued key and every known key that is not in
  the list, so deletions missed while the watch was down are never lost.
- ``resync`` re-queues known objects as ``Sync`` only for keys with nothing pending, so a stale
  copy never overtakes a pending event.
- ``has_synced`` turns true once every item of the first ``replace`` has been popped *and
  processed* (processing runs while the queue lock is held).
- After ``close``, ``pop`` still hands out what is queued, then raises :class:`FIFOClosedError`.
"""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Iterable
from typing import Any

import structlog

from mcm.runtime.cache.fifo_base import (
    Delta,
    Deltas,
    DeltaType,
    FIFOClosedError,
    KeyedFIFO,
    KeyListerGetter,
    PopProcessFunc,
    RequeueError,
    TransformFunc,
)
from mcm.runtime.cache.keys import DeletedFinalStateUnknown, KeyFunc, meta_namespace_key_func

__all__ = [
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "FIFOClosedError",
    "KeyListerGetter",
    "PopProcessFunc",
    "RequeueError",
    "TransformFunc",
]

log = structlog.get_logger(__name__)


class DeltaFIFO(KeyedFIFO):
    """Per-key lists of deltas, handed out one key at a time in FIFO order."""

    def __init__(
        self,
        *,
        key_function: KeyFunc = meta_namespace_key_func,
        known_objects: KeyListerGetter | None = None,
        emit_delta_type_replaced: bool = False,
        transformer: TransformFunc | None = None,
    ) -> None:
        super().__init__(key_function, known_objects, transformer)
        self._items: dict[str, Deltas] = {}
        self._queue: deque[str] = deque()
        self._emit_replaced = emit_delta_type_replaced

    # -- producers ------------------------------------------------------------------------------
    def delete(self, obj: Any) -> None:
        """Queue a ``Deleted`` delta unless the key is neither queued nor known."""
        key = self.key_of(obj)
        with self._cond:
            self._populated = True
            if key not in self._items and not self._is_known(key):
                return
            self._queue_action(DeltaType.DELETED, obj)

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        """Queue the listed objects and tombstones for everything queued or known but not listed."""
        del resource_version
        action = DeltaType.REPLACED if self._emit_replaced else DeltaType.SYNC
        with self._cond:
            listed: set[str] = set()
            for obj in objects:
                key = self.key_of(obj)
                listed.add(key)
                self._queue_action(action, obj, key)
            deletions = self._queue_deletions_of_queued(listed)
            deletions += self._queue_deletions_of_known(listed)
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(listed) + deletions

    def resync(self) -> None:
        """Queue ``Sync`` for every known object whose key has nothing pending."""
        if self._known is None:
            return
        with self._cond:
            for key in self._known.list_keys():
                self._sync_key(key)

    def add_if_not_present(self, deltas: Deltas) -> None:
        """Put popped ``deltas`` back unless their key was queued again meanwhile."""
        key = self.key_of(deltas)
        with self._cond:
            self._add_if_not_present(key, deltas)

    # -- consumer -------------------------------------------------------------------------------
    def pop(self, process: PopProcessFunc, timeout: float | None = None) -> Deltas:
        """Take the oldest key and call ``process(deltas, is_in_initial_list)`` under the queue lock.

        Blocks until something is queued or the queue is closed (:class:`FIFOClosedError`).
        ``timeout`` (real seconds) bounds the wait and raises :class:`TimeoutError`; it exists for
        tests. A :class:`RequeueError` from ``process`` puts the deltas back and re-raises its cause.
        """
        with self._cond:
            self._wait_for_items(timeout)
            in_initial_list = self._count_initial_pop()
            key = self._queue.popleft()
            deltas = self._items.pop(key)
            try:
                process(deltas, in_initial_list)
            except RequeueError as exc:
                self._add_if_not_present(key, deltas)
                if exc.err is not None:
                    raise exc.err from exc
            return deltas

    # -- reads ----------------------------------------------------------------------------------
    def list(self) -> builtins.list[Any]:
        """The newest object of every queued key."""
        with self._cond:
            return [self._items[k][-1].object for k in self._queue]

    def list_keys(self) -> builtins.list[str]:
        with self._cond:
            return list(self._queue)

    def get(self, obj: Any) -> Deltas | None:
        return self.get_by_key(self.key_of(obj))

    def get_by_key(self, key: str) -> Deltas | None:
        """A copy of the deltas queued for ``key``, or ``None``."""
        with self._cond:
            deltas = self._items.get(key)
            return list(deltas) if deltas else None

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    # -- internals (lock held) ------------------------------------------------------------------
    def _has_items(self) -> bool:
        return bool(self._queue)

    def _is_known(self, key: str) -> bool:
        if self._known is None:
            return False
        try:
            return self._known.get_by_key(key) is not None
        except Exception:
            return True  # a failing lookup must not swallow the delete

    def _queue_action(self, action: DeltaType, obj: Any, key: str | None = None) -> None:
        if key is None:
            key = self.key_of(obj)
        obj = self._transform(obj)
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [Delta(action, obj)]
            self._queue.append(key)
        else:
            deltas.append(Delta(action, obj))
            _dedup_deltas(deltas)
        self._cond.notify_all()

    def _queue_deletions_of_queued(self, listed: set[str]) -> int:
        count = 0
        for key, deltas in list(self._items.items()):
            if key in listed:
                continue
            last = deltas[-1].object if deltas else None
            if isinstance(last, DeletedFinalStateUnknown):
                last = last.obj
            self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last), key)
            count += 1
        return count

    def _queue_deletions_of_known(self, listed: set[str]) -> int:
        if self._known is None:
            return 0
        count = 0
        for key in self._known.list_keys():
            if key in listed or self._items.get(key):
                continue
            try:
                last = self._known.get_by_key(key)
            except Exception as exc:
                log.error("known_object_lookup_failed", key=key, error=str(exc))
                last = None
            self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last))
            count += 1
        return count

    def _sync_key(self, key: str) -> None:
        obj = self._known.get_by_key(key) if self._known is not None else None
        if obj is None:
            return
        if self._items.get(self.key_of(obj)):
            return
        self._queue_action(DeltaType.SYNC, obj)

    def _add_if_not_present(self, key: str, deltas: Deltas) -> None:
        self._populated = True
        if key in self._items:
            return
        self._queue.append(key)
        self._items[key] = deltas
        self._cond.notify_all()


def _dedup_deltas(deltas: Deltas) -> None:
    """Merge the last two deltas in place when both are deletions."""
    if len(deltas) < 2:
        return
    newer, older = deltas[-1], deltas[-2]
    if newer.type is not DeltaType.DELETED or older.type is not DeltaType.DELETED:
        return
    keep = newer if isinstance(older.object, DeletedFinalStateUnknown) else older
    deltas[-2:] = [keep]

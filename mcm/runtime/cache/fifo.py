"""A plain keyed FIFO (client-go ``cache.FIFO``): the newest object per key, handed out in order.

Unlike the informer queues it keeps no deltas: an object added again while its key is queued
replaces the queued object and keeps the key's place in line. Guarantees:

- Keys are handed out by :meth:`FIFO.pop` in the order they were first queued; a key popped and
  then added again goes to the back of the line.
- ``delete`` drops the key's object; its place in line is skipped when it comes up.
- ``replace`` swaps in exactly the listed objects (and the line becomes their keys).
- ``resync`` puts every stored key that is not in line back in line.
- A process function raising :class:`~mcm.runtime.cache.fifo_base.RequeueError` puts the item
  back unless its key was queued again meanwhile; the wrapped error, if any, is re-raised.
- ``has_synced`` is true after the first ``add``/``update``/``delete``, or once every item of the
  first ``replace`` has been popped. After ``close``, ``pop`` drains what is queued, then
  raises :class:`~mcm.runtime.cache.fifo_base.FIFOClosedError`.
"""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from mcm.runtime.cache.fifo_base import DeltaType, KeyedFIFO, RequeueError
from mcm.runtime.cache.keys import KeyFunc, meta_namespace_key_func

__all__ = ["FIFO", "FIFOProcessFunc"]

FIFOProcessFunc = Callable[[Any, bool], None]
"""Called by :meth:`FIFO.pop` with the popped object and whether it is in the initial list."""


class FIFO(KeyedFIFO):
    """The newest object per key, in first-queued order."""

    def __init__(self, key_function: KeyFunc = meta_namespace_key_func) -> None:
        super().__init__(key_function, None, None)
        self._items: dict[str, Any] = {}
        self._queue: deque[str] = deque()

    # -- producers ------------------------------------------------------------------------------
    def add_if_not_present(self, obj: Any) -> None:
        """Queue ``obj`` only if its key holds nothing yet (used to requeue after a failed pop)."""
        key = self.key_of(obj)
        with self._cond:
            self._populated = True
            self._add_if_not_present(key, obj)

    def delete(self, obj: Any) -> None:
        key = self.key_of(obj)
        with self._cond:
            self._populated = True
            self._items.pop(key, None)

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        del resource_version  # a FIFO does not track it
        items = {self.key_of(obj): obj for obj in objects}
        with self._cond:
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(items)
            self._items = items
            self._queue = deque(items)
            if self._queue:
                self._cond.notify_all()

    def resync(self) -> None:
        with self._cond:
            in_line = set(self._queue)
            for key in self._items:
                if key not in in_line:
                    self._queue.append(key)
            if self._queue:
                self._cond.notify_all()

    # -- consumer -------------------------------------------------------------------------------
    def pop(self, process: FIFOProcessFunc, timeout: float | None = None) -> Any:
        """Take the oldest queued object and call ``process(obj, is_in_initial_list)`` under the lock.

        Blocks until something is queued; ``timeout`` (real seconds) raises ``TimeoutError``.
        """
        with self._cond:
            while True:
                self._wait_for_items(timeout)
                in_initial_list = self._count_initial_pop()
                key = self._queue.popleft()
                if key not in self._items:
                    continue  # deleted while in line
                item = self._items.pop(key)
                try:
                    process(item, in_initial_list)
                except RequeueError as exc:
                    self._add_if_not_present(key, item)
                    if exc.err is not None:
                        raise exc.err from exc
                return item

    # -- reads ----------------------------------------------------------------------------------
    def list(self) -> builtins.list[Any]:
        with self._cond:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._cond:
            return list(self._items)

    def get(self, obj: Any) -> Any | None:
        return self.get_by_key(self.key_of(obj))

    def get_by_key(self, key: str) -> Any | None:
        with self._cond:
            return self._items.get(key)

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    # -- internals (lock held) ------------------------------------------------------------------
    def _has_items(self) -> bool:
        return bool(self._queue)

    def _queue_action(self, action: DeltaType, obj: Any) -> None:
        del action  # a FIFO keeps objects, not deltas
        key = self.key_of(obj)
        if key not in self._items:
            self._queue.append(key)
        self._items[key] = obj
        self._cond.notify_all()

    def _add_if_not_present(self, key: str, obj: Any) -> None:
        if key in self._items:
            return
        self._queue.append(key)
        self._items[key] = obj
        self._cond.notify_all()

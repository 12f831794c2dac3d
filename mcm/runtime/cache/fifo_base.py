"""What both informer queues share: delta types, keys, population tracking and closing.

:class:`~mcm.runtime.cache.delta_fifo.DeltaFIFO` (client-go 0.28) and
:class:`~mcm.runtime.cache.real_fifo.RealFIFO` (0.33+) differ only in how they store and merge
what is queued; :class:`KeyedFIFO` holds the rest. Guarantees:

- :meth:`KeyedFIFO.key_of` keys an object, a
  :class:`~mcm.runtime.cache.keys.DeletedFinalStateUnknown` tombstone (its stored key) or a
  non-empty delta list (its newest object); a failing key function raises
  :class:`~mcm.runtime.cache.keys.KeyFuncError`.
- ``add`` and ``update`` mark the queue populated, then queue one ``Added``/``Updated`` delta.
- ``has_synced`` is ``populated and initial_population_count == 0``.
- After ``close``, ``pop`` hands out what is still queued, then raises :class:`FIFOClosedError`.
"""

from __future__ import annotations

import abc
import builtins
import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcm.runtime.cache.keys import DeletedFinalStateUnknown, KeyFunc, key_with
from mcm.runtime.client.types import Object

__all__ = [
    "Delta",
    "DeltaType",
    "Deltas",
    "FIFOClosedError",
    "KeyListerGetter",
    "KeyedFIFO",
    "PopProcessFunc",
    "RequeueError",
    "TransformFunc",
]


class DeltaType(enum.Enum):
    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"
    SYNC = "Sync"


@dataclass(frozen=True, slots=True)
class Delta:
    """One change: its type and the object after it (a tombstone for relist deletions)."""

    type: DeltaType
    object: Any


Deltas = list[Delta]
PopProcessFunc = Callable[[Deltas, bool], None]
"""Called by ``pop`` with the popped deltas and whether they belong to the initial list."""
TransformFunc = Callable[[Any], Any]


class FIFOClosedError(Exception):
    """The queue is closed and empty."""

    def __init__(self) -> None:
        super().__init__("DeltaFIFO: manipulating with closed queue")


class RequeueError(Exception):
    """Raised by a process function to put the popped deltas back (unless the key was re-queued)."""

    def __init__(self, err: BaseException | None = None) -> None:
        self.err = err
        super().__init__(str(err) if err else "requeue")


class KeyListerGetter(Protocol):
    """What a FIFO needs from the consumer's store (``KnownObjects``)."""

    def list_keys(self) -> builtins.list[str]: ...

    def get_by_key(self, key: str) -> Object | None: ...


class KeyedFIFO(abc.ABC):
    """The shared half of the informer queues; subclasses store and hand out the deltas."""

    def __init__(
        self,
        key_function: KeyFunc,
        known_objects: KeyListerGetter | None,
        transformer: TransformFunc | None,
    ) -> None:
        self._cond = threading.Condition()
        self._populated = False
        self._initial_population_count = 0
        self._key_func = key_function
        self._known = known_objects
        self._transformer = transformer
        self._closed = False

    def key_of(self, obj: Any) -> str:
        """The key of an object, a tombstone, or a non-empty delta list (its newest object)."""
        if isinstance(obj, list) and obj and isinstance(obj[-1], Delta):
            obj = obj[-1].object
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        return key_with(self._key_func, obj)

    # -- producers ------------------------------------------------------------------------------
    def add(self, obj: Any) -> None:
        with self._cond:
            self._populated = True
            self._queue_action(DeltaType.ADDED, obj)

    def update(self, obj: Any) -> None:
        with self._cond:
            self._populated = True
            self._queue_action(DeltaType.UPDATED, obj)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- reads ----------------------------------------------------------------------------------
    def has_synced(self) -> bool:
        with self._cond:
            return self._has_synced()

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    # -- internals (lock held) ------------------------------------------------------------------
    def _has_synced(self) -> bool:
        return self._populated and self._initial_population_count == 0

    def _transform(self, obj: Any) -> Any:
        return obj if self._transformer is None else self._transformer(obj)

    def _wait_for_items(self, timeout: float | None) -> None:
        """Block until something is queued; :class:`FIFOClosedError` once closed and empty."""
        while not self._has_items():
            if self._closed:
                raise FIFOClosedError()
            if not self._cond.wait(timeout) and not self._has_items() and not self._closed:
                raise TimeoutError("nothing to pop")

    def _count_initial_pop(self) -> bool:
        """Before handing out one entry: whether it is in the initial list; counts it down."""
        in_initial_list = not self._has_synced()
        if self._initial_population_count > 0:
            self._initial_population_count -= 1
        return in_initial_list

    @abc.abstractmethod
    def _has_items(self) -> bool:
        """Whether anything is queued (called with the lock held)."""

    @abc.abstractmethod
    def _queue_action(self, action: DeltaType, obj: Any) -> None:
        """Queue one delta for ``obj`` (called with the lock held)."""

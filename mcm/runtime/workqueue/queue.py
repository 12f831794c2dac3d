"""The basic work queue: the port of client-go's ``util/workqueue/queue.go`` (type ``Type``).

Guarantees (each one is tested):

- **Fair**: items are handed out in the order they were queued.
- **Stingy**: an item is never handed to two callers of :meth:`Queue.get` at once; it stays
  "processing" until :meth:`Queue.done`.
- **Deduplicated**: adding an item that is already queued changes nothing (it keeps its place).
- **Re-add while processing**: an item added while it is processing is queued again exactly
  once, when :meth:`Queue.done` is called for it.
- **Shut-down**: after :meth:`Queue.shut_down` adds are ignored, but :meth:`Queue.get` still
  hands out the queued items and only then returns ``(None, True)``.
- **Bounded wait**: :meth:`Queue.get_within` is :meth:`Queue.get` that gives up (``None``) after
  a time without an item, measured on the queue's clock (not in client-go: it lets an idle
  on-demand worker end, see :mod:`mcm.runtime.worker`).
  :meth:`Queue.shut_down_with_drain` additionally blocks until every processing item is done.

Items must be hashable and immutable (``"namespace/name"`` strings, or tuples).

Implementation: one lock, a deque of queued items and one dict holding each known item's
state (queued / processing / processing and re-added), which is both client-go's ``dirty``
and ``processing`` sets. The processing count is ``len(state) - len(queue)``. Metrics hooks are
skipped entirely for queues without metrics (unnamed, or built with the no-op provider).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.workqueue.metrics import (
    UNFINISHED_WORK_UPDATE_PERIOD,
    MetricsProvider,
    QueueMetrics,
    queue_metrics,
)

__all__ = ["Queue"]

T = TypeVar("T", bound=Hashable)

_QUEUED = 1
"""Dirty and waiting in the deque."""
_PROCESSING = 2
"""Handed out by ``get``, not yet done."""
_PROCESSING_DIRTY = 3
"""Processing, and added again meanwhile: queued again on ``done``."""


class Queue(Generic[T]):
    """A fair, stingy, deduplicating FIFO work queue.

    ``name`` enables metrics (see :mod:`mcm.runtime.workqueue.metrics`); ``metrics_provider``
    overrides the process-wide provider for this queue. ``clock`` times the metrics.
    """

    __slots__ = (
        "__weakref__",
        "_clock",
        "_drain",
        "_drain_waiters",
        "_getters",
        "_idle",
        "_lock",
        "_metrics",
        "_not_empty",
        "_queue",
        "_shutting_down",
        "_state",
        "_stopped",
        "name",
    )

    def __init__(
        self,
        name: str | None = None,
        *,
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        self.name = name or ""
        self._clock = clock
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._queue: collections.deque[T] = collections.deque()
        self._state: dict[T, int] = {}
        self._getters = 0
        self._drain_waiters = 0
        self._shutting_down = False
        self._drain = False
        self._stopped = threading.Event()
        self._metrics: QueueMetrics | None = queue_metrics(name, metrics_provider, clock)
        if self._metrics is not None:
            self._start_daemon(self._update_unfinished_work_loop, "unfinished-work")

    def _start_daemon(self, target: Callable[[], None], role: str) -> None:
        threading.Thread(target=target, name=f"workqueue-{role}-{self.name}", daemon=True).start()

    def __bool__(self) -> bool:
        """Always true: a queue is a service, not a container that is falsy when empty."""
        return True

    # -- producers -------------------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing. Ignored while shutting down."""
        self._lock.acquire()
        try:
            self._insert(item)
        finally:
            self._lock.release()

    def _add_all(self, items: Iterable[T]) -> None:
        """``add`` for several items under one lock acquisition (used by the delaying queue)."""
        self._lock.acquire()
        try:
            for item in items:
                self._insert(item)
        finally:
            self._lock.release()

    def _insert(self, item: T) -> None:
        """The body of ``add``; the caller holds the lock."""
        state = self._state.get(item)
        if state is None:
            if self._shutting_down:
                return
            self._state[item] = _QUEUED
            if self._metrics is not None:
                self._metrics.add(item)
            self._queue.append(item)
            if self._getters:
                self._not_empty.notify()
        elif state == _PROCESSING and not self._shutting_down:
            self._state[item] = _PROCESSING_DIRTY
            if self._metrics is not None:
                self._metrics.add(item)

    # -- consumers -------------------------------------------------------------------------------

    def get(self) -> tuple[T | None, bool]:
        """Block until an item can be processed; return ``(item, False)``.

        Returns ``(None, True)`` once the queue is shutting down and holds nothing more.
        The caller must call :meth:`done` for every item it receives.
        """
        self._lock.acquire()
        try:
            queue = self._queue
            if not queue:
                self._wait_for_items()
                if not queue:
                    return None, True
            return self._pop(), False
        finally:
            self._lock.release()

    def get_within(self, seconds: float) -> tuple[T | None, bool] | None:
        """:meth:`get`, but return ``None`` if no item came within ``seconds`` of the queue's clock.

        ``seconds <= 0`` only takes an item that is already queued. Shut-down is reported as
        by :meth:`get`, even before ``seconds`` have passed.
        """
        self._lock.acquire()
        try:
            queue = self._queue
            if not queue and not self._shutting_down:
                self._wait_for_items_within(seconds)
            if not queue:
                return (None, True) if self._shutting_down else None
            return self._pop(), False
        finally:
            self._lock.release()

    def _pop(self) -> T:
        """Hand out the first queued item (the caller holds the lock; the queue is not empty)."""
        item = self._queue.popleft()
        self._state[item] = _PROCESSING
        if self._metrics is not None:
            self._metrics.get(item)
        return item

    def _wait_for_items_within(self, seconds: float) -> None:
        """Wait (lock held) for an item or shut-down, at most ``seconds`` on the queue's clock."""
        clock = self._clock
        deadline = clock.monotonic() + seconds
        self._getters += 1
        try:
            while not self._queue and not self._shutting_down:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return
                clock.wait_condition(self._not_empty, remaining)
        finally:
            self._getters -= 1

    def _wait_for_items(self) -> None:
        self._getters += 1
        try:
            while not self._queue and not self._shutting_down:
                self._not_empty.wait()
        finally:
            self._getters -= 1

    def done(self, item: T) -> None:
        """Finish processing ``item``; if it was added meanwhile, queue it again.

        Calling it for an item that is not processing changes nothing.
        """
        self._lock.acquire()
        try:
            state = self._state.pop(item, None)
            if state is None:
                return
            if state == _QUEUED:  # not processing: a caller bug; leave the queued item alone
                self._state[item] = _QUEUED
                return
            if self._metrics is not None:
                self._metrics.done(item)
            if state == _PROCESSING_DIRTY:
                self._state[item] = _QUEUED
                self._queue.append(item)
                if self._getters:
                    self._not_empty.notify()
            if self._drain_waiters and len(self._state) == len(self._queue):
                self._idle.notify_all()
        finally:
            self._lock.release()

    # -- inspection ------------------------------------------------------------------------------

    def len(self) -> int:
        """Number of queued items; items being processed are not counted."""
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def shutting_down(self) -> bool:
        return self._shutting_down

    # -- shut-down -------------------------------------------------------------------------------

    def shut_down(self) -> None:
        """Refuse new adds and wake every waiter; queued items are still handed out.

        Also makes a blocked :meth:`shut_down_with_drain` return at once.
        """
        with self._lock:
            self._drain = False
            self._begin_shut_down()

    def shut_down_with_drain(self) -> None:
        """Like :meth:`shut_down`, then block until every processing item is done.

        Items still queued do not delay it. A later :meth:`shut_down` ends the wait.
        """
        with self._lock:
            self._drain = True
            self._begin_shut_down()
            self._drain_waiters += 1
            try:
                while self._drain and len(self._state) > len(self._queue):
                    self._idle.wait()
            finally:
                self._drain_waiters -= 1

    def _begin_shut_down(self) -> None:
        self._shutting_down = True
        self._stopped.set()
        self._not_empty.notify_all()
        self._idle.notify_all()

    # -- metrics ---------------------------------------------------------------------------------

    def update_unfinished_work(self) -> bool:
        """Refresh the unfinished-work gauges; False (and no update) once shutting down."""
        with self._lock:
            if self._shutting_down:
                return False
            if self._metrics is not None:
                self._metrics.update_unfinished_work()
            return True

    def _update_unfinished_work_loop(self) -> None:
        while not self._clock.wait(self._stopped, UNFINISHED_WORK_UPDATE_PERIOD):
            if not self.update_unfinished_work():
                return

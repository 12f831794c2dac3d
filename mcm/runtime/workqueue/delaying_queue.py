"""The delaying queue: the port of client-go's ``util/workqueue/delaying_queue.go``.

A :class:`~mcm.runtime.workqueue.queue.Queue` plus :meth:`DelayingQueue.add_after`.

Guarantees:

- ``add_after(item, d)`` with ``d <= 0`` adds at once; otherwise the item is added when the
  queue's clock reaches ``now + d`` (a ``FakeClock`` delivers it on ``step``, without real
  waiting). Every call made while not shutting down counts one ``retries`` metric, zero delays
  included.
- A waiting item keeps its **earliest** ready time: a later request for it is ignored, an
  earlier one moves it forward.
- A direct :meth:`~mcm.runtime.workqueue.queue.Queue.add` does not cancel a waiting entry;
  when the entry is due it is added again (and deduplicated if still queued).
- :meth:`DelayingQueue.shut_down` discards everything still waiting and stops the waiting loop.

Implementation: one daemon thread per queue owns nothing but the timing. ``add_after`` pushes
``(ready_at, seq, item)`` onto a min-heap under the waiting lock and wakes the loop only when the
new entry becomes the head. An entry replaced by an earlier one stays in the heap as a stale
tuple and is skipped when popped. The loop waits on the clock (``clock.wait_condition``) until
the head is due, at most :data:`MAX_WAIT` seconds (client-go's heartbeat), then adds every due
item to the queue under one lock acquisition. Unlike client-go there is no 1000-entry hand-off
channel, so ``add_after`` never blocks on a busy loop.

Threads: the waiting loop is one daemon thread per queue, parked on the clock (with a
``FakeClock`` it counts as one waiter; a named queue's metrics updater is a second one). Shut
the queue down to end it.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Hashable
from typing import TypeVar

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.workqueue._monotonic import monotonic_reader
from mcm.runtime.workqueue.metrics import MetricsProvider
from mcm.runtime.workqueue.queue import Queue

__all__ = ["MAX_WAIT", "DelayingQueue"]

T = TypeVar("T", bound=Hashable)

MAX_WAIT = 10.0
"""Longest sleep of the waiting loop, in seconds (client-go's heartbeat)."""


class DelayingQueue(Queue[T]):
    """A work queue whose items can be added after a delay."""

    __slots__ = ("_heap", "_loop_stopped", "_monotonic", "_seq", "_waiting", "_waiting_cond", "_waiting_lock")

    def __init__(
        self,
        name: str | None = None,
        *,
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self._waiting_lock = threading.Lock()
        self._waiting_cond = threading.Condition(self._waiting_lock)
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, tuple[float, int, T]] = {}
        self._seq = itertools.count()
        self._loop_stopped = False
        self._monotonic = monotonic_reader(clock)
        self._start_daemon(self._waiting_loop, "waiting-loop")

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed on the queue's clock."""
        if self._shutting_down:
            return
        if self._metrics is not None:
            self._metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._monotonic() + delay
        self._waiting_lock.acquire()
        try:
            if self._loop_stopped:  # shut down since the check above
                return
            current = self._waiting.get(item)
            if current is not None and current[0] <= ready_at:
                return
            entry = (ready_at, next(self._seq), item)
            self._waiting[item] = entry
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:
                self._waiting_cond.notify()
        finally:
            self._waiting_lock.release()

    def shut_down(self) -> None:
        super().shut_down()
        self._stop_waiting_loop()

    def shut_down_with_drain(self) -> None:
        self._stop_waiting_loop()  # anything it would still add would be refused anyway
        super().shut_down_with_drain()

    def waiting_len(self) -> int:
        """Number of items waiting for their delay (not part of ``len``)."""
        with self._waiting_lock:
            return len(self._waiting)

    def _stop_waiting_loop(self) -> None:
        with self._waiting_lock:
            self._loop_stopped = True
            self._heap.clear()
            self._waiting.clear()
            self._waiting_cond.notify_all()

    def _pop_due(self, now: float) -> list[T]:
        """Remove and return every item whose ready time has come; caller holds the lock."""
        heap = self._heap
        waiting = self._waiting
        due: list[T] = []
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            item = entry[2]
            if waiting.get(item) is entry:  # otherwise replaced by an earlier request
                del waiting[item]
                due.append(item)
        return due

    def _waiting_loop(self) -> None:
        cond = self._waiting_cond
        clock = self._clock
        with cond:
            while not self._loop_stopped:
                now = clock.monotonic()
                due = self._pop_due(now)
                if due:
                    cond.release()
                    try:
                        self._add_all(due)
                    finally:
                        cond.acquire()
                    continue
                wait_for = min(self._heap[0][0] - now, MAX_WAIT) if self._heap else MAX_WAIT
                clock.wait_condition(cond, wait_for)

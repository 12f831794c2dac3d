"""The rate-limiting queue: the port of client-go's ``util/workqueue/rate_limiting_queue.go``.

A :class:`~mcm.runtime.workqueue.delaying_queue.DelayingQueue` plus a rate limiter.

Guarantees:

- :meth:`RateLimitingQueue.add_rate_limited` is ``add_after(item, limiter.when(item))``; the
  ``when`` call changes the limiter's state (failure count, bucket token).
- :meth:`RateLimitingQueue.forget` only resets the limiter for the item: it neither removes the
  item from the queue or the delay heap nor replaces :meth:`~mcm.runtime.workqueue.queue.Queue.done`.
- :meth:`RateLimitingQueue.num_requeues` is the limiter's count of ``when`` calls since the last
  ``forget``.

The usual worker contract (see :mod:`mcm.runtime.worker`): ``get``; reconcile; on success
``forget``; on error ``add_rate_limited`` while ``num_requeues`` is below the limit, else
``forget``; always ``done``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.workqueue.delaying_queue import DelayingQueue
from mcm.runtime.workqueue.metrics import MetricsProvider
from mcm.runtime.workqueue.rate_limiters import RateLimiter

__all__ = ["RateLimitingQueue"]

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """A delaying work queue that spaces out retries of an item with ``rate_limiter``."""

    __slots__ = ("rate_limiter",)

    def __init__(
        self,
        rate_limiter: RateLimiter,
        name: str | None = None,
        *,
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self.rate_limiter = rate_limiter

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter asks for."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Tell the rate limiter the item succeeded (resets its back-off)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited retries the item has had since it was last forgotten."""
        return self.rate_limiter.num_requeues(item)

"""Rate limiters: the port of client-go's ``util/workqueue/default_rate_limiters.go``.

A rate limiter answers "how long should this item wait before it is retried?". Every limiter
is thread-safe and has three methods:

- ``when(item) -> seconds``: the delay for the next retry. It **changes state** (counts a
  failure, consumes a token) and never sleeps.
- ``forget(item)``: stop tracking the item (it succeeded).
- ``num_requeues(item) -> int``: the number of ``when`` calls since the last ``forget``.

Exact sequences (tested): :class:`ItemExponentialFailureRateLimiter` returns ``base·2^n`` for the
n-th failure counted from 0, capped at ``max`` (also on float overflow);
:class:`ItemFastSlowRateLimiter` returns ``fast`` for the first ``max_fast_attempts`` calls,
then ``slow``; :class:`BucketRateLimiter` is a token bucket that starts full with ``burst``
tokens, refills ``qps`` per second, and hands out reservations (the balance may go negative)
whose delay is the time until that token exists; :class:`MaxOfRateLimiter` asks every limiter
(no short-circuit) and returns the largest delay.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.tokenbucket import WORKQUEUE_BURST, WORKQUEUE_QPS, TokenBucket

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
    "with_max_wait",
]

_MAX_DURATION = (2**63 - 1) / 1e9
"""Go's largest ``time.Duration``, in seconds."""


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float: ...
    def forget(self, item: Hashable) -> None: ...
    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    """``base · 2^failures`` seconds per item, at most ``max_delay``."""

    __slots__ = ("_base", "_failures", "_lock", "_max")

    def __init__(self, base: float, max_delay: float) -> None:
        self._base = base
        self._max = max_delay
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        self._lock.acquire()
        try:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        finally:
            self._lock.release()
        try:
            backoff = self._base * 2.0**exp
        except OverflowError:
            return self._max
        if backoff > self._max or backoff > _MAX_DURATION:
            return self._max
        return backoff

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        self._lock.acquire()
        try:
            self._failures.pop(item, None)
        finally:
            self._lock.release()


class ItemFastSlowRateLimiter:
    """``fast`` seconds for the first ``max_fast_attempts`` retries of an item, then ``slow``."""

    __slots__ = ("_attempts", "_fast", "_lock", "_max_fast", "_slow")

    def __init__(self, fast: float, slow: float, max_fast_attempts: int) -> None:
        self._fast = fast
        self._slow = slow
        self._max_fast = max_fast_attempts
        self._attempts: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            attempts = self._attempts.get(item, 0) + 1
            self._attempts[item] = attempts
        return self._fast if attempts <= self._max_fast else self._slow

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._attempts.get(item, 0)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._attempts.pop(item, None)


class BucketRateLimiter:
    """One token bucket shared by all items: :class:`mcm.runtime.tokenbucket.TokenBucket`.

    ``qps`` may be ``math.inf`` (never delays). A bucket that can never refill a token it
    needs (``burst`` < 1, or a rate ≤ 0 once the burst is used up) returns ``math.inf``, like
    Go's ``InfDuration``. client-go's default controller limiter uses
    :data:`~mcm.runtime.tokenbucket.WORKQUEUE_QPS` / :data:`~mcm.runtime.tokenbucket.WORKQUEUE_BURST`.
    """

    __slots__ = ("_bucket", "_reserve")

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        self._bucket = TokenBucket(qps, burst, clock=clock)
        self._reserve = self._bucket.reserve

    @property
    def bucket(self) -> TokenBucket:
        return self._bucket

    def when(self, item: Hashable) -> float:
        return self._reserve()

    def num_requeues(self, item: Hashable) -> int:
        return 0

    def forget(self, item: Hashable) -> None:
        pass


class MaxOfRateLimiter:
    """The largest delay of all ``limiters``; every one of them is asked on each call."""

    __slots__ = ("_limiters",)

    def __init__(self, *limiters: RateLimiter) -> None:
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        longest = 0.0
        for limiter in self._limiters:
            delay = limiter.when(item)
            if delay > longest:  # noqa: PLR1730 - hot path, cheaper than calling max()
                longest = delay
        return longest

    def num_requeues(self, item: Hashable) -> int:
        return max((limiter.num_requeues(item) for limiter in self._limiters), default=0)

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)


class WithMaxWaitRateLimiter:
    """``limiter``'s delay, but never more than ``max_delay`` seconds."""

    __slots__ = ("_limiter", "_max")

    def __init__(self, limiter: RateLimiter, max_delay: float) -> None:
        self._limiter = limiter
        self._max = max_delay

    def when(self, item: Hashable) -> float:
        return min(self._limiter.when(item), self._max)

    def num_requeues(self, item: Hashable) -> int:
        return self._limiter.num_requeues(item)

    def forget(self, item: Hashable) -> None:
        self._limiter.forget(item)


def with_max_wait(limiter: RateLimiter, max_delay: float) -> WithMaxWaitRateLimiter:
    """Cap ``limiter``'s delays at ``max_delay`` seconds."""
    return WithMaxWaitRateLimiter(limiter, max_delay)


def default_controller_rate_limiter(*, clock: Clock = REAL_CLOCK) -> MaxOfRateLimiter:
    """Per-item exponential 5 ms → 1000 s, and overall 10 qps with a burst of 100
    (:data:`~mcm.runtime.tokenbucket.WORKQUEUE_QPS`, :data:`~mcm.runtime.tokenbucket.WORKQUEUE_BURST`)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(WORKQUEUE_QPS, WORKQUEUE_BURST, clock=clock),
    )


def default_item_based_rate_limiter() -> ItemExponentialFailureRateLimiter:
    """Per-item exponential 1 ms → 1000 s."""
    return ItemExponentialFailureRateLimiter(0.001, 1000.0)

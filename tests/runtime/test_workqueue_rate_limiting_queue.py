"""The rate-limiting queue (port of rate_limiting_queue_test.go) with a FakeClock."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from mcm.runtime.clock import FakeClock
from mcm.runtime.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue

TIMEOUT = 10.0
MS = 0.001


def eventually(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> Iterator[RateLimitingQueue[str]]:
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(1 * MS, 1.0), clock=clock
    )
    yield queue
    queue.shut_down()


def step(clock: FakeClock, seconds: float) -> None:
    """Step once the waiting loop has parked; deliveries are then awaited with ``eventually``."""
    clock.block_until_waiters()
    clock.step(seconds)


def test_rate_limiting_queue(q: RateLimitingQueue[str], clock: FakeClock) -> None:
    q.add_rate_limited("one")  # 1 ms
    q.add_rate_limited("one")  # 2 ms: later than the waiting entry, ignored
    assert q.num_requeues("one") == 2
    q.add_rate_limited("two")  # 1 ms
    q.add_rate_limited("two")  # 2 ms
    assert q.waiting_len() == 2
    step(clock, 0.5 * MS)
    assert q.len() == 0
    step(clock, 0.6 * MS)
    eventually(lambda: q.len() == 2)
    q.forget("one")
    assert q.num_requeues("one") == 0
    assert q.num_requeues("two") == 2
    q.add_rate_limited("one")  # back to the base delay
    assert q.waiting_len() == 1
    step(clock, 1.1 * MS)
    eventually(lambda: q.waiting_len() == 0)


def test_forget_does_not_remove_the_item(q: RateLimitingQueue[str], clock: FakeClock) -> None:
    q.add("queued")
    q.add_rate_limited("waiting")
    q.forget("queued")
    q.forget("waiting")
    assert q.len() == 1
    assert q.waiting_len() == 1
    step(clock, 1.1 * MS)
    eventually(lambda: q.len() == 2)


def test_delays_grow_exponentially_per_item(q: RateLimitingQueue[str], clock: FakeClock) -> None:
    for delay in (1 * MS, 2 * MS, 4 * MS, 8 * MS):
        q.add_rate_limited("k")
        step(clock, delay - 0.25 * MS)
        assert q.len() == 0
        step(clock, 0.5 * MS)
        eventually(lambda: q.len() == 1)
        assert q.get() == ("k", False)
        q.done("k")
    assert q.num_requeues("k") == 4


def test_num_requeues_counts_rate_limited_adds_only(q: RateLimitingQueue[str], clock: FakeClock) -> None:
    q.add("k")
    q.add_after("k", 1.0)
    assert q.num_requeues("k") == 0
    q.add_rate_limited("k")
    q.add_rate_limited("k")
    assert q.num_requeues("k") == 2
    q.add("k")
    assert q.num_requeues("k") == 2

"""Exact delay sequences of every rate limiter (port of default_rate_limiters_test.go)."""

from __future__ import annotations

import math

import pytest

from mcm.runtime.clock import FakeClock
from mcm.runtime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
    with_max_wait,
)

MS = 0.001


def test_item_exponential_failure_rate_limiter() -> None:
    limiter = ItemExponentialFailureRateLimiter(1 * MS, 1.0)
    assert [limiter.when("one") for _ in range(5)] == [1 * MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two"), limiter.when("two")] == [1 * MS, 2 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 1 * MS  # the first delay is base, not 2·base
    assert limiter.num_requeues("two") == 2


def test_item_exponential_failure_rate_limiter_caps_at_max() -> None:
    limiter = ItemExponentialFailureRateLimiter(1 * MS, 0.010)
    assert [limiter.when("x") for _ in range(6)] == [1 * MS, 2 * MS, 4 * MS, 8 * MS, 0.010, 0.010]


def test_item_exponential_failure_rate_limiter_overflow() -> None:
    limiter = ItemExponentialFailureRateLimiter(1 * MS, 1000.0)
    for _ in range(5):
        limiter.when("one")
    assert limiter.when("one") == 32 * MS
    for _ in range(2000):  # far beyond float and int64-nanosecond range
        limiter.when("overflow1")
    assert limiter.when("overflow1") == 1000.0

    limiter = ItemExponentialFailureRateLimiter(60.0, 1000 * 3600.0)
    for _ in range(2):
        limiter.when("one")
    assert limiter.when("one") == 240.0
    for _ in range(2000):
        limiter.when("overflow1")
    assert limiter.when("overflow1") == 1000 * 3600.0


def test_item_fast_slow_rate_limiter() -> None:
    limiter = ItemFastSlowRateLimiter(5 * MS, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == [5 * MS, 5 * MS, 5 * MS, 10.0, 10.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two"), limiter.when("two")] == [5 * MS, 5 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 5 * MS


def test_max_of_rate_limiter() -> None:
    limiter = MaxOfRateLimiter(
        ItemFastSlowRateLimiter(5 * MS, 3.0, 3), ItemExponentialFailureRateLimiter(1 * MS, 1.0)
    )
    assert [limiter.when("one") for _ in range(5)] == [5 * MS, 5 * MS, 5 * MS, 3.0, 3.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two"), limiter.when("two")] == [5 * MS, 5 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 5 * MS


def test_max_of_asks_every_limiter() -> None:
    fast_slow = ItemFastSlowRateLimiter(10.0, 20.0, 1)
    exponential = ItemExponentialFailureRateLimiter(1 * MS, 1.0)
    limiter = MaxOfRateLimiter(fast_slow, exponential)
    limiter.when("a")
    limiter.when("a")
    assert fast_slow.num_requeues("a") == 2
    assert exponential.num_requeues("a") == 2  # not skipped although the first limiter is larger
    limiter.forget("a")
    assert exponential.num_requeues("a") == 0
    assert fast_slow.num_requeues("a") == 0


def test_with_max_wait_rate_limiter() -> None:
    limiter = WithMaxWaitRateLimiter(ItemExponentialFailureRateLimiter(1.0, 1000.0), 500.0)
    delays = [limiter.when("one") for _ in range(11)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 500.0, 500.0]
    assert limiter.num_requeues("one") == 11
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert with_max_wait(default_item_based_rate_limiter(), 0.002).when("x") == 1 * MS


def test_bucket_rate_limiter_burst_then_spaced_reservations() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(10.0, 100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when("a") == pytest.approx(0.1)
    assert limiter.when("b") == pytest.approx(0.2)
    clock.step(0.2)  # refills the two reserved tokens: balance back to 0
    assert limiter.when("c") == pytest.approx(0.1)
    clock.step(100.0)  # refill stops at the burst
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when("d") == pytest.approx(0.1)
    assert limiter.num_requeues("d") == 0
    limiter.forget("d")


def test_bucket_rate_limiter_edge_rates() -> None:
    assert BucketRateLimiter(math.inf, 0).when("x") == 0.0
    assert BucketRateLimiter(10.0, 0, clock=FakeClock()).when("x") == math.inf
    no_refill = BucketRateLimiter(0.0, 2, clock=FakeClock())
    assert [no_refill.when("x") for _ in range(3)] == [0.0, 0.0, math.inf]


def test_default_controller_rate_limiter_sequence() -> None:
    limiter = default_controller_rate_limiter(clock=FakeClock())
    delays = [limiter.when("m") for _ in range(20)]
    expected = [0.005 * 2**k for k in range(18)] + [1000.0, 1000.0]
    assert delays == pytest.approx(expected)
    assert delays[8] == pytest.approx(1.28)
    assert delays[17] == pytest.approx(655.36)
    assert sum(delays[:15]) == pytest.approx(163.835)
    assert limiter.num_requeues("m") == 20


def test_default_controller_rate_limiter_bucket_applies_across_items() -> None:
    limiter = default_controller_rate_limiter(clock=FakeClock())
    for i in range(100):
        assert limiter.when(f"k{i}") == 0.005
    assert limiter.when("k100") == pytest.approx(0.1)
    assert limiter.when("k101") == pytest.approx(0.2)


def test_default_item_based_rate_limiter() -> None:
    limiter = default_item_based_rate_limiter()
    assert [limiter.when("x") for _ in range(3)] == [1 * MS, 2 * MS, 4 * MS]


def test_default_controller_bucket_uses_the_documented_workqueue_defaults() -> None:
    """Issue 10: one bucket implementation (``mcm.runtime.tokenbucket``) with named defaults."""
    from mcm.runtime.tokenbucket import WORKQUEUE_BURST, WORKQUEUE_QPS, TokenBucket

    clock = FakeClock()
    limiter = BucketRateLimiter(WORKQUEUE_QPS, WORKQUEUE_BURST, clock=clock)
    assert isinstance(limiter.bucket, TokenBucket)
    assert (limiter.bucket.qps, limiter.bucket.burst) == (10.0, 100)
    controller = default_controller_rate_limiter(clock=clock)
    delays = [controller.when(i) for i in range(WORKQUEUE_BURST + 1)]
    assert delays[-2] == 0.005 and delays[-1] == pytest.approx(1 / WORKQUEUE_QPS)

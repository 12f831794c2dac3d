"""Token bucket: burst, refill, reservation on credit, blocking on the injected clock."""

from __future__ import annotations

import threading

import pytest

from mcm.runtime.client.ratelimit import NoRateLimiter, TokenBucketRateLimiter, new_rate_limiter
from mcm.runtime.clock import FakeClock


def test_bucket_starts_full_and_then_refuses() -> None:
    limiter = TokenBucketRateLimiter(2.0, 3, clock=FakeClock())
    assert [limiter.try_accept() for _ in range(4)] == [True, True, True, False]


def test_bucket_refills_at_qps_up_to_burst() -> None:
    clock = FakeClock()
    limiter = TokenBucketRateLimiter(2.0, 3, clock=clock)
    for _ in range(3):
        assert limiter.try_accept()
    clock.step(0.5)
    assert limiter.try_accept()
    assert not limiter.try_accept()
    clock.step(100)
    assert limiter.tokens() == pytest.approx(3.0)


def test_reservations_go_negative_and_space_callers_one_over_qps() -> None:
    limiter = TokenBucketRateLimiter(10.0, 2, clock=FakeClock())
    delays = [limiter.reserve() for _ in range(5)]
    assert delays == pytest.approx([0.0, 0.0, 0.1, 0.2, 0.3])
    assert limiter.tokens() == pytest.approx(-3.0)


def test_accept_blocks_until_the_clock_reaches_the_reservation() -> None:
    clock = FakeClock()
    limiter = TokenBucketRateLimiter(4.0, 1, clock=clock)
    limiter.accept()
    done = threading.Event()

    def second() -> None:
        limiter.accept()
        done.set()

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    clock.step(0.2)
    assert not done.wait(0.05)
    clock.step(0.05)
    assert done.wait(5)
    thread.join(5)


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        TokenBucketRateLimiter(0, 1)
    with pytest.raises(ValueError):
        TokenBucketRateLimiter(1.0, 0)


def test_client_go_defaults_and_unthrottled() -> None:
    limiter = new_rate_limiter(0, 0, clock=FakeClock())
    assert isinstance(limiter, TokenBucketRateLimiter)
    assert (limiter.qps, limiter.burst) == (5.0, 10)
    assert isinstance(new_rate_limiter(-1, 0), NoRateLimiter)
    parity = new_rate_limiter(20.0, 30, clock=FakeClock())
    assert isinstance(parity, TokenBucketRateLimiter)
    assert (parity.qps, parity.burst) == (20.0, 30)


def test_one_bucket_behind_the_client_limiter_and_the_workqueue_limiter() -> None:
    """Issue 10: there used to be two token buckets; both limiters now wrap the runtime's one."""
    from mcm.runtime.tokenbucket import TokenBucket
    from mcm.runtime.workqueue import BucketRateLimiter

    client_limiter = TokenBucketRateLimiter(10.0, 2, clock=FakeClock())
    queue_limiter = BucketRateLimiter(10.0, 2, clock=FakeClock())
    assert isinstance(client_limiter.bucket, TokenBucket)
    assert isinstance(queue_limiter.bucket, TokenBucket)
    assert [client_limiter.reserve() for _ in range(4)] == [queue_limiter.when(i) for i in range(4)]


def test_one_set_of_defaults_each_named_after_its_upstream() -> None:
    """Issue 10: ``ratelimit.DEFAULT_QPS`` (5) and ``cluster.DEFAULT_QPS`` (20) used to clash.

    client-go rest defaults to 5/10, its workqueue bucket to 10/100, and machine-controller's
    ``--kube-api-qps``/``--kube-api-burst`` flags to 20/30. Each is defined once, under its own
    name; a cluster client built without limits gets the machine-controller's (client-go: 5/10),
    and 0 still means client-go's.
    """
    import inspect

    from mcm.runtime import tokenbucket
    from mcm.runtime.client import ClusterClient, cluster, load_config, ratelimit

    assert (tokenbucket.REST_QPS, tokenbucket.REST_BURST) == (5.0, 10)
    assert (tokenbucket.WORKQUEUE_QPS, tokenbucket.WORKQUEUE_BURST) == (10.0, 100)
    assert (tokenbucket.MACHINE_CONTROLLER_QPS, tokenbucket.MACHINE_CONTROLLER_BURST) == (20.0, 30)
    assert (ratelimit.DEFAULT_QPS, ratelimit.DEFAULT_BURST) == (tokenbucket.REST_QPS, tokenbucket.REST_BURST)
    assert not hasattr(cluster, "DEFAULT_QPS") and not hasattr(cluster, "DEFAULT_BURST")
    for factory in (ClusterClient, load_config):
        parameters = inspect.signature(factory).parameters
        assert (parameters["qps"].default, parameters["burst"].default) == (20.0, 30)


@pytest.mark.parametrize("with_cancel", [False, True])
def test_accept_says_true_when_it_got_a_token(with_cancel: bool) -> None:
    clock = FakeClock()
    limiter = TokenBucketRateLimiter(4.0, 1, clock=clock)
    cancel = threading.Event() if with_cancel else None
    assert limiter.accept(cancel) is True  # from the full bucket
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(limiter.accept(cancel)), daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    clock.step(0.25)
    thread.join(5)
    assert results == [True]


def test_a_cancelled_accept_says_false_and_gives_its_token_back() -> None:
    clock = FakeClock()
    limiter = TokenBucketRateLimiter(4.0, 1, clock=clock)
    assert limiter.accept() is True
    cancel = threading.Event()
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(limiter.accept(cancel)), daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    assert limiter.tokens() == pytest.approx(-1.0)
    cancel.set()
    thread.join(5)
    assert results == [False]
    assert limiter.tokens() == pytest.approx(0.0)


def test_no_rate_limiter_lets_everything_through() -> None:
    limiter = NoRateLimiter()
    assert limiter.accept() is True
    assert limiter.accept(threading.Event()) is True
    assert limiter.try_accept() is True

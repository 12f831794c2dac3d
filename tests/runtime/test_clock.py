"""The fake clock wakes waiters exactly at their fake deadlines; the real clock behaves like time."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from mcm.runtime.clock import REAL_CLOCK, Clock, FakeClock, RealClock


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(FakeClock(), Clock)


def test_fake_clock_moves_only_when_stepped() -> None:
    clock = FakeClock(dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    start = clock.monotonic()
    assert clock.since(start) == 0
    clock.step(2.5)
    assert clock.since(start) == 2.5
    assert clock.now() == dt.datetime(2030, 1, 1, 0, 0, 2, 500000, tzinfo=dt.UTC)
    with pytest.raises(ValueError):
        clock.step(-1)


def test_naive_start_time_is_rejected() -> None:
    with pytest.raises(ValueError):
        FakeClock(dt.datetime(2030, 1, 1))


def test_after_fires_at_the_deadline_not_before() -> None:
    clock = FakeClock()
    fired = clock.after(10)
    clock.step(9.999)
    assert not fired.is_set()
    clock.step(0.001)
    assert fired.is_set()


def test_after_zero_fires_at_once() -> None:
    assert FakeClock().after(0).is_set()


def test_timer_stop_and_reset() -> None:
    clock = FakeClock()
    timer = clock.new_timer(5)
    assert timer.stop() is True
    clock.step(10)
    assert not timer.event.is_set()
    assert timer.reset(3) is False
    clock.step(2)
    assert not timer.event.is_set()
    clock.step(1)
    assert timer.event.is_set()
    assert timer.stop() is False


def test_sleep_blocks_until_stepped() -> None:
    clock = FakeClock()
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep(30)
        woke.set()

    t = threading.Thread(target=sleeper)
    t.start()
    clock.block_until_waiters(1)
    clock.step(29)
    assert not woke.is_set()
    clock.step(1)
    t.join(5)
    assert woke.is_set()


def test_wait_returns_when_event_set_before_deadline() -> None:
    clock = FakeClock()
    event = threading.Event()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(clock.wait(event, 100)))
    t.start()
    clock.block_until_waiters(1)
    event.set()
    t.join(5)
    assert result == [True]
    assert clock.waiter_count() == 0


def test_wait_times_out_on_fake_time() -> None:
    clock = FakeClock()
    event = threading.Event()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(clock.wait(event, 100)))
    t.start()
    clock.block_until_waiters(1)
    clock.step(100)
    t.join(5)
    assert result == [False]


def test_wait_condition_wakes_at_fake_deadline() -> None:
    clock = FakeClock()
    cond = threading.Condition()
    returned = threading.Event()

    def waiter() -> None:
        with cond:
            clock.wait_condition(cond, 7)
        returned.set()

    t = threading.Thread(target=waiter)
    t.start()
    clock.block_until_waiters(1)
    clock.step(6)
    assert not returned.is_set()
    clock.step(1)
    t.join(5)
    assert returned.is_set()


def test_block_until_waiters_times_out() -> None:
    with pytest.raises(TimeoutError):
        FakeClock().block_until_waiters(1, timeout=0.01)


def test_real_clock_after_and_wait() -> None:
    assert REAL_CLOCK.after(0.01).wait(5)
    event = threading.Event()
    assert REAL_CLOCK.wait(event, 0) is False
    event.set()
    assert REAL_CLOCK.wait(event, 1) is True
    assert REAL_CLOCK.now().tzinfo is dt.UTC


def test_fake_wait_does_not_wake_other_waiters_of_the_same_event() -> None:
    clock = FakeClock()
    event = threading.Event()
    plain_result: list[bool] = []
    plain = threading.Thread(target=lambda: plain_result.append(event.wait(2.0)))
    plain.start()
    fake_result: list[bool] = []
    faker = threading.Thread(target=lambda: fake_result.append(clock.wait(event, 1)))
    faker.start()
    clock.block_until_waiters(1)
    clock.step(1)
    faker.join(5)
    assert fake_result == [False]
    plain.join(5)
    assert plain_result == [False]  # timed out; never woken as if the event were set

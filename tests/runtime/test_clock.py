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


def test_after_func_calls_at_the_deadline_in_the_step_unless_stopped() -> None:
    clock = FakeClock()
    calls: list[float] = []
    clock.after_func(5, lambda: calls.append(clock.monotonic()))
    stopped = clock.after_func(5, lambda: calls.append(-1.0))
    assert stopped.stop() is True
    clock.step(4.999)
    assert calls == []
    clock.step(0.001)
    assert calls == [clock.monotonic()]
    clock.after_func(0, lambda: calls.append(0.0))
    assert calls[-1] == 0.0  # at once


def test_real_clock_after_func_runs_callbacks_in_deadline_order() -> None:
    clock = RealClock()
    order: list[str] = []
    done = threading.Event()

    def late() -> None:
        order.append("late")
        done.set()

    clock.after_func(0.2, late)
    clock.after_func(0.05, lambda: order.append("early"))  # an earlier deadline wakes the thread
    assert done.wait(5)
    assert order == ["early", "late"]


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
    plain = threading.Thread(target=lambda: plain_result.append(event.wait()))
    plain.start()
    fake_result: list[bool] = []
    faker = threading.Thread(target=lambda: fake_result.append(clock.wait(event, 1)))
    faker.start()
    clock.block_until_waiters(1)
    clock.step(1)
    faker.join(5)
    assert fake_result == [False]
    assert plain_result == []  # never woken as if the event were set
    event.set()
    plain.join(5)
    assert plain_result == [True]


class _SpyEvent(threading.Event):
    """Records every real-time wait on the event."""

    def __init__(self) -> None:
        super().__init__()
        self.timed_waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timed_waits.append(timeout)
        return super().wait(timeout)


def test_fake_wait_never_slices_into_real_time_sleeps() -> None:
    # Regression: FakeClock.wait polled event.wait(0.002) in a loop until the fake deadline fired,
    # burning CPU under load and waking up to a slice late.
    clock = FakeClock()
    event = _SpyEvent()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(clock.wait(event, 30)))
    t.start()
    clock.block_until_waiters(1)
    clock.step(29.999)
    assert clock.waiter_count() == 1
    clock.step(0.001)
    t.join(5)
    assert result == [False]
    assert event.timed_waits == []


def test_event_set_wakes_every_fake_waiter_on_every_clock() -> None:
    clocks = [FakeClock(), FakeClock()]
    event = threading.Event()
    results: list[bool] = []
    lock = threading.Lock()

    def waiter(clock: FakeClock) -> None:
        woke = clock.wait(event, 100)
        with lock:
            results.append(woke)

    threads = [threading.Thread(target=waiter, args=(c,)) for c in (*clocks, clocks[0])]
    for t in threads:
        t.start()
    clocks[0].block_until_waiters(2)
    clocks[1].block_until_waiters(1)
    event.set()
    for t in threads:
        t.join(5)
    assert results == [True, True, True]
    assert "notify_all" in vars(vars(event)["_cond"])  # only this instance is hooked
    assert "notify_all" not in vars(vars(threading.Event())["_cond"])


def test_a_set_bound_before_the_first_wait_wakes_the_waiter() -> None:
    # Regression: the hook replaced the instance's ``set``, so a thread that had looked up
    # ``event.set`` before the first wait (the API-server probe, started before the wait on its
    # answer) raised the flag without notifying the clock: the waiter hung until the next step.
    clock = FakeClock()
    event = threading.Event()
    bound_early = event.set
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(clock.wait(event, 100)), daemon=True)
    waiter.start()
    try:
        clock.block_until_waiters(1)
        bound_early()
        waiter.join(5)
        assert result == [True]
    finally:
        clock.step(100)


def test_wait_on_an_already_set_event_returns_at_once() -> None:
    clock = FakeClock()
    event = threading.Event()
    event.set()
    assert clock.wait(event, 10) is True
    assert clock.waiter_count() == 0


def test_a_resync_loop_gets_exactly_one_tick_per_period() -> None:
    clock = FakeClock()
    stop = threading.Event()
    ticks: list[float] = []

    def resync_loop() -> None:
        while not clock.wait(stop, 30):
            ticks.append(clock.monotonic())

    t = threading.Thread(target=resync_loop)
    t.start()
    start = clock.monotonic()
    for _ in range(200):
        clock.block_until_waiters(1)
        clock.step(30)
    clock.block_until_waiters(1)
    stop.set()
    t.join(5)
    assert ticks == [start + 30 * (i + 1) for i in range(200)]


class _GatedLock:
    """A lock that one chosen thread can acquire only once the gate opens: that thread, woken by
    a step, stands for one a loaded machine has not scheduled yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.gate = threading.Event()
        self.gated: threading.Thread | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if blocking and threading.current_thread() is self.gated:
            self.gate.wait()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def test_a_woken_waiter_counts_as_resuming_until_its_thread_runs_again() -> None:
    clock = FakeClock()
    lock = _GatedLock()
    cond = threading.Condition(lock)  # type: ignore[arg-type]

    def waiter() -> None:
        with cond:
            lock.gated = threading.current_thread()
            clock.wait_condition(cond, 1)

    thread = threading.Thread(target=waiter)
    thread.start()
    clock.block_until_waiters(1)
    assert clock.resuming_waiters() == 0

    clock.step(1)
    assert clock.resuming_waiters() == 1  # woken, and held back from running again

    lock.gate.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert clock.resuming_waiters() == 0


def test_a_sleeper_counts_as_resuming_after_its_step_until_it_returns() -> None:
    clock = FakeClock()
    returned = threading.Event()

    def sleeper() -> None:
        clock.sleep(2)
        returned.set()

    thread = threading.Thread(target=sleeper)
    thread.start()
    clock.block_until_waiters(1)
    clock.step(1)
    assert clock.resuming_waiters() == 0  # not due yet: still parked, not woken
    clock.step(1)
    assert returned.wait(10)
    thread.join(timeout=10)
    assert clock.resuming_waiters() == 0

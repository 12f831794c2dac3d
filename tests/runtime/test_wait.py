"""util/wait port: back-off sequences, loops and polls driven by a FakeClock."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable

import pytest
import structlog

from mcm.runtime import errors, wait
from mcm.runtime.clock import FakeClock

TIMEOUT = 10.0


class Background:
    """Runs ``fn`` in a daemon thread and keeps its exception, if any."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.error: BaseException | None = None
        self.done = threading.Event()

        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                self.error = exc
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        assert self.done.wait(TIMEOUT), "background call did not finish"


# -- Backoff -----------------------------------------------------------------------------------


def test_backoff_step_multiplies_then_caps_and_stays() -> None:
    b = wait.Backoff(duration=1.0, factor=2.0, steps=10, cap=5.0)
    assert [b.step() for _ in range(6)] == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert b.steps == 0


def test_backoff_without_steps_returns_duration_unchanged() -> None:
    b = wait.Backoff(duration=3.0, factor=2.0, steps=0)
    assert [b.step(), b.step()] == [3.0, 3.0]


def test_backoff_zero_factor_is_constant() -> None:
    b = wait.Backoff(duration=0.5, steps=3)
    assert [b.step() for _ in range(3)] == [0.5, 0.5, 0.5]
    assert b.steps == 0


def test_backoff_jitter_stays_in_range() -> None:
    b = wait.Backoff(duration=1.0, factor=1.0, jitter=0.5, steps=100)
    for _ in range(100):
        assert 1.0 <= b.step() < 1.5


def test_jitter_non_positive_factor_means_one() -> None:
    for _ in range(100):
        assert 2.0 <= wait.jitter(2.0, 0.0) < 4.0


def test_exponential_backoff_manager_sequence_and_reset() -> None:
    clock = FakeClock()
    m = wait.ExponentialBackoffManager(1.0, 10.0, 60.0, 2.0, 0.0, clock=clock)
    assert [m.next_backoff() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    clock.step(60.0)  # not more than reset: keeps going
    assert m.next_backoff() == 10.0
    clock.step(60.5)
    assert [m.next_backoff(), m.next_backoff()] == [1.0, 2.0]


def test_exponential_backoff_checks_steps_times() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def never() -> bool:
        calls.append(clock.monotonic())
        return False

    bg = Background(lambda: wait.exponential_backoff(wait.Backoff(1.0, 2.0, steps=3), never, clock=clock))
    clock.block_until_waiters()
    clock.step(1.0)
    clock.block_until_waiters()
    clock.step(2.0)
    bg.join()
    assert isinstance(bg.error, wait.WaitTimeoutError)
    assert [c - calls[0] for c in calls] == [0.0, 1.0, 3.0]


def test_exponential_backoff_returns_when_done_and_propagates_errors() -> None:
    wait.exponential_backoff(wait.Backoff(1.0, steps=3), lambda: True, clock=FakeClock())

    def fail() -> bool:
        raise OSError("cond failed")

    with pytest.raises(OSError):
        wait.exponential_backoff(wait.Backoff(1.0, steps=3), fail, clock=FakeClock())


def test_wait_timeout_error_message() -> None:
    assert str(wait.WaitTimeoutError()) == "timed out waiting for the condition"
    assert wait.interrupted(wait.WaitTimeoutError())
    assert not wait.interrupted(ValueError())


# -- until loops ------------------------------------------------------------------------------


def test_until_runs_at_once_then_every_period_after_return() -> None:
    clock = FakeClock()
    stop = threading.Event()
    calls: queue.Queue[float] = queue.Queue()
    bg = Background(lambda: wait.until(lambda: calls.put(clock.monotonic()), 2.0, stop, clock=clock))
    first = calls.get(timeout=TIMEOUT)
    clock.block_until_waiters()
    clock.step(1.9)
    assert calls.empty()
    clock.step(0.1)
    assert calls.get(timeout=TIMEOUT) == first + 2.0
    clock.block_until_waiters()
    stop.set()
    bg.join()
    assert bg.error is None


def test_until_does_not_run_when_already_stopped() -> None:
    stop = threading.Event()
    stop.set()
    calls: list[int] = []
    wait.until(lambda: calls.append(1), 1.0, stop, clock=FakeClock())
    assert calls == []


def test_non_sliding_until_counts_the_period_from_the_start() -> None:
    clock = FakeClock()
    stop = threading.Event()
    calls: queue.Queue[float] = queue.Queue()

    def slow() -> None:
        calls.put(clock.monotonic())
        clock.step(0.3)  # the function itself takes 0.3 s of fake time

    bg = Background(lambda: wait.non_sliding_until(slow, 1.0, stop, clock=clock))
    first = calls.get(timeout=TIMEOUT)
    clock.block_until_waiters()
    clock.step(0.7)
    assert calls.get(timeout=TIMEOUT) == first + 1.0
    stop.set()
    bg.join()


def test_sliding_until_counts_the_period_from_the_end() -> None:
    clock = FakeClock()
    stop = threading.Event()
    calls: queue.Queue[float] = queue.Queue()

    def slow() -> None:
        calls.put(clock.monotonic())
        clock.step(0.3)

    bg = Background(lambda: wait.until(slow, 1.0, stop, clock=clock))
    first = calls.get(timeout=TIMEOUT)
    clock.block_until_waiters()
    clock.step(0.7)
    assert calls.empty()
    clock.step(0.3)
    assert calls.get(timeout=TIMEOUT) == first + 1.3
    stop.set()
    bg.join()


def test_until_survives_exceptions_in_f(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)
    clock = FakeClock()
    stop = threading.Event()
    calls: queue.Queue[int] = queue.Queue()

    def flaky() -> None:
        calls.put(1)
        raise RuntimeError("bug")

    with structlog.testing.capture_logs():
        bg = Background(lambda: wait.until(flaky, 1.0, stop, clock=clock))
        calls.get(timeout=TIMEOUT)
        clock.block_until_waiters()
        clock.step(1.0)
        calls.get(timeout=TIMEOUT)
        stop.set()
        bg.join()
    assert bg.error is None


def test_until_crashes_when_really_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    fatal: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)

    def bug() -> None:
        raise RuntimeError("bug")

    with structlog.testing.capture_logs(), pytest.raises(RuntimeError):
        wait.until(bug, 1.0, threading.Event(), clock=FakeClock())
    assert len(fatal) == 1


def test_jitter_until_waits_within_the_jitter_range() -> None:
    clock = FakeClock()
    stop = threading.Event()
    calls: queue.Queue[float] = queue.Queue()
    bg = Background(lambda: wait.jitter_until(lambda: calls.put(1), 1.0, 1.0, True, stop, clock=clock))
    calls.get(timeout=TIMEOUT)
    clock.block_until_waiters()
    clock.step(0.999)
    assert calls.empty()
    clock.step(1.0)
    calls.get(timeout=TIMEOUT)
    stop.set()
    bg.join()


def test_backoff_until_uses_manager_waits() -> None:
    clock = FakeClock()
    stop = threading.Event()
    calls: queue.Queue[float] = queue.Queue()
    manager = wait.ExponentialBackoffManager(1.0, 8.0, 100.0, 2.0, 0.0, clock=clock)
    bg = Background(
        lambda: wait.backoff_until(lambda: calls.put(clock.monotonic()), manager, True, stop, clock=clock)
    )
    times = [calls.get(timeout=TIMEOUT)]
    for gap in (1.0, 2.0, 4.0):
        clock.block_until_waiters()
        clock.step(gap)
        times.append(calls.get(timeout=TIMEOUT))
    assert [b - a for a, b in itertools.pairwise(times)] == [1.0, 2.0, 4.0]
    stop.set()
    bg.join()


# -- polls -------------------------------------------------------------------------------------


def drive(clock: FakeClock, bg: Background, step: float) -> None:
    """Step the clock each time the background call parks on it, until the call returns."""
    while not bg.done.is_set():
        try:
            clock.block_until_waiters(timeout=0.05)
        except TimeoutError:
            continue
        clock.step(step)
    bg.join()


def counting(succeed_on: int, clock: FakeClock, log: list[float]) -> Callable[[], bool]:
    def cond() -> bool:
        log.append(clock.monotonic())
        return len(log) >= succeed_on

    return cond


def test_poll_waits_one_interval_before_the_first_check() -> None:
    clock = FakeClock()
    start = clock.monotonic()
    checks: list[float] = []
    bg = Background(lambda: wait.poll(1.0, 10.0, counting(3, clock, checks), clock=clock))
    drive(clock, bg, 1.0)
    assert bg.error is None
    assert [c - start for c in checks] == [1.0, 2.0, 3.0]


def test_poll_immediate_checks_at_once() -> None:
    clock = FakeClock()
    checks: list[float] = []
    wait.poll_immediate(1.0, 10.0, counting(1, clock, checks), clock=clock)
    assert checks == [clock.monotonic()]


def test_poll_checks_one_last_time_at_the_timeout() -> None:
    clock = FakeClock()
    start = clock.monotonic()
    checks: list[float] = []
    bg = Background(lambda: wait.poll(1.0, 2.5, counting(100, clock, checks), clock=clock))
    drive(clock, bg, 0.5)
    assert isinstance(bg.error, wait.WaitTimeoutError)
    assert [c - start for c in checks] == [1.0, 2.0, 2.5]


def test_poll_propagates_condition_errors() -> None:
    def fail() -> bool:
        raise LookupError("nope")

    with pytest.raises(LookupError):
        wait.poll_immediate(1.0, 10.0, fail, clock=FakeClock())


def test_poll_until_stops_on_the_event() -> None:
    clock = FakeClock()
    stop = threading.Event()
    checks: list[float] = []
    bg = Background(lambda: wait.poll_until(1.0, counting(100, clock, checks), stop, clock=clock))
    clock.block_until_waiters()
    clock.step(1.0)
    clock.block_until_waiters()
    stop.set()
    bg.join()
    assert isinstance(bg.error, wait.WaitTimeoutError)
    assert len(checks) == 1


def test_poll_immediate_until_succeeds_without_waiting() -> None:
    checks: list[float] = []
    clock = FakeClock()
    wait.poll_immediate_until(1.0, counting(1, clock, checks), threading.Event(), clock=clock)
    assert len(checks) == 1


def test_poll_infinite_keeps_going() -> None:
    clock = FakeClock()
    checks: list[float] = []
    bg = Background(lambda: wait.poll_infinite(10.0, counting(5, clock, checks), clock=clock))
    drive(clock, bg, 10.0)
    assert bg.error is None
    assert len(checks) == 5

"""retry_on_conflict and on_error (client-go ``util/retry`` tests: RetryOnConflict, OnError)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from mcm.runtime.client.errors import Conflict, NotFound
from mcm.runtime.clock import FakeClock
from mcm.runtime.retry import DEFAULT_BACKOFF, DEFAULT_RETRY, on_error, retry_on_conflict
from mcm.runtime.wait import Backoff
from tests.clocks import SelfSteppingClock


class failing:  # noqa: N801 - reads as a function at the call sites
    """A call that raises ``error()`` its first ``times`` calls, then returns ``"done"``."""

    def __init__(self, times: int, error: Callable[[], Exception]) -> None:
        self.times, self.error, self.calls = times, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise self.error()
        return "done"


def test_default_retry_is_client_gos() -> None:
    assert Backoff(duration=0.010, factor=1.0, jitter=0.1, steps=5) == DEFAULT_RETRY
    assert Backoff(duration=0.010, factor=5.0, jitter=0.1, steps=4) == DEFAULT_BACKOFF


def test_conflicts_are_retried_until_success_with_jittered_10ms_sleeps() -> None:
    clock = SelfSteppingClock()
    fn = failing(4, Conflict)
    assert retry_on_conflict(DEFAULT_RETRY, fn, clock=clock) == "done"
    assert fn.calls == 5
    assert len(clock.slept) == 4
    assert all(0.010 <= s < 0.011 for s in clock.slept)
    assert DEFAULT_RETRY.steps == 5  # the shared back-off is not consumed


def test_the_last_conflict_is_raised_when_the_steps_run_out() -> None:
    clock = SelfSteppingClock()
    fn = failing(99, Conflict)
    with pytest.raises(Conflict):
        retry_on_conflict(DEFAULT_RETRY, fn, clock=clock)
    assert fn.calls == 5
    assert len(clock.slept) == 4


def test_other_errors_end_at_once() -> None:
    clock = SelfSteppingClock()
    fn = failing(1, NotFound)
    with pytest.raises(NotFound):
        retry_on_conflict(DEFAULT_RETRY, fn, clock=clock)
    assert fn.calls == 1
    assert clock.slept == []


def test_default_backoff_grows_by_five() -> None:
    clock = SelfSteppingClock()
    with pytest.raises(Conflict):
        retry_on_conflict(DEFAULT_BACKOFF, failing(99, Conflict), clock=clock)
    assert len(clock.slept) == 3
    for slept, base in zip(clock.slept, (0.01, 0.05, 0.25), strict=True):
        assert base <= slept < base * 1.1


def test_on_error_retries_what_the_predicate_allows() -> None:
    clock = SelfSteppingClock()
    fn = failing(2, lambda: ValueError("transient"))
    assert (
        on_error(Backoff(duration=1.0, steps=3), lambda e: isinstance(e, ValueError), fn, clock=clock)
        == "done"
    )
    assert clock.slept == [1.0, 1.0]


def test_no_steps_still_calls_once() -> None:
    fn = failing(0, Conflict)
    assert retry_on_conflict(Backoff(duration=1.0, steps=0), fn, clock=SelfSteppingClock()) == "done"
    with pytest.raises(Conflict):
        retry_on_conflict(Backoff(duration=1.0, steps=0), failing(1, Conflict), clock=SelfSteppingClock())


def test_the_sleep_waits_for_the_fake_clock() -> None:
    clock = FakeClock()
    result: list[str] = []
    fn = failing(1, Conflict)
    worker = threading.Thread(target=lambda: result.append(retry_on_conflict(DEFAULT_RETRY, fn, clock=clock)))
    worker.start()
    clock.block_until_waiters(1)
    assert result == [] and fn.calls == 1
    clock.step(0.011)
    worker.join(timeout=10)
    assert result == ["done"]

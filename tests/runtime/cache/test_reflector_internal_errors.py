"""Reflector: internal errors are re-watched with a back-off for at most a maximum duration (issue 10).

Ports client-go's ``TestRetryInternalError`` and ``retry_with_deadline_test.go``. Where client-go
re-watches at once after an internal error, this reflector first waits one step of its
init-connection back-off (the tests give it a zero back-off where they count retries).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest

from mcm.runtime.cache.reflector import Reflector, RetryWithDeadline
from mcm.runtime.client import errors as client_errors
from mcm.runtime.client.types import ListOptions, Object, WatchEvent
from mcm.runtime.clock import FakeClock
from mcm.runtime.wait import ExponentialBackoffManager

from .test_reflector import RecordingStore

NO_LEADER = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "Internal error occurred: etcdserver: no leader",
    "reason": "InternalError",
    "code": 500,
}


class _NoBackoff:
    def next_backoff(self) -> float:
        return 0.0


class _OneEventWatch:
    def __init__(self, event: WatchEvent) -> None:
        self._event = event

    def __iter__(self) -> Iterator[WatchEvent]:
        yield self._event

    def stop(self) -> None:
        pass


class FailingWatches:
    """Every watch ends with an internal error and costs a second of fake time (client-go's test)."""

    def __init__(self, clock: FakeClock, rewind_at: int = 0) -> None:
        self.clock = clock
        self.rewind_at = rewind_at
        self.watch_calls = 0
        self.list_calls = 0

    def list(self, options: ListOptions) -> Object:
        self.list_calls += 1
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    def watch(self, options: ListOptions) -> _OneEventWatch:
        self.watch_calls += 1
        if self.watch_calls == self.rewind_at:
            self.clock.step(60)
        self.clock.step(1)
        return _OneEventWatch(WatchEvent("ERROR", dict(NO_LEADER)))


@pytest.mark.parametrize(
    ("max_duration", "rewind_at", "want_retries"),
    [(0.0, 0, 0), (30.0, 0, 31), (30.0, 10, 40)],
    ids=["retries off", "retries on, all calls fail", "retries on, one call successful"],
)
def test_retry_internal_error(max_duration: float, rewind_at: int, want_retries: int) -> None:
    clock = FakeClock()
    lw = FailingWatches(clock, rewind_at)
    reflector = Reflector(
        lw,
        RecordingStore(),
        clock=clock,
        backoff_manager=_NoBackoff(),
        init_conn_backoff_manager=_NoBackoff(),
        max_internal_error_retry_duration=max_duration,
    )
    reflector.list_and_watch(threading.Event())
    assert lw.watch_calls - 1 == want_retries
    assert lw.list_calls == 1


def test_internal_errors_back_off_between_rewatches_then_give_up_and_relist() -> None:
    clock = FakeClock()
    lw = FailingWatches(clock)
    stop = threading.Event()
    reflector = Reflector(
        lw,
        RecordingStore(),
        clock=clock,
        rng=random.Random(1),
        backoff_manager=ExponentialBackoffManager(0.8, 30.0, 120.0, 2.0, 0.0, clock=clock),
        init_conn_backoff_manager=ExponentialBackoffManager(0.8, 30.0, 120.0, 2.0, 0.0, clock=clock),
        max_internal_error_retry_duration=3.0,
    )
    thread = threading.Thread(target=reflector.list_and_watch, args=(stop,), daemon=True)
    thread.start()
    try:
        clock.block_until_waiters(1)  # the first internal error: a back-off before re-watching
        assert lw.watch_calls == 1
        clock.step(0.79)
        assert lw.watch_calls == 1
        clock.step(0.01)
        clock.block_until_waiters(1)
        assert lw.watch_calls == 2
        clock.step(1.6)  # errors at t=1, 2.8, then 5.4: past the 3 s window
        thread.join(5)
        assert not thread.is_alive(), "the reflector kept re-watching past the deadline"
        assert lw.watch_calls == 3
        assert lw.list_calls == 1  # giving up ends list_and_watch, so run() relists
    finally:
        stop.set()


def test_retry_with_deadline_window_and_reset() -> None:
    clock = FakeClock()
    retry = RetryWithDeadline(10.0, 60.0, client_errors.is_internal_error, clock)
    internal = client_errors.InternalError(dict(NO_LEADER))
    assert not retry.should_retry()  # nothing failed yet
    retry.after(internal)
    assert retry.should_retry()
    clock.step(10)
    retry.after(ValueError("not retryable"))  # other errors do not move the window
    assert retry.should_retry()
    clock.step(0.5)
    assert not retry.should_retry()
    retry.after(internal)  # a fresh run of errors starts a fresh window
    assert retry.should_retry()
    clock.step(61)
    retry.after(internal)  # a quiet minute resets the window
    clock.step(9)
    assert retry.should_retry()
    assert not RetryWithDeadline(0.0, 60.0, client_errors.is_internal_error, clock).should_retry()

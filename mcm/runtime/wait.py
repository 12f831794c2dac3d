"""Loops, polls and back-offs: the port of apimachinery's ``util/wait``.

Guarantees:

- Every loop stops on a :class:`threading.Event` ("stop channel") and waits through the injected
  :class:`~mcm.runtime.clock.Clock` (``clock.wait(stop, seconds)``), so a ``FakeClock`` drives
  it without real waiting. A running function is never interrupted; the loop returns at the
  first check after ``stop`` is set.
- :func:`jitter_until` and friends run ``f`` inside :func:`~mcm.runtime.errors.handle_crash`:
  an exception in ``f`` is logged and the loop goes on (unless ``REALLY_CRASH``).
- Polls call the condition first after one interval (``poll*``) or at once (``poll_immediate*``).
  A condition returns ``True`` when done; raising is its error and ends the poll with that
  exception. When the timeout expires the condition is checked one last time, then
  :class:`WaitTimeoutError` is raised; a stop event set during a poll raises it too.
- :class:`Backoff` and :class:`ExponentialBackoffManager` compute durations exactly like Go
  (``Step`` multiplies, caps, and jitters in ``[d, d + jitter·d)``).
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable
from typing import Protocol

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import TransientError, handle_crash

__all__ = [
    "Backoff",
    "BackoffManager",
    "ExponentialBackoffManager",
    "JitteredBackoffManager",
    "WaitTimeoutError",
    "backoff_until",
    "exponential_backoff",
    "forever",
    "interrupted",
    "jitter",
    "jitter_until",
    "non_sliding_until",
    "poll",
    "poll_immediate",
    "poll_immediate_infinite",
    "poll_immediate_until",
    "poll_infinite",
    "poll_until",
    "until",
]

ConditionFunc = Callable[[], bool]
"""Returns ``True`` when the wait is over; raising aborts the wait with that exception."""

MAX_INT32 = 2**31 - 1


class WaitTimeoutError(TransientError):
    """The condition was not met in time (or the stop event fired)."""

    def __init__(self, message: str = "timed out waiting for the condition") -> None:
        super().__init__(message)


def interrupted(err: BaseException | None) -> bool:
    """True if ``err`` means a wait ended by timeout or stop."""
    return isinstance(err, WaitTimeoutError)


def jitter(duration: float, max_factor: float) -> float:
    """``duration`` plus a random share of up to ``max_factor·duration``; factor ≤ 0 means 1."""
    if max_factor <= 0.0:
        max_factor = 1.0
    return duration + random.random() * max_factor * duration


# --------------------------------------------------------------------------------------------
# Back-off
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Backoff:
    """Parameters of an exponential back-off; :meth:`step` mutates ``duration`` and ``steps``.

    ``duration`` and ``cap`` are seconds. ``factor`` 0 keeps the duration constant; ``cap`` ≤ 0
    means no cap; ``steps`` < 1 makes every step return the current duration unchanged.
    """

    duration: float
    factor: float = 0.0
    jitter: float = 0.0
    steps: int = 0
    cap: float = 0.0

    def step(self) -> float:
        """Return the next wait and advance the sequence."""
        if self.steps < 1:
            return jitter(self.duration, self.jitter) if self.jitter > 0 else self.duration
        self.steps -= 1
        current = self.duration
        if self.factor != 0:
            self.duration = self.duration * self.factor
            if self.cap > 0 and self.duration > self.cap:
                self.duration = self.cap
                self.steps = 0
        return jitter(current, self.jitter) if self.jitter > 0 else current


class BackoffManager(Protocol):
    """Hands out the wait before the next attempt of a :func:`backoff_until` loop."""

    def next_backoff(self) -> float: ...


class ExponentialBackoffManager:
    """Exponential back-off that starts over after ``reset`` seconds without a request.

    The port of ``NewExponentialBackoffManager(initial, max, reset, factor, jitter, clock)``.
    """

    def __init__(  # noqa: PLR0917 - the Go constructor's parameter order
        self,
        initial: float,
        max: float,
        reset: float,
        factor: float,
        jitter: float,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self._initial = initial
        self._reset = reset
        self._clock = clock
        self._backoff = Backoff(duration=initial, factor=factor, jitter=jitter, steps=MAX_INT32, cap=max)
        self._last_request = clock.monotonic()
        self._lock = threading.Lock()

    def next_backoff(self) -> float:
        """The next wait; restarts from ``initial`` if the last request is older than ``reset``."""
        with self._lock:
            now = self._clock.monotonic()
            if now - self._last_request > self._reset:
                self._backoff.steps = MAX_INT32
                self._backoff.duration = self._initial
            self._last_request = now
            return self._backoff.step()


class JitteredBackoffManager:
    """A constant ``duration``, jittered by ``jitter`` when positive (what ``jitter_until`` uses)."""

    def __init__(self, duration: float, jitter: float) -> None:
        self._duration = duration
        self._jitter = jitter

    def next_backoff(self) -> float:
        if self._jitter > 0.0:
            return jitter(self._duration, self._jitter)
        return self._duration


def exponential_backoff(backoff: Backoff, condition: ConditionFunc, *, clock: Clock = REAL_CLOCK) -> None:
    """Check ``condition`` up to ``backoff.steps`` times, sleeping ``step()`` in between.

    Returns when the condition is done; raises :class:`WaitTimeoutError` when the steps run out.
    ``backoff`` itself is not modified (Go passes it by value).
    """
    backoff = dataclasses.replace(backoff)
    while backoff.steps > 0:
        if condition():
            return
        if backoff.steps == 1:
            break
        clock.sleep(backoff.step())
    raise WaitTimeoutError()


# --------------------------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------------------------


def backoff_until(
    f: Callable[[], None],
    manager: BackoffManager,
    sliding: bool,
    stop: threading.Event,
    *,
    clock: Clock = REAL_CLOCK,
) -> None:
    """Run ``f`` until ``stop`` is set, waiting ``manager.next_backoff()`` between runs.

    With ``sliding`` the wait starts after ``f`` returns; otherwise it is counted from before
    ``f`` started. ``clock`` should be the manager's clock.
    """
    while not stop.is_set():
        started = clock.monotonic()
        wait_for = 0.0 if sliding else manager.next_backoff()
        with handle_crash():
            f()
        if sliding:
            wait_for = manager.next_backoff()
        else:
            wait_for -= clock.since(started)
        if clock.wait(stop, wait_for):
            return


def jitter_until(
    f: Callable[[], None],
    period: float,
    jitter_factor: float,
    sliding: bool,
    stop: threading.Event,
    *,
    clock: Clock = REAL_CLOCK,
) -> None:
    """Run ``f`` every ``period`` (jittered if ``jitter_factor`` > 0) until ``stop`` is set."""
    backoff_until(f, JitteredBackoffManager(period, jitter_factor), sliding, stop, clock=clock)


def until(f: Callable[[], None], period: float, stop: threading.Event, *, clock: Clock = REAL_CLOCK) -> None:
    """Run ``f`` every ``period`` seconds, counted from the end of the previous run."""
    jitter_until(f, period, 0.0, True, stop, clock=clock)


def non_sliding_until(
    f: Callable[[], None], period: float, stop: threading.Event, *, clock: Clock = REAL_CLOCK
) -> None:
    """Run ``f`` every ``period`` seconds, counted from the start of the previous run."""
    jitter_until(f, period, 0.0, False, stop, clock=clock)


def forever(f: Callable[[], None], period: float, *, clock: Clock = REAL_CLOCK) -> None:
    """Run ``f`` every ``period`` seconds for the life of the process."""
    until(f, period, threading.Event(), clock=clock)


# --------------------------------------------------------------------------------------------
# Polls
# --------------------------------------------------------------------------------------------


def _poll(
    interval: float,
    timeout: float | None,
    condition: ConditionFunc,
    *,
    stop: threading.Event | None,
    immediate: bool,
    clock: Clock,
) -> None:
    if immediate and condition():
        return
    stop = stop if stop is not None else threading.Event()
    start = clock.monotonic()
    deadline = None if timeout is None else start + timeout
    next_tick = start + interval
    while True:
        final = deadline is not None and deadline <= next_tick
        wake_at = deadline if final and deadline is not None else next_tick
        if clock.wait(stop, wake_at - clock.monotonic()):
            raise WaitTimeoutError()
        if condition():
            return
        if final:
            raise WaitTimeoutError()
        # A slow condition leaves at most one tick pending, like a Go ticker's channel.
        next_tick = max(next_tick + interval, clock.monotonic())


def poll(
    interval: float,
    timeout: float,
    condition: ConditionFunc,
    *,
    stop: threading.Event | None = None,
    clock: Clock = REAL_CLOCK,
) -> None:
    """Check ``condition`` every ``interval`` (first after one interval) until ``timeout``."""
    _poll(interval, timeout, condition, stop=stop, immediate=False, clock=clock)


def poll_immediate(
    interval: float,
    timeout: float,
    condition: ConditionFunc,
    *,
    stop: threading.Event | None = None,
    clock: Clock = REAL_CLOCK,
) -> None:
    """Like :func:`poll`, but check once at the start."""
    _poll(interval, timeout, condition, stop=stop, immediate=True, clock=clock)


def poll_until(
    interval: float, condition: ConditionFunc, stop: threading.Event, *, clock: Clock = REAL_CLOCK
) -> None:
    """Check every ``interval`` until done; ``stop`` raises :class:`WaitTimeoutError`."""
    _poll(interval, None, condition, stop=stop, immediate=False, clock=clock)


def poll_immediate_until(
    interval: float, condition: ConditionFunc, stop: threading.Event, *, clock: Clock = REAL_CLOCK
) -> None:
    """Like :func:`poll_until`, but check once at the start."""
    _poll(interval, None, condition, stop=stop, immediate=True, clock=clock)


def poll_infinite(interval: float, condition: ConditionFunc, *, clock: Clock = REAL_CLOCK) -> None:
    """Check every ``interval`` until done, with no timeout."""
    _poll(interval, None, condition, stop=None, immediate=False, clock=clock)


def poll_immediate_infinite(interval: float, condition: ConditionFunc, *, clock: Clock = REAL_CLOCK) -> None:
    """Like :func:`poll_infinite`, but check once at the start."""
    _poll(interval, None, condition, stop=None, immediate=True, clock=clock)

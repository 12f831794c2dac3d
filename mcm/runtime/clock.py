"""Injectable time: the port of ``k8s.io/utils/clock`` and its testing ``FakeClock``.

Every time-dependent component of ``mcm.runtime`` takes a :class:`Clock`, so tests can run
timeouts, back-offs and resyncs without real waiting.

Guarantees:

- :class:`RealClock` reads ``time.monotonic`` for durations and UTC wall time for timestamps.
  Its timers and ``after_func`` callbacks run on one shared daemon thread (``mcm-clock``), in
  deadline order; a callback must be short and must not block.
- :class:`FakeClock` moves only when a test calls :meth:`FakeClock.step` or
  :meth:`FakeClock.set_time`. Everything that waits on it (``sleep``, ``after``, timers,
  ``wait``, ``wait_condition``) wakes exactly when the fake time reaches its deadline, never
  earlier because of real time passing. Unlike client-go's ``FakeClock.Sleep``, ``sleep`` blocks
  until another thread steps the clock, so multi-threaded code can be driven step by step.
- :meth:`FakeClock.wait` blocks on the clock's condition variable, with no real-time slicing: a
  step past the deadline and ``event.set()`` both notify it. To see the latter, the first wait on
  an event gives that event instance's condition variable a ``notify_all`` that also notifies
  the fake clocks waiting on it (the classes and every other event are untouched).
- :meth:`FakeClock.block_until_waiters` lets a test wait (in real time, bounded) until code under
  test is parked on the clock, which replaces "sleep a bit and hope" synchronisation.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import itertools
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["REAL_CLOCK", "Clock", "FakeClock", "RealClock", "Timer"]


class Timer(Protocol):
    """A one-shot timer. ``event`` is set when the timer fires."""

    @property
    def event(self) -> threading.Event: ...

    def stop(self) -> bool:
        """Prevent the timer from firing; return True if it had not fired yet."""
        ...

    def reset(self, seconds: float) -> bool:
        """Re-arm to fire ``seconds`` from now; return True if it was still active."""
        ...


@runtime_checkable
class Clock(Protocol):
    """What components need from time. All durations are seconds (float)."""

    def now(self) -> _dt.datetime:
        """Timezone-aware UTC wall-clock time (for timestamps written to objects)."""
        ...

    def monotonic(self) -> float:
        """A monotonic reading in seconds; only differences are meaningful."""
        ...

    def since(self, start: float) -> float:
        """Seconds elapsed since the monotonic reading ``start``."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` of this clock's time."""
        ...

    def after(self, seconds: float) -> threading.Event:
        """Return an event that is set once ``seconds`` have passed."""
        ...

    def new_timer(self, seconds: float) -> Timer:
        """A stoppable, resettable one-shot timer."""
        ...

    def after_func(self, seconds: float, fn: Callable[[], None]) -> Timer:
        """Call ``fn`` once ``seconds`` have passed (``AfterFunc``); stopping the returned timer
        before then prevents the call. A real clock calls it on its timer thread, a fake one in
        the step that passes the deadline (at once when ``seconds <= 0``)."""
        ...

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        """Block until ``event`` is set or ``seconds`` pass; return ``event.is_set()``.

        ``seconds=None`` waits for the event alone; ``seconds <= 0`` only polls it.
        """
        ...

    def wait_condition(self, cond: threading.Condition, seconds: float | None) -> None:
        """``cond.wait`` with the timeout measured on this clock. The caller holds ``cond``.

        Returns when notified or when ``seconds`` have passed; like ``Condition.wait`` the
        caller must re-check its predicate.
        """
        ...


# --------------------------------------------------------------------------------------------
# Real clock
# --------------------------------------------------------------------------------------------


class _Scheduler:
    """One daemon thread running callbacks at monotonic deadlines (shared by real timers)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Entry]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, deadline: float, entry: _Entry) -> None:
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), entry))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mcm-clock", daemon=True)
                self._thread.start()
            if self._heap[0][2] is entry:  # a later deadline does not change the thread's wait
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, entry = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
            entry.fire()


class _Entry:
    """A scheduled callback that can be cancelled; fires at most once per arming."""

    __slots__ = ("_callback", "_lock", "_state")

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._lock = threading.Lock()
        self._state = "armed"  # armed | fired | cancelled

    def fire(self) -> None:
        with self._lock:
            if self._state != "armed":
                return
            self._state = "fired"
        self._callback()

    def cancel(self) -> bool:
        with self._lock:
            was_armed = self._state == "armed"
            self._state = "cancelled"
            return was_armed


class _Timer:
    """Timer implementation shared by both clocks; ``arm`` schedules an entry. With ``fn`` the
    timer calls it after setting its event (``after_func``)."""

    def __init__(
        self, arm: Callable[[float, _Entry], None], seconds: float, fn: Callable[[], None] | None = None
    ) -> None:
        self._arm = arm
        self._event = threading.Event()
        self._fn = fn
        self._entry = self._schedule(seconds)

    @property
    def event(self) -> threading.Event:
        return self._event

    def _fire(self) -> None:
        self._event.set()
        if self._fn is not None:
            self._fn()

    def _schedule(self, seconds: float) -> _Entry:
        entry = _Entry(self._fire if self._fn is not None else self._event.set)
        self._arm(seconds, entry)
        return entry

    def stop(self) -> bool:
        return self._entry.cancel()

    def reset(self, seconds: float) -> bool:
        active = self._entry.cancel()
        self._event.clear()
        self._entry = self._schedule(seconds)
        return active


class RealClock:
    """The system clock."""

    def __init__(self) -> None:
        self._scheduler = _Scheduler()

    def now(self) -> _dt.datetime:
        return _dt.datetime.now(_dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def since(self, start: float) -> float:
        return time.monotonic() - start

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def _arm(self, seconds: float, entry: _Entry) -> None:
        if seconds <= 0:
            entry.fire()
            return
        self._scheduler.schedule(time.monotonic() + seconds, entry)

    def after(self, seconds: float) -> threading.Event:
        return _Timer(self._arm, seconds).event

    def new_timer(self, seconds: float) -> Timer:
        return _Timer(self._arm, seconds)

    def after_func(self, seconds: float, fn: Callable[[], None]) -> Timer:
        return _Timer(self._arm, seconds, fn)

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        if seconds is not None and seconds <= 0:
            return event.is_set()
        return event.wait(seconds)

    def wait_condition(self, cond: threading.Condition, seconds: float | None) -> None:
        if seconds is not None and seconds <= 0:
            return
        cond.wait(seconds)


REAL_CLOCK = RealClock()
"""The process-wide real clock; the default wherever a ``clock`` argument is optional."""


# --------------------------------------------------------------------------------------------
# Fake clock
# --------------------------------------------------------------------------------------------


class FakeClock:
    """A clock that only moves when told to. Thread-safe."""

    def __init__(self, start: _dt.datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wall = start if start is not None else _dt.datetime(2024, 1, 1, tzinfo=_dt.UTC)
        if self._wall.tzinfo is None:
            raise ValueError("FakeClock start time must be timezone-aware")
        self._mono = 1000.0
        self._heap: list[tuple[float, int, _Entry]] = []
        self._seq = itertools.count()
        self._parked: set[_Entry] = set()
        """Entries of threads blocked in :meth:`wait`, :meth:`sleep` or :meth:`wait_condition`."""
        self._woken: set[_Entry] = set()
        """Those of them a step has fired whose threads have not resumed yet."""

    # -- reading -------------------------------------------------------------------------------
    def now(self) -> _dt.datetime:
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def since(self, start: float) -> float:
        return self.monotonic() - start

    # -- moving --------------------------------------------------------------------------------
    def step(self, seconds: float) -> None:
        """Advance the clock by ``seconds`` and fire every waiter whose deadline has passed."""
        if seconds < 0:
            raise ValueError("FakeClock cannot step backwards")
        with self._lock:
            self._mono += seconds
            self._wall += _dt.timedelta(seconds=seconds)
        self._fire_due()

    def set_time(self, when: _dt.datetime) -> None:
        """Move the wall and monotonic readings to ``when`` (not before the current time)."""
        with self._lock:
            delta = (when - self._wall).total_seconds()
        self.step(max(delta, 0.0))

    def _fire_due(self) -> None:
        due: list[_Entry] = []
        with self._lock:
            while self._heap and self._heap[0][0] <= self._mono:
                due.append(heapq.heappop(self._heap)[2])
            self._woken.update(e for e in due if e in self._parked)
            self._changed.notify_all()
        for entry in due:  # outside our lock: callbacks take other locks
            entry.fire()

    # -- waiting -------------------------------------------------------------------------------
    def _arm(self, seconds: float, entry: _Entry) -> None:
        if seconds <= 0:
            entry.fire()
            return
        with self._lock:
            heapq.heappush(self._heap, (self._mono + seconds, next(self._seq), entry))
            self._changed.notify_all()

    def after(self, seconds: float) -> threading.Event:
        return _Timer(self._arm, seconds).event

    def new_timer(self, seconds: float) -> Timer:
        return _Timer(self._arm, seconds)

    def after_func(self, seconds: float, fn: Callable[[], None]) -> Timer:
        return _Timer(self._arm, seconds, fn)

    def sleep(self, seconds: float) -> None:
        """Block until another thread steps the clock past ``now + seconds``."""
        if seconds <= 0:
            return
        self.wait(threading.Event(), seconds)

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        """Block until ``event`` is set or the fake time reaches ``now + seconds``.

        The waiter is parked on the clock's condition variable (it counts for
        :meth:`block_until_waiters`) and is notified by the step that passes its deadline or by
        ``event.set()``; it never polls in real time.
        """
        if seconds is None:
            return event.wait()
        if seconds <= 0:
            return event.is_set()
        _wake_on_set(event, self)
        entry = _Entry(_nothing)  # marks the waiter in the heap; the step's notify wakes it
        with self._lock:
            deadline = self._mono + seconds
            heapq.heappush(self._heap, (deadline, next(self._seq), entry))
            self._parked.add(entry)
            self._changed.notify_all()
            try:
                while not event.is_set() and self._mono < deadline:
                    self._changed.wait()
            finally:
                entry.cancel()
                self._unpark(entry)
            return event.is_set()

    def _unpark(self, entry: _Entry) -> None:
        """The thread of ``entry`` runs again (call with the lock held)."""
        self._parked.discard(entry)
        self._woken.discard(entry)

    def _event_set(self) -> None:
        """Wake the waiters parked in :meth:`wait` so they re-check their events."""
        with self._lock:
            self._changed.notify_all()

    def wait_condition(self, cond: threading.Condition, seconds: float | None) -> None:
        if seconds is None:
            cond.wait()
            return
        if seconds <= 0:
            return

        def wake() -> None:
            with cond:
                cond.notify_all()

        entry = _Entry(wake)
        with self._lock:
            self._parked.add(entry)
        self._arm(seconds, entry)
        try:
            cond.wait()
        finally:
            entry.cancel()
            with self._lock:
                self._unpark(entry)

    # -- test helpers --------------------------------------------------------------------------
    def waiter_count(self) -> int:
        """Number of armed timers and waiters parked on this clock."""
        with self._lock:
            return sum(1 for _, _, e in self._heap if e._state == "armed")

    def resuming_waiters(self) -> int:
        """Number of threads a step has woken from :meth:`wait`, :meth:`sleep` or
        :meth:`wait_condition` that have not run again yet: while it is above 0, the code under
        test has not reacted to the last step (a loaded machine can delay that for long)."""
        with self._lock:
            return len(self._woken)

    def has_waiters(self) -> bool:
        return self.waiter_count() > 0

    def block_until_waiters(self, count: int = 1, timeout: float = 10.0) -> None:
        """Wait (real time, at most ``timeout``) until at least ``count`` waiters are parked.

        Raises ``TimeoutError`` if they never appear, so a test fails instead of hanging.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            while sum(1 for _, _, e in self._heap if e._state == "armed") < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"fewer than {count} waiters on the fake clock")
                self._changed.wait(min(remaining, 0.05))


def _nothing() -> None:
    """The callback of a :meth:`FakeClock.wait` entry: waking is done by the step's notify."""


_HOOK_LOCK = threading.Lock()
_HOOKED_CLOCKS = "_mcm_fake_clocks"


def _wake_on_set(event: threading.Event, clock: FakeClock) -> None:
    """Make ``event.set()`` (on this instance) also notify ``clock``'s waiters.

    The hook sits on the event's own condition variable: ``Event.set`` raises the flag and then
    looks up ``notify_all`` on it. A ``set`` that ran before the hook raised the flag before the
    waiter checks it; one that runs after goes through the hook, even when its caller took the
    bound ``event.set`` before the first wait (a thread started before the wait on its answer).
    """
    condition: threading.Condition = vars(event)["_cond"]
    attributes = vars(condition)
    with _HOOK_LOCK:
        clocks: weakref.WeakSet[FakeClock] | None = attributes.get(_HOOKED_CLOCKS)
        if clocks is None:
            clocks = weakref.WeakSet()
            attributes[_HOOKED_CLOCKS] = clocks
            attributes["notify_all"] = _notify_and_wake(condition.notify_all, clocks)
        clocks.add(clock)


def _notify_and_wake(original: Callable[[], None], clocks: weakref.WeakSet[FakeClock]) -> Callable[[], None]:
    def notify_and_wake() -> None:
        original()
        for clock in list(clocks):
            clock._event_set()

    return notify_and_wake

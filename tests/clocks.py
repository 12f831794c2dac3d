"""Clocks for tests of code that sleeps between retries."""

from __future__ import annotations

import datetime as _dt

from mcm.runtime.clock import FakeClock


class SelfSteppingClock(FakeClock):
    """A :class:`FakeClock` whose ``sleep`` records the duration and moves the clock by it, so a
    single-threaded test runs retry back-offs without real waiting and without a stepping thread."""

    def __init__(self, start: _dt.datetime | None = None) -> None:
        super().__init__(start)
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.step(seconds)

"""Per-item exponential back-off: client-go's ``util/flowcontrol/backoff_test.go`` ported.

Times are FakeClock ``monotonic()`` readings where client-go passes ``tc.Now()``.
"""

from __future__ import annotations

import random

import pytest

from mcm.runtime.clock import FakeClock
from mcm.runtime.flowcontrol import Backoff


def _set_time(clock: FakeClock, when: float) -> None:
    clock.step(when - clock.monotonic())


def test_slow_backoff() -> None:
    clock = FakeClock()
    step, max_duration = 1.0, 50.0
    b = Backoff(step, max_duration, clock=clock)
    for expected in [0, 1, 2, 4, 8, 16, 32, 50, 50, 50]:
        clock.step(step)
        assert b.get("_idSlow") == expected * step
        b.next("_idSlow", clock.monotonic())
    # Reset cancels the back-off.
    b.next("_idSlow", clock.monotonic())
    b.reset("_idSlow")
    assert b.get("_idSlow") == 0


def test_backoff_reset() -> None:
    clock = FakeClock()
    step, max_duration = 1.0, 5.0
    b = Backoff(step, max_duration, clock=clock)
    for _ in range(int(max_duration / step) + 1):  # up to the cap
        clock.step(step)
        b.next("_idReset", clock.monotonic())
    assert b.is_in_back_off_since("_idReset", clock.monotonic())
    last_update = clock.monotonic()
    clock.step(2 * max_duration + step)  # 11 s > 2 * max: stable again
    assert not b.is_in_back_off_since("_idReset", last_update)


def test_backoff_high_water_mark() -> None:
    clock = FakeClock()
    step, max_duration = 1.0, 5.0
    b = Backoff(step, max_duration, clock=clock)
    for _ in range(int(max_duration / step) + 1):
        clock.step(step)
        b.next("_idHiWaterMark", clock.monotonic())
    # The high-water mark only expires after 2 * max_duration.
    clock.step(max_duration + step)
    b.next("_idHiWaterMark", clock.monotonic())
    assert b.get("_idHiWaterMark") == max_duration


def test_backoff_gc() -> None:
    clock = FakeClock()
    step, max_duration = 1.0, 5.0
    b = Backoff(step, max_duration, clock=clock)
    for _ in range(int(max_duration / step) + 1):
        clock.step(step)
        b.next("_idGC", clock.monotonic())
    clock.step(max_duration + step)
    b.gc()
    assert "_idGC" in b  # 6 s since the last update: kept
    clock.step(max_duration + step)
    b.gc()
    assert "_idGC" not in b  # 12 s > 2 * max: collected


# (tick, in back-off, delay) as in client-go's TestIsInBackOffSinceUpdate
IS_IN_BACK_OFF_SINCE_UPDATE_CASES = [
    (0, False, 0), (1, False, 1), (2, True, 2), (3, False, 2), (4, True, 4), (5, True, 4),
    (6, True, 4), (7, False, 4), (8, True, 8), (9, True, 8), (10, True, 8), (11, True, 8),
    (12, True, 8), (13, True, 8), (14, True, 8), (15, False, 8), (16, True, 10), (17, True, 10),
    (18, True, 10), (19, True, 10), (20, True, 10), (21, True, 10), (22, True, 10), (23, True, 10),
    (24, True, 10), (25, False, 10), (26, True, 10), (27, True, 10), (28, True, 10), (29, True, 10),
    (30, True, 10), (31, True, 10), (32, True, 10), (33, True, 10), (34, True, 10), (35, False, 10),
    (56, False, 0), (57, False, 1),
]  # fmt: skip


def test_is_in_back_off_since_update() -> None:
    clock = FakeClock()
    step, max_duration = 1.0, 10.0
    b = Backoff(step, max_duration, clock=clock)
    start = clock.monotonic()
    for tick, in_back_off, value in IS_IN_BACK_OFF_SINCE_UPDATE_CASES:
        _set_time(clock, start + tick * step)
        now = clock.monotonic()
        assert b.is_in_back_off_since_update("_id", now) is in_back_off, f"tick {tick}"
        if in_back_off:
            assert b.get("_id") == value * step, f"tick {tick}"
        else:
            b.next("_id", now)


def test_backoff_with_jitter() -> None:
    # Delays without jitter: 0.1 0.2 0.4 ... 102.4 s; with factor 0.1 each step may add up to
    # 10 % of the previous delay, and the cap of 60 s is reached either way.
    clock = FakeClock()
    initial, max_duration, factor = 0.1, 60.0, 0.1
    b = Backoff(initial, max_duration, clock=clock, max_jitter_factor=factor, rng=random.Random(7))

    def next_delay() -> float:
        clock.step(initial)
        b.next("_idJitter", clock.monotonic())
        return b.get("_idJitter")

    def assert_within(multiplier: int, previous: float, current: float) -> None:
        low = previous * multiplier
        high = low + factor * previous
        assert (low < current <= high) or current == max_duration, (low, high, current)

    assert b.get("_idJitter") == 0
    delay = next_delay()
    assert_within(1, initial, delay)
    delays = [delay]
    for _ in range(10):
        previous, delay = delay, next_delay()
        assert_within(2, previous, delay)
        delays.append(delay)
    assert delays[-1] == max_duration
    assert delays[:3] != pytest.approx([0.1, 0.2, 0.4])  # jitter was added


def test_without_jitter_the_delays_double_exactly() -> None:
    clock = FakeClock()
    b = Backoff(0.5, 4.0, clock=clock)
    seen = []
    for _ in range(5):
        b.next("x", clock.monotonic())
        seen.append(b.get("x"))
    assert seen == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert b.get("other") == 0

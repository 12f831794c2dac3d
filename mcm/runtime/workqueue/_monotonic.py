"""Fast monotonic readings for hot paths."""

from __future__ import annotations

import time
from collections.abc import Callable

from mcm.runtime.clock import REAL_CLOCK, Clock


def monotonic_reader(clock: Clock) -> Callable[[], float]:
    """``clock.monotonic``, or ``time.monotonic`` itself for the real clock (saves a call)."""
    return time.monotonic if clock is REAL_CLOCK else clock.monotonic

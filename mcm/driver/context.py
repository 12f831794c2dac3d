"""The per-call context every driver method receives: a deadline and a cancellation signal.

The Python counterpart of the ``context.Context`` upstream passes to each driver call.

Guarantees:

- :meth:`CallContext.remaining` is the time left before the deadline on the context's clock
  (``None`` without a deadline, never negative); :meth:`CallContext.expired` is true once the
  deadline has passed or the call was cancelled.
- :meth:`CallContext.cancel` sets :attr:`CallContext.cancelled` once; drivers that block can wait
  on it (``clock.wait(ctx.cancelled, ctx.remaining())``) to give up promptly.
- A context is shared, never copied: cancelling it is seen by everybody who holds it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["CallContext"]


@dataclass(frozen=True)
class CallContext:
    """Deadline (a monotonic reading of ``clock``, or ``None``) and cancellation of one call."""

    deadline: float | None = None
    clock: Clock = field(default=REAL_CLOCK, repr=False)
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @classmethod
    def background(cls, clock: Clock = REAL_CLOCK) -> CallContext:
        """A context without deadline."""
        return cls(None, clock)

    @classmethod
    def with_timeout(cls, seconds: float, clock: Clock = REAL_CLOCK) -> CallContext:
        """A context whose deadline is ``seconds`` from now on ``clock``."""
        return cls(clock.monotonic() + seconds, clock)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (0 once passed), or ``None`` without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock.monotonic())

    def expired(self) -> bool:
        """True once the deadline has passed or the call was cancelled."""
        if self.cancelled.is_set():
            return True
        return self.deadline is not None and self.clock.monotonic() >= self.deadline

    def cancel(self) -> None:
        """Tell whoever runs the call to stop."""
        self.cancelled.set()

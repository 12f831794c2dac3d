"""The per-call context every driver method receives: a deadline and a cancellation signal.

The Python counterpart of the ``context.Context`` upstream passes to each driver call.

Guarantees:

- :meth:`CallContext.remaining` is the time left before the deadline on the context's clock
  (``None`` without a deadline, never negative); :meth:`CallContext.expired` is true once the
  deadline has passed or the call was cancelled.
- :meth:`CallContext.cancel` sets :attr:`CallContext.cancelled` once; drivers that block can wait
  on it (``clock.wait(ctx.cancelled, ctx.remaining())``) to give up promptly.
- :meth:`CallContext.on_cancel` runs a callback once when the context is cancelled (at once if
  it already is), like Go's ``context.AfterFunc``; the gRPC client uses it to cancel the call in
  flight. Cancel with :meth:`CallContext.cancel`: setting the event directly runs no callbacks.
- A context is shared, never copied: cancelling it is seen by everybody who holds it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["CallContext"]


@dataclass(frozen=True)
class CallContext:
    """Deadline (a monotonic reading of ``clock``, or ``None``) and cancellation of one call."""

    deadline: float | None = None
    clock: Clock = field(default=REAL_CLOCK, repr=False)
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    _callbacks: list[Callable[[], object]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

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
        """Tell whoever runs the call to stop, and run the :meth:`on_cancel` callbacks once."""
        with self._lock:
            self.cancelled.set()
            callbacks, self._callbacks[:] = list(self._callbacks), []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` when the context is cancelled; returns a function that unregisters it."""
        with self._lock:
            if not self.cancelled.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

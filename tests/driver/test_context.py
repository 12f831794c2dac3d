"""CallContext: deadlines on an injectable clock, cancellation."""

from __future__ import annotations

from mcm.driver import CallContext
from mcm.runtime.clock import FakeClock


def test_background_context_has_no_deadline() -> None:
    ctx = CallContext.background(FakeClock())
    assert ctx.remaining() is None
    assert not ctx.expired()


def test_timeout_counts_down_on_the_clock() -> None:
    clock = FakeClock()
    ctx = CallContext.with_timeout(10.0, clock)
    assert ctx.remaining() == 10.0
    clock.step(4.0)
    assert ctx.remaining() == 6.0
    assert not ctx.expired()
    clock.step(6.0)
    assert ctx.remaining() == 0.0
    assert ctx.expired()
    clock.step(5.0)
    assert ctx.remaining() == 0.0


def test_cancel_expires_the_context_for_every_holder() -> None:
    ctx = CallContext.background(FakeClock())
    shared = ctx
    ctx.cancel()
    assert shared.expired()
    assert shared.cancelled.is_set()

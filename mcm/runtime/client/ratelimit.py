"""Client-side request throttling: the port of client-go's ``flowcontrol`` token bucket.

Guarantees:

- The bucket starts full (``burst`` tokens) and refills at ``qps`` tokens per second, never
  above ``burst``.
- :meth:`TokenBucketRateLimiter.reserve` takes one token even when none is left (the balance goes
  negative, as in ``golang.org/x/time/rate``) and returns how long the caller must wait, so
  concurrent callers are spaced ``1/qps`` apart in the order they reserved.
- :meth:`TokenBucketRateLimiter.accept` blocks on the injected clock for that delay; nothing ever
  sleeps while holding the limiter's lock.
- One limiter is shared by every request of a cluster client (client-go: one per client instance).
"""

from __future__ import annotations

import threading
from typing import Protocol

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["NoRateLimiter", "RateLimiter", "TokenBucketRateLimiter", "new_rate_limiter"]


class RateLimiter(Protocol):
    """What the transport needs: block until the next request may go out."""

    def accept(self) -> None: ...

    def try_accept(self) -> bool: ...


class NoRateLimiter:
    """Lets every request through at once (client-go: a negative QPS)."""

    def accept(self) -> None:
        return None

    def try_accept(self) -> bool:
        return True


class TokenBucketRateLimiter:
    """A token bucket of ``burst`` tokens refilled at ``qps`` per second."""

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._qps = float(qps)
        self._burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock.monotonic()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    def _refill(self, now: float) -> None:
        elapsed = max(now - self._last, 0.0)
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
        self._last = now

    def reserve(self) -> float:
        """Take one token, possibly on credit; return the seconds until it is really available."""
        with self._lock:
            self._refill(self._clock.monotonic())
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def try_accept(self) -> bool:
        """Take a token only if one is available now."""
        with self._lock:
            self._refill(self._clock.monotonic())
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True

    def accept(self) -> None:
        """Block (on the clock) until a token is available, then take it."""
        delay = self.reserve()
        if delay > 0:
            self._clock.sleep(delay)

    def tokens(self) -> float:
        """Tokens available now (negative while callers are queued on credit)."""
        with self._lock:
            self._refill(self._clock.monotonic())
            return self._tokens


DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


def new_rate_limiter(qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> RateLimiter:
    """The limiter client-go builds for a REST config.

    ``qps == 0`` means client-go's default of 5, ``burst == 0`` its default of 10, and a negative
    ``qps`` disables throttling.
    """
    if qps < 0:
        return NoRateLimiter()
    return TokenBucketRateLimiter(qps or DEFAULT_QPS, burst or DEFAULT_BURST, clock=clock)

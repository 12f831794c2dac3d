"""Client-side request throttling: the port of client-go's ``flowcontrol`` token bucket limiter.

Guarantees:

- The bucket is the runtime's one :class:`~mcm.runtime.tokenbucket.TokenBucket` (also behind
  the workqueue's ``BucketRateLimiter``): it starts full (``burst`` tokens), refills at ``qps``
  tokens per second, and hands out reservations on credit so concurrent callers are spaced
  ``1/qps`` apart in the order they reserved.
- A ``qps``/``burst`` of 0 means client-go ``rest``'s defaults (:data:`DEFAULT_QPS` 5,
  :data:`DEFAULT_BURST` 10). A cluster client built without limits uses the machine-controller's
  flag defaults (20/30, :data:`~mcm.runtime.tokenbucket.MACHINE_CONTROLLER_QPS` / ``_BURST``).
- :meth:`TokenBucketRateLimiter.accept` blocks on the injected clock for that delay; nothing ever
  sleeps while holding the limiter's lock. Given a ``cancel`` event, the wait ends when it is set
  and the token is given back (client-go's ``Wait(ctx)``).
- One limiter is shared by every request of a cluster client (client-go: one per client instance).
"""

from __future__ import annotations

import threading
from typing import Protocol

from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.tokenbucket import REST_BURST, REST_QPS, TokenBucket

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "NoRateLimiter",
    "RateLimiter",
    "TokenBucketRateLimiter",
    "new_rate_limiter",
]


class RateLimiter(Protocol):
    """What the transport needs: block until the next request may go out."""

    def accept(self, cancel: threading.Event | None = None) -> bool:
        """Wait for a token; False (without one) if ``cancel`` was set first."""
        ...

    def try_accept(self) -> bool: ...


class NoRateLimiter:
    """Lets every request through at once (client-go: a negative QPS)."""

    def accept(self, cancel: threading.Event | None = None) -> bool:
        return True

    def try_accept(self) -> bool:
        return True


class TokenBucketRateLimiter:
    """Client-go's ``tokenBucketRateLimiter``: a :class:`~mcm.runtime.tokenbucket.TokenBucket`
    of ``burst`` tokens refilled at ``qps`` per second, which blocks (on the clock) for a token."""

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._clock = clock
        self._bucket = TokenBucket(qps, burst, clock=clock)

    @property
    def bucket(self) -> TokenBucket:
        return self._bucket

    @property
    def qps(self) -> float:
        return self._bucket.qps

    @property
    def burst(self) -> int:
        return self._bucket.burst

    def reserve(self) -> float:
        """Take one token, possibly on credit; return the seconds until it is really available."""
        return self._bucket.reserve()

    def try_accept(self) -> bool:
        """Take a token only if one is available now."""
        return self._bucket.try_take()

    def accept(self, cancel: threading.Event | None = None) -> bool:
        """Block (on the clock) until a token is available and take it: True. False, with the
        token given back, when ``cancel`` is set first."""
        delay = self._bucket.reserve()
        if delay <= 0:
            return True
        if cancel is None:
            self._clock.sleep(delay)
            return True
        if self._clock.wait(cancel, delay):
            self._bucket.give_back()
            return False
        return True

    def tokens(self) -> float:
        """Tokens available now (negative while callers are queued on credit)."""
        return self._bucket.tokens()


DEFAULT_QPS = REST_QPS
"""client-go's ``rest.DefaultQPS`` (5), used when a client is built with ``qps == 0``."""
DEFAULT_BURST = REST_BURST
"""client-go's ``rest.DefaultBurst`` (10), used when a client is built with ``burst == 0``."""


def new_rate_limiter(qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> RateLimiter:
    """The limiter client-go builds for a REST config.

    ``qps == 0`` means client-go's default of 5, ``burst == 0`` its default of 10, and a negative
    ``qps`` disables throttling.
    """
    if qps < 0:
        return NoRateLimiter()
    return TokenBucketRateLimiter(qps or DEFAULT_QPS, burst or DEFAULT_BURST, clock=clock)

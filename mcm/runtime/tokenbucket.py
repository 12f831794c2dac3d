"""The one token bucket of ``mcm.runtime``, and every default rate it is built with.

Both client-side request throttling (:mod:`mcm.runtime.client.ratelimit`, client-go's
``flowcontrol`` limiter) and the workqueue's overall limiter
(:class:`mcm.runtime.workqueue.BucketRateLimiter`) are this bucket: a port of
``golang.org/x/time/rate.Limiter`` reservations.

Guarantees:

- The bucket starts full (``burst`` tokens) and refills at ``qps`` tokens per second, never
  above ``burst``.
- :meth:`TokenBucket.reserve` always takes one token, on credit when none is left (the balance
  goes negative), and returns the seconds until that token exists; concurrent callers are thus
  spaced ``1/qps`` apart in the order they reserved. It never sleeps.
- ``qps == math.inf`` never delays. A bucket that can never produce a token it needs
  (``burst < 1``, or ``qps <= 0`` once the burst is used up) answers ``math.inf``, like Go's
  ``InfDuration``.
- Time comes from the injected clock.

Which default is which (they differ on purpose, each matches its upstream):

===============================  =====  =====  ==========================================
constant pair                    qps    burst  upstream
===============================  =====  =====  ==========================================
``REST_QPS`` / ``REST_BURST``    5      10     client-go ``rest.Config`` (``DefaultQPS``,
                                               ``DefaultBurst``): what a cluster client's
                                               ``qps``/``burst`` of 0 means
``WORKQUEUE_QPS`` /              10     100    client-go ``workqueue``'s
``WORKQUEUE_BURST``                            ``DefaultControllerRateLimiter`` bucket
``MACHINE_CONTROLLER_QPS`` /     20     30     machine-controller's ``--kube-api-qps`` /
``MACHINE_CONTROLLER_BURST``                   ``--kube-api-burst`` flag defaults, and
                                               so a cluster client's defaults
===============================  =====  =====  ==========================================
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = [
    "MACHINE_CONTROLLER_BURST",
    "MACHINE_CONTROLLER_QPS",
    "REST_BURST",
    "REST_QPS",
    "WORKQUEUE_BURST",
    "WORKQUEUE_QPS",
    "TokenBucket",
]

REST_QPS = 5.0
"""client-go ``rest.DefaultQPS``: a cluster client's rate when it is configured as 0."""
REST_BURST = 10
"""client-go ``rest.DefaultBurst``: a cluster client's burst when it is configured as 0."""

WORKQUEUE_QPS = 10.0
"""The overall bucket of client-go's ``workqueue.DefaultControllerRateLimiter``."""
WORKQUEUE_BURST = 100
"""The burst of that bucket."""

MACHINE_CONTROLLER_QPS = 20.0
"""machine-controller's ``--kube-api-qps`` default; a cluster client's default rate."""
MACHINE_CONTROLLER_BURST = 30
"""machine-controller's ``--kube-api-burst`` default."""


def _monotonic_reader(clock: Clock) -> Callable[[], float]:
    return time.monotonic if clock is REAL_CLOCK else clock.monotonic


class TokenBucket:
    """``burst`` tokens refilled at ``qps`` per second, handed out as reservations. Thread-safe."""

    __slots__ = ("_burst", "_last", "_lock", "_monotonic", "_rate", "_tokens")

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        self._rate = float(qps)
        self._burst = float(burst)
        self._monotonic = _monotonic_reader(clock)
        self._tokens = float(burst)
        self._last = self._monotonic()
        self._lock = threading.Lock()

    @property
    def qps(self) -> float:
        return self._rate

    @property
    def burst(self) -> int:
        return int(self._burst)

    def reserve(self) -> float:
        """Take one token, possibly on credit; return the seconds until it really exists."""
        rate = self._rate
        if rate == math.inf:
            return 0.0
        if rate <= 0.0 or self._burst < 1.0:
            return self._reserve_without_refill()
        self._lock.acquire()
        try:  # _refilled, inlined: this is the workqueue's hot path
            now = self._monotonic()
            tokens = self._tokens
            elapsed = now - self._last
            if elapsed > 0.0:
                tokens += elapsed * rate
                if tokens > self._burst:  # noqa: PLR1730 - cheaper than min()
                    tokens = self._burst
                self._last = now
            tokens -= 1.0
            self._tokens = tokens
        finally:
            self._lock.release()
        return 0.0 if tokens >= 0.0 else -tokens / rate

    def try_take(self) -> bool:
        """Take a token only if one exists now; never goes on credit."""
        if self._rate == math.inf:
            return True
        with self._lock:
            tokens = self._refilled(self._monotonic()) if self._rate > 0.0 else self._tokens
            if tokens < 1.0:
                self._tokens = tokens
                return False
            self._tokens = tokens - 1.0
            return True

    def tokens(self) -> float:
        """Tokens available now (negative while reservations are outstanding)."""
        if self._rate == math.inf:
            return self._burst
        with self._lock:
            if self._rate > 0.0:
                self._tokens = self._refilled(self._monotonic())
            return self._tokens

    def give_back(self) -> None:
        """Return one reserved token that will not be used (a cancelled wait), up to ``burst``."""
        with self._lock:
            self._tokens = min(self._tokens + 1.0, self._burst)

    def _refilled(self, now: float) -> float:
        """The balance at ``now``; moves the refill mark. The caller holds the lock."""
        tokens = self._tokens
        elapsed = now - self._last
        if elapsed > 0.0:
            tokens += elapsed * self._rate
            if tokens > self._burst:  # noqa: PLR1730 - hot path, cheaper than min()
                tokens = self._burst
            self._last = now
        return tokens

    def _reserve_without_refill(self) -> float:
        """Go's rate-0 limiter: each reservation uses up one token of the burst, then never."""
        with self._lock:
            if self._rate <= 0.0 and self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return math.inf

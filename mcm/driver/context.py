"""The per-call context every driver method receives: a deadline, a cancellation signal and
the cloud API metrics.

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
- :meth:`CallContext.cloud_api_request` counts and times one request the driver makes to its
  cloud's API in the controller's ``mcm_cloud_api_*`` metrics (:attr:`CallContext.cloud_api`,
  labelled with the MachineClass's ``provider``); without a controller it records nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["NO_CLOUD_API_METRICS", "CallContext", "CloudApiMetrics"]


class CloudApiMetrics(Protocol):
    """Where a driver's cloud API requests are counted (the controller's ``mcm_cloud_api_*``)."""

    def observe(self, service: str, seconds: float, failed: bool) -> None:
        """One request to ``service`` that took ``seconds``; ``failed`` when it did not succeed."""
        ...


class _NoCloudApiMetrics:
    def observe(self, service: str, seconds: float, failed: bool) -> None:
        """Nothing records requests outside a controller."""


NO_CLOUD_API_METRICS: CloudApiMetrics = _NoCloudApiMetrics()


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
    cloud_api: CloudApiMetrics = field(default=NO_CLOUD_API_METRICS, repr=False, compare=False, kw_only=True)
    """Counts the driver's cloud API requests; see :meth:`cloud_api_request`."""

    @classmethod
    def background(cls, clock: Clock = REAL_CLOCK) -> CallContext:
        """A context without deadline."""
        return cls(None, clock)

    @classmethod
    def with_timeout(
        cls, seconds: float, clock: Clock = REAL_CLOCK, *, cloud_api: CloudApiMetrics = NO_CLOUD_API_METRICS
    ) -> CallContext:
        """A context whose deadline is ``seconds`` from now on ``clock``."""
        return cls(clock.monotonic() + seconds, clock, cloud_api=cloud_api)

    @contextlib.contextmanager
    def cloud_api_request(
        self, service: str, *, answers: tuple[type[BaseException], ...] = ()
    ) -> Iterator[None]:
        """Count and time the request to the cloud API ``service`` made in the ``with`` block.

        As upstream's providers count them: a request that returns is counted in
        ``mcm_cloud_api_requests_total`` and its duration observed in
        ``mcm_cloud_api_api_request_duration_seconds``; one that raises counts in
        ``mcm_cloud_api_requests_failed_total`` (the exception propagates), unless the exception
        is one of ``answers`` (an answer such as "not found", not a failure).
        """
        started = self.clock.monotonic()
        try:
            yield
        except answers:
            self.cloud_api.observe(service, self.clock.since(started), failed=False)
            raise
        except Exception:
            self.cloud_api.observe(service, self.clock.since(started), failed=True)
            raise
        self.cloud_api.observe(service, self.clock.since(started), failed=False)

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

"""Retrying a read-modify-write on conflict: the port of client-go's ``util/retry``.

Guarantees:

- :func:`on_error` calls ``fn`` until it returns, an error it raises is not ``retriable``, or
  the back-off's steps are used up; it returns ``fn``'s value or raises the last error ``fn``
  raised (never a wait timeout of its own). ``fn`` runs at least once and at most
  ``backoff.steps`` times, with ``backoff.step()`` slept between two calls through the injected
  clock (a ``FakeClock`` drives it without real waiting). The ``backoff`` given is not changed.
- :func:`retry_on_conflict` retries only ``409 Conflict``, which is what an update computed on a
  stale copy gets: ``fn`` must read the object again on every call, or retrying cannot help.
- :data:`DEFAULT_RETRY` and :data:`DEFAULT_BACKOFF` are client-go's values.

One difference from client-go: a back-off with fewer than one step still calls ``fn`` once
(client-go then returns success without calling it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from mcm.runtime.client.errors import is_conflict
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.wait import Backoff

__all__ = ["DEFAULT_BACKOFF", "DEFAULT_RETRY", "on_error", "retry_on_conflict"]

T = TypeVar("T")

DEFAULT_RETRY = Backoff(duration=0.010, factor=1.0, jitter=0.1, steps=5)
"""``retry.DefaultRetry``: five calls about 10 ms apart, for writes that conflict with
other writers."""

DEFAULT_BACKOFF = Backoff(duration=0.010, factor=5.0, jitter=0.1, steps=4)
"""``retry.DefaultBackoff``: four calls 10 ms, 50 ms and 250 ms apart, for heavier contention."""


def on_error(
    backoff: Backoff,
    retriable: Callable[[BaseException], bool],
    fn: Callable[[], T],
    *,
    clock: Clock = REAL_CLOCK,
) -> T:
    """``retry.OnError``: ``fn()``, called again after ``backoff.step()`` while it raises a
    ``retriable`` error and steps remain."""
    backoff = dataclasses.replace(backoff)
    while True:
        try:
            return fn()
        except Exception as err:
            if not retriable(err) or backoff.steps <= 1:
                raise
        clock.sleep(backoff.step())


def retry_on_conflict(backoff: Backoff, fn: Callable[[], T], *, clock: Clock = REAL_CLOCK) -> T:
    """``retry.RetryOnConflict``: :func:`on_error` retrying ``409 Conflict`` only."""
    return on_error(backoff, is_conflict, fn, clock=clock)

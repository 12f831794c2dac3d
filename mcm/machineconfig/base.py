"""The sample-controller loop every sub-controller shares: a named queue, workers, retries.

A sub-controller implements ``sync(name) -> Result | None`` and enqueues names from its informer
handlers (handlers only enqueue). A failed API call raises a
:class:`~mcm.runtime.errors.TransientError` (every ``ApiError`` and ``ConnectionFailed`` is one):
the worker logs it once and re-adds the key rate-limited; it is never a crash.
"""

from __future__ import annotations

import abc
import threading

from mcm.machineconfig.context import Context
from mcm.runtime.worker import DEFAULT_MAX_RETRIES, Result, start_workers

__all__ = ["CONFLICT_RETRY", "SubController"]

CONFLICT_RETRY = 0.2
"""Seconds before a pass that lost a write race looks again (with fresh data)."""


class SubController(abc.ABC):
    """One queue (named ``name``), its workers and its event recorder (component ``name``)."""

    name = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queue = ctx.new_queue(self.name)
        self.recorder = ctx.recorder(self.name)

    def enqueue(self, key: str, delay: float = 0.0) -> None:
        if not key:
            return
        if delay > 0:
            self.queue.add_after(key, delay)
        else:
            self.queue.add(key)

    @abc.abstractmethod
    def sync(self, key: str) -> Result | None:
        """Reconcile ``key`` (each sub-controller says how)."""

    def start(self, workers: int, stop: threading.Event) -> list[threading.Thread]:
        return start_workers(
            self.queue, self.name, workers, self.sync, DEFAULT_MAX_RETRIES, stop, clock=self.ctx.clock
        )

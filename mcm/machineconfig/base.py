"""The sample-controller loop every sub-controller shares: a named queue, workers, retries.

A sub-controller implements ``sync(name) -> Result | None`` and enqueues names from its informer
handlers (handlers only enqueue). :meth:`SubController.reconcile` turns a failed API call into a
rate-limited retry (:data:`~mcm.runtime.worker.RETRY`), logged but never raised: a retried
conflict at info level, any other failure as a warning.
"""

from __future__ import annotations

import threading

import structlog

from mcm.machineconfig.context import Context
from mcm.runtime.client.errors import ApiError, Conflict, ConnectionFailed
from mcm.runtime.worker import DEFAULT_MAX_RETRIES, DONE, RETRY, Result, start_workers

__all__ = ["SubController"]

log = structlog.get_logger(__name__)


class SubController:
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

    def sync(self, key: str) -> Result | None:
        raise NotImplementedError

    def reconcile(self, key: str) -> Result:
        """:meth:`sync` with failed API calls turned into rate-limited retries."""
        try:
            return self.sync(key) or DONE
        except Conflict as err:
            log.info("sync_conflict_retrying", controller=self.name, key=key, error=err.message)
        except (ApiError, ConnectionFailed) as err:
            log.warning("sync_failed_retrying", controller=self.name, key=key, error=str(err))
        return RETRY

    def start(self, workers: int, stop: threading.Event) -> list[threading.Thread]:
        return start_workers(
            self.queue, self.name, workers, self.reconcile, DEFAULT_MAX_RETRIES, stop, clock=self.ctx.clock
        )

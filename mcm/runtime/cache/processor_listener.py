"""Processor listeners: one unbounded buffer and one delivery thread per informer handler.

Guarantees:

- :meth:`ProcessorListener.add` never blocks: notifications go into an unbounded ring buffer
  (a ``deque``), so a slow handler delays only itself, never the informer or other handlers.
- One thread calls the handler, so a handler sees its notifications one at a time, in order.
- mcm: an *inline* listener (``inline=True``; client-go has none) has no buffer and no thread:
  :meth:`ProcessorListener.add` calls the handler at once, on the informer's thread that
  distributes the notification, in order. It saves a thread hand-off per event, and is only for
  handlers that return promptly and take no lock across a blocking call (a controller's handlers
  that only enqueue): a slow inline handler delays the informer and every other handler of it,
  and one that adds or removes a handler of the same informer deadlocks.
- An exception from the handler goes through ``handle_crash``: it is logged with its traceback
  and delivery goes on, or, with ``REALLY_CRASH`` on, ``ON_FATAL`` ends the process (client-go's
  ``TestPanicPropagated``: a handler panic is never swallowed there by default).
- :meth:`ProcessorListener.has_synced` is true once the informer has synced *and* the handler
  has returned from every ``on_add`` flagged as part of the initial list (or late-handler replay).
- After :meth:`ProcessorListener.stop`, undelivered notifications are dropped and the thread ends.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.runtime.cache.handlers import ResourceEventHandler
from mcm.runtime.errors import handle_crash

__all__ = [
    "AddNotification",
    "DeleteNotification",
    "Notification",
    "ProcessorListener",
    "UpdateNotification",
    "determine_resync_period",
]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class AddNotification:
    new: Any
    is_in_initial_list: bool


@dataclass(frozen=True, slots=True)
class UpdateNotification:
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class DeleteNotification:
    old: Any


Notification = AddNotification | UpdateNotification | DeleteNotification


def determine_resync_period(desired: float, check: float) -> float:
    """A handler's effective resync period given the informer's resync check period."""
    if desired == 0:
        return desired
    if check == 0:
        log.warning("resync_disabled_by_informer", requested=desired)
        return 0.0
    if desired < check:
        log.warning("resync_period_raised_to_check_period", requested=desired, check=check)
        return check
    return desired


class ProcessorListener:
    """Delivers notifications to one handler on its own thread; also the handler's registration."""

    def __init__(
        self,
        handler: ResourceEventHandler,
        requested_resync_period: float,
        resync_period: float,
        now: float,
        upstream_has_synced: Callable[[], bool],
        *,
        inline: bool = False,
    ) -> None:
        self.handler = handler
        self.inline = inline
        self.requested_resync_period = requested_resync_period
        self._resync_period = resync_period
        self._next_resync = now + resync_period
        self._upstream_has_synced = upstream_has_synced
        self._cond = threading.Condition()
        self._pending: deque[Notification] = deque()
        self._initial_outstanding = 0
        self._stopped = False
        self._thread: threading.Thread | None = None

    # -- registration ---------------------------------------------------------------------------
    def has_synced(self) -> bool:
        """The informer has synced and this handler has processed its initial adds."""
        if not self._upstream_has_synced():
            return False
        with self._cond:
            return self._initial_outstanding <= 0

    # -- producer side --------------------------------------------------------------------------
    def add(self, notification: Notification) -> None:
        if self.inline:
            if not self._stopped:
                self._deliver_inline(notification)
            return
        with self._cond:
            if self._stopped:
                return
            if isinstance(notification, AddNotification) and notification.is_in_initial_list:
                self._initial_outstanding += 1
            self._pending.append(notification)
            if len(self._pending) == 1:
                self._cond.notify()

    def pending(self) -> int:
        """Notifications buffered and not yet handed to the handler."""
        with self._cond:
            return len(self._pending)

    # -- lifecycle ------------------------------------------------------------------------------
    def _deliver_inline(self, notification: Notification) -> None:
        with handle_crash():
            self._call_handler(notification)

    def start(self) -> None:
        if self.inline:
            return
        name = f"listener-{type(self.handler).__name__}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Drop what is buffered and end the delivery thread (it finishes the current call)."""
        with self._cond:
            self._stopped = True
            self._pending.clear()
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                notification = self._pending.popleft()
            self._deliver(notification)

    def _deliver(self, notification: Notification) -> None:
        try:
            with handle_crash():
                self._call_handler(notification)
        finally:
            if isinstance(notification, AddNotification) and notification.is_in_initial_list:
                with self._cond:
                    self._initial_outstanding -= 1

    def _call_handler(self, notification: Notification) -> None:
        if isinstance(notification, UpdateNotification):
            self.handler.on_update(notification.old, notification.new)
        elif isinstance(notification, AddNotification):
            self.handler.on_add(notification.new, notification.is_in_initial_list)
        else:
            self.handler.on_delete(notification.old)

    # -- resync ---------------------------------------------------------------------------------
    @property
    def resync_period(self) -> float:
        return self._resync_period

    def set_resync_period(self, period: float) -> None:
        self._resync_period = period

    def should_resync(self, now: float) -> bool:
        return self._resync_period != 0 and now >= self._next_resync

    def determine_next_resync(self, now: float) -> None:
        self._next_resync = now + self._resync_period

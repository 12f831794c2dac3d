"""Event expiry: events are deleted ``ttl`` seconds after their last write (kube-apiserver's
``--event-ttl``).

Guarantees: off by default (``ttl = None``; upstream keeps events 1 h). When on, each create or
update of a core event schedules its deletion ``ttl`` clock seconds later; a later write to the
same event restarts its countdown. Expiry is an ordinary delete with a DELETED watch event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcm.emulator.errors import ApiStatusError

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.store import Change

__all__ = ["EventTTL"]

EVENTS = "events"


class EventTTL:
    """Deletes events whose last write is older than ``ttl`` seconds."""

    def __init__(self, reactor: Reactor, scheduler: Scheduler) -> None:
        self.reactor = reactor
        self.scheduler = scheduler
        self.ttl: float | None = None
        reactor.add_handler(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.resource != EVENTS:
            return
        namespace, name = change.key
        key = ("event-ttl", namespace, name)
        if change.type == "DELETED" or self.ttl is None:
            self.scheduler.cancel(key)
            return
        rv = change.rv
        self.scheduler.schedule(
            key, self.ttl, lambda: self.reactor.run(key, lambda: self._expire(namespace, name, rv))
        )

    def _expire(self, namespace: str, name: str, rv: int) -> None:
        storage = self.reactor.storage
        stored = storage.store.get(EVENTS, namespace, name)
        rt = storage.registry.by_storage(EVENTS)
        if stored is None or rt is None or stored.rv != rv:
            return
        try:
            storage.delete(rt, namespace, name)
        except ApiStatusError as err:
            if err.code != 404:
                raise

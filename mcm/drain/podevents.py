""":class:`PodDeletions`: the pod informer's delete events, waking drains that wait for pods to go.

Put it on the target cluster's pod informer (it is a ``ResourceEventHandler``). A drain waiting
for evicted pods to terminate then re-checks the moment the informer sees a pod deleted, instead
of on its next 5 s poll. Guarantees: every watch registered before a deletion is woken by it
(no event is dropped); a watch also reads as woken once its drain's ``stop`` is set.
"""

from __future__ import annotations

import threading
from typing import Any

from mcm.drain.volumes import _StopAware

__all__ = ["PodDeletions"]


class PodDeletions:
    """Fans pod deletions out to waiting drains. Informer callbacks only set events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: list[threading.Event] = []

    def watch(self, stop: threading.Event | None = None) -> threading.Event:
        """An event set on every pod deletion from now on (and read as set once ``stop`` is);
        the waiter clears it before each look at the cache. Call :meth:`unwatch` when done."""
        woken = _StopAware(stop)
        with self._lock:
            self._watches.append(woken)
        return woken

    def unwatch(self, woken: threading.Event) -> None:
        with self._lock:
            if woken in self._watches:
                self._watches.remove(woken)

    @property
    def watch_count(self) -> int:
        with self._lock:
            return len(self._watches)

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        """Pods that appear end no wait."""

    def on_update(self, old: Any, new: Any) -> None:
        """A pod that is still there (even terminating) ends no wait."""

    def on_delete(self, obj: Any) -> None:
        """A pod (or a tombstone of one) left the cache: wake every waiting drain."""
        with self._lock:
            watches = list(self._watches)
        for woken in watches:
            woken.set()

"""Per-item exponential back-off: the port of client-go's ``util/flowcontrol.Backoff``.

Guarantees:

- Each id has its own delay. The first :meth:`Backoff.next` sets it to ``initial``; every later
  one doubles it (plus jitter, if configured), never beyond ``max_duration``.
- An id whose last update is more than ``2 * max_duration`` before the event time counts as
  stable: the next :meth:`Backoff.next` starts again at ``initial`` and the ``is_in_back_off_*``
  checks are false.
- Event times and updates are readings of the injected clock's ``monotonic()`` (client-go uses
  ``time.Time``), so a ``FakeClock`` drives it without real waiting.
- :meth:`Backoff.gc` forgets ids not updated for more than ``2 * max_duration``; call it
  periodically. All methods are thread-safe.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["Backoff"]


@dataclass
class _Entry:
    backoff: float
    last_update: float


class Backoff:
    """Exponential back-off per id (seconds), capped at ``max_duration``.

    ``max_jitter_factor > 0`` adds up to ``factor * delay`` of random jitter to each step
    (``NewBackOffWithJitter``); 0 (the default) gives the exact doubling of ``NewBackOff``.
    """

    def __init__(
        self,
        initial: float,
        max_duration: float,
        *,
        clock: Clock = REAL_CLOCK,
        max_jitter_factor: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        self.clock = clock
        self._initial = initial
        self._max = max_duration
        self._jitter_factor = max(max_jitter_factor, 0.0)
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def get(self, id_: str) -> float:
        """The current delay of ``id_`` (0 if it has none)."""
        with self._lock:
            entry = self._entries.get(id_)
            return entry.backoff if entry is not None else 0.0

    def next(self, id_: str, event_time: float) -> None:
        """Move ``id_`` to its next delay: ``initial`` when new or stable, else double, capped."""
        with self._lock:
            entry = self._entries.get(id_)
            if entry is None or self._has_expired(event_time, entry.last_update):
                entry = _Entry(self._initial + self._jitter(self._initial), 0.0)
                self._entries[id_] = entry
            else:
                delay = entry.backoff * 2 + self._jitter(entry.backoff)
                entry.backoff = min(delay, self._max)
            entry.last_update = self.clock.monotonic()

    def reset(self, id_: str) -> None:
        """Forget ``id_``'s back-off."""
        with self._lock:
            self._entries.pop(id_, None)

    delete_entry = reset

    def is_in_back_off_since(self, id_: str, event_time: float) -> bool:
        """Whether less than the current delay has passed since ``event_time``."""
        with self._lock:
            entry = self._entries.get(id_)
            if entry is None or self._has_expired(event_time, entry.last_update):
                return False
            return self.clock.since(event_time) < entry.backoff

    def is_in_back_off_since_update(self, id_: str, event_time: float) -> bool:
        """Whether ``event_time`` is less than the current delay after the last update."""
        with self._lock:
            entry = self._entries.get(id_)
            if entry is None or self._has_expired(event_time, entry.last_update):
                return False
            return event_time - entry.last_update < entry.backoff

    def gc(self) -> None:
        """Drop ids not updated for more than ``2 * max_duration``."""
        with self._lock:
            now = self.clock.monotonic()
            for id_, entry in list(self._entries.items()):
                if now - entry.last_update > self._max * 2:
                    del self._entries[id_]

    def __contains__(self, id_: object) -> bool:
        with self._lock:
            return id_ in self._entries

    def _has_expired(self, event_time: float, last_update: float) -> bool:
        return event_time - last_update > self._max * 2

    def _jitter(self, delay: float) -> float:
        if self._jitter_factor == 0:
            return 0.0
        return self._rng.random() * self._jitter_factor * delay

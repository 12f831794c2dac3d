"""PermitGiver: per-key counting permits with a timeout (upstream ``pkg/util/permits``).

The health check uses it to serialise "mark Failed" decisions per MachineDeployment. mcm keeps
upstream's register / try / release / delete / close contract without its races
(upstream's janitor can drop a key someone waits for): one lock guards every entry, an entry is only dropped
by the janitor while nobody holds or waits for it, the last-acquire time is really recorded, and
closing wakes every waiter. ``try_permit`` never grants more holders than the key's capacity.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import structlog

from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["PermitGiver"]

log = structlog.get_logger(__name__)


@dataclass
class _Permit:
    capacity: int
    held: int = 0
    waiters: int = 0
    last_acquired: float = 0.0


class PermitGiver:
    """Keyed semaphores; entries idle for ``stale_after`` seconds are dropped by the janitor."""

    def __init__(
        self, stale_after: float = 3600.0, janitor_period: float = 600.0, *, clock: Clock = REAL_CLOCK
    ):
        self._clock = clock
        self._stale_after = stale_after
        self._cond = threading.Condition()
        self._permits: dict[str, _Permit] = {}
        self._closed = False
        self._stop = threading.Event()
        self._janitor = threading.Thread(
            target=self._janitor_loop, args=(janitor_period,), name="permit-janitor", daemon=True
        )
        self._janitor.start()

    def register_permits(self, key: str, capacity: int) -> None:
        """Create ``key`` with ``capacity`` permits; an existing key keeps its capacity."""
        with self._cond:
            if not self._closed and key not in self._permits:
                self._permits[key] = _Permit(capacity, last_acquired=self._clock.monotonic())

    def try_permit(self, key: str, timeout: float) -> bool:
        """Take one permit of ``key``, waiting up to ``timeout`` seconds; ``False`` if not obtained."""
        deadline = self._clock.monotonic() + timeout
        with self._cond:
            permit = self._permits.get(key)
            if permit is None or self._closed:
                if permit is None:
                    log.error("no_permit_registered", key=key)
                return False
            permit.waiters += 1
            try:
                while permit.held >= permit.capacity:
                    remaining = deadline - self._clock.monotonic()
                    if remaining <= 0 or self._closed:
                        return False
                    self._clock.wait_condition(self._cond, remaining)
                permit.held += 1
                permit.last_acquired = self._clock.monotonic()
                return True
            finally:
                permit.waiters -= 1

    def release_permit(self, key: str) -> None:
        """Give back one permit of ``key`` (nothing happens if none is held)."""
        with self._cond:
            permit = self._permits.get(key)
            if permit is None or permit.held == 0:
                return
            permit.held -= 1
            self._cond.notify_all()

    def delete_permits(self, key: str) -> None:
        """Forget ``key`` (holders and waiters of it are unaffected: they keep their entry object)."""
        with self._cond:
            self._permits.pop(key, None)
            self._cond.notify_all()

    def is_held(self, key: str) -> bool:
        with self._cond:
            permit = self._permits.get(key)
            return permit is not None and permit.held > 0

    def close(self) -> None:
        """Refuse further permits and wake every waiter; safe to call twice."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._stop.set()

    def cleanup_stale(self) -> None:
        """Drop entries nobody holds or waits for whose last acquisition is older than ``stale_after``."""
        now = self._clock.monotonic()
        with self._cond:
            for key, permit in list(self._permits.items()):
                idle = permit.held == 0 and permit.waiters == 0
                if idle and now - permit.last_acquired > self._stale_after:
                    del self._permits[key]

    def _janitor_loop(self, period: float) -> None:
        while not self._clock.wait(self._stop, period):
            self.cleanup_stale()

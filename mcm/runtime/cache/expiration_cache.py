"""A store whose entries expire (client-go ``cache.ExpirationCache`` / ``NewTTLStore``).

Guarantees:

- Every entry is stamped with the clock's ``monotonic()`` reading when it is added, updated or
  replaced; ``update`` is ``add`` and so refreshes the stamp.
- Expiry is lazy: ``get``, ``get_by_key`` and ``list`` check each entry they touch against the
  :class:`ExpirationPolicy`, delete the expired ones and never return them. ``list_keys`` does
  not check (it may name expired keys, as in client-go).
- No write can slip in between deciding that an entry has expired and deleting it (one
  expiration lock), so a fresh entry is never removed because of a stale stamp.
- :class:`TTLPolicy` expires entries strictly older than its ttl; a ttl ``<= 0`` never expires.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from mcm.runtime.cache.keys import KeyFunc, key_with
from mcm.runtime.cache.thread_safe_store import ThreadSafeStore
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["ExpirationCache", "ExpirationPolicy", "TTLPolicy", "TimestampedEntry", "new_ttl_store"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class TimestampedEntry:
    """What the cache stores: the object, when it was stored, and its key."""

    obj: Any
    timestamp: float
    key: str


class ExpirationPolicy(Protocol):
    def is_expired(self, entry: TimestampedEntry) -> bool: ...


@dataclass
class TTLPolicy:
    """Expire entries older than ``ttl`` seconds on ``clock``; ``ttl <= 0`` never expires."""

    ttl: float
    clock: Clock = REAL_CLOCK

    def is_expired(self, entry: TimestampedEntry) -> bool:
        return self.ttl > 0 and self.clock.since(entry.timestamp) > self.ttl


class ExpirationCache:
    """A keyed store of timestamped entries, purged lazily on read."""

    def __init__(
        self,
        key_func: KeyFunc,
        policy: ExpirationPolicy,
        *,
        clock: Clock = REAL_CLOCK,
        storage: ThreadSafeStore | None = None,
    ) -> None:
        self._key_func = key_func
        self._policy = policy
        self._clock = clock
        self._storage = storage if storage is not None else ThreadSafeStore()
        self._expiration_lock = threading.Lock()

    # -- writes ---------------------------------------------------------------------------------
    def add(self, obj: Any) -> None:
        """Store ``obj`` stamped with the current time, replacing any entry under its key."""
        key = self._key_of(obj)
        with self._expiration_lock:
            self._storage.add(key, TimestampedEntry(obj, self._clock.monotonic(), key))

    update = add

    def delete(self, obj: Any) -> None:
        key = self._key_of(obj)
        with self._expiration_lock:
            self._storage.delete(key)

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        """Make the cache hold exactly ``objects``, all stamped with the same time."""
        now = self._clock.monotonic()
        entries: dict[str, Any] = {}
        for obj in objects:
            key = self._key_of(obj)
            entries[key] = TimestampedEntry(obj, now, key)
        with self._expiration_lock:
            self._storage.replace(entries, resource_version)

    def resync(self) -> None:
        self._storage.resync()

    # -- reads ----------------------------------------------------------------------------------
    def get(self, obj: Any) -> Any | None:
        """The unexpired object under ``obj``'s key, or ``None`` (an expired one is deleted)."""
        return self._get_or_expire(self._key_of(obj))

    def get_by_key(self, key: str) -> Any | None:
        return self._get_or_expire(key)

    def list(self) -> builtins.list[Any]:
        """Every unexpired object; expired entries met on the way are deleted."""
        result = []
        for entry in self._storage.list():
            obj = self._get_or_expire(entry.key)
            if obj is not None:
                result.append(obj)
        return result

    def list_keys(self) -> builtins.list[str]:
        """Every stored key, expired or not."""
        return self._storage.list_keys()

    # -- internals ------------------------------------------------------------------------------
    def _key_of(self, obj: Any) -> str:
        return key_with(self._key_func, obj)

    def _get_or_expire(self, key: str) -> Any | None:
        with self._expiration_lock:
            entry = self._storage.get(key)
            if not isinstance(entry, TimestampedEntry):
                return None
            if self._policy.is_expired(entry):
                log.debug("cache_entry_expired", key=key)
                self._storage.delete(key)
                return None
            return entry.obj


def new_ttl_store(key_func: KeyFunc, ttl: float, clock: Clock = REAL_CLOCK) -> ExpirationCache:
    """A store whose entries expire ``ttl`` seconds after they were last written."""
    return ExpirationCache(key_func, TTLPolicy(ttl, clock), clock=clock)

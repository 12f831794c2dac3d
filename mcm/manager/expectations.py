"""Creations and deletions a MachineSet is waiting to see in its cache (client-go's
``ControllerExpectations`` as the ReplicaSet controller uses it).

A MachineSet that has just created machines must not count its machines again before its
informer has delivered them, or it creates the same machines twice. Upstream v0.47.0 records
these expectations but never consults them (``pkg/controller/machineset.go``); mcm does.

Guarantees (thread-safe):

- :meth:`Expectations.satisfied` is ``True`` for a key with no record, with a record whose
  creations and deletions have all been observed, or with a record older than
  :data:`~mcm.manager.constants.EXPECTATIONS_TIMEOUT` seconds (a lost event cannot wedge a set).
- Deletions are tracked per machine key (``namespace/name``): observing the same deletion twice
  (the update that set ``deletionTimestamp``, then the delete) counts once.
- Recording replaces the previous record of the key, as client-go does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from mcm.manager.constants import EXPECTATIONS_TIMEOUT
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["Expectations"]


@dataclass
class _Record:
    adds: int
    deletes: set[str] = field(default_factory=set)
    since: float = 0.0


class Expectations:
    """Pending creations and deletions per MachineSet key."""

    def __init__(self, clock: Clock = REAL_CLOCK, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}

    def expect_creations(self, key: str, count: int) -> None:
        """``count`` machines are about to be created for ``key``."""
        with self._lock:
            self._records[key] = _Record(adds=count, since=self._clock.monotonic())

    def expect_deletions(self, key: str, machine_keys: Iterable[str]) -> None:
        """These machines are about to be deleted for ``key``."""
        with self._lock:
            self._records[key] = _Record(adds=0, deletes=set(machine_keys), since=self._clock.monotonic())

    def creation_observed(self, key: str, count: int = 1) -> None:
        """A creation was seen (or given up: the call failed or was never made)."""
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.adds = max(record.adds - count, 0)

    def deletion_observed(self, key: str, machine_key: str) -> None:
        """The deletion of ``machine_key`` was seen (or the DELETE failed)."""
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.deletes.discard(machine_key)

    def satisfied(self, key: str) -> bool:
        """Whether the set may count its machines again (see the module docstring)."""
        with self._lock:
            record = self._records.get(key)
            if record is None:
                return True
            if record.adds <= 0 and not record.deletes:
                return True
            return self._clock.since(record.since) > self._timeout

    def delete(self, key: str) -> None:
        """Forget ``key`` (its MachineSet is gone)."""
        with self._lock:
            self._records.pop(key, None)

"""An in-memory lock store with optimistic concurrency, for driving electors with a FakeClock."""

from __future__ import annotations

import json
import threading

from mcm.runtime.client.errors import AlreadyExists, Conflict, NotFound
from mcm.runtime.leaderelection.interface import LockNotInitialized
from mcm.runtime.leaderelection.record import LeaderElectionRecord, raw_record, record_to_lease_spec


class LockStore:
    """One lock object: a record and a version; ``fail`` / ``hang`` simulate an unreachable server."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.record: LeaderElectionRecord | None = None
        self.version = 0
        self.fail = False
        self.hang: threading.Event | None = None
        self.hanging = threading.Event()
        self.requests = 0
        self.writes: list[LeaderElectionRecord] = []
        self.events: list[str] = []

    def put(self, record: LeaderElectionRecord) -> None:
        with self.mutex:
            self.record = record
            self.version += 1

    def _gate(self) -> None:
        self.requests += 1
        hang = self.hang
        if hang is not None:
            self.hanging.set()
            hang.wait(10)
        if self.fail:
            raise ConnectionError("server unreachable")


class FakeLock:
    """A :class:`ResourceLock` over a :class:`LockStore`."""

    def __init__(self, store: LockStore, identity: str) -> None:
        self.store = store
        self._identity = identity
        self._version: int | None = None

    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return "default/test"

    def get(self) -> tuple[LeaderElectionRecord, bytes]:
        self.store._gate()
        with self.store.mutex:
            if self.store.record is None:
                raise NotFound()
            self._version = self.store.version
            record = self.store.record
        spec = record_to_lease_spec(record)
        return record, raw_record(json.loads(json.dumps(spec)))

    def create(self, record: LeaderElectionRecord) -> None:
        self.store._gate()
        with self.store.mutex:
            if self.store.record is not None:
                raise AlreadyExists()
            self.store.record = record
            self.store.version += 1
            self._version = self.store.version
            self.store.writes.append(record)

    def update(self, record: LeaderElectionRecord) -> None:
        self.store._gate()
        with self.store.mutex:
            if self._version is None:
                raise LockNotInitialized()
            if self._version != self.store.version:
                raise Conflict()
            self.store.record = record
            self.store.version += 1
            self._version = self.store.version
            self.store.writes.append(record)

    def record_event(self, message: str) -> None:
        self.store.events.append(f"{self._identity} {message}")

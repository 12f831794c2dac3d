"""What the elector needs from a lock (the port of ``resourcelock.Interface``).

A lock stores one :class:`LeaderElectionRecord` in some API object with optimistic concurrency:

- :meth:`ResourceLock.get` reads the object, remembers it (with its resourceVersion) and returns
  the record plus its raw bytes; a missing object raises ``NotFound``.
- :meth:`ResourceLock.create` creates the object holding the record; ``AlreadyExists`` if a
  competitor was faster.
- :meth:`ResourceLock.update` writes the record into the remembered object, sending its
  resourceVersion, so a write by anyone else in between fails with ``Conflict``.

Every call may raise any exception; the elector treats each one as a failed attempt.
"""

from __future__ import annotations

from typing import Protocol

from mcm.runtime.leaderelection.record import LeaderElectionRecord

__all__ = ["LockNotInitialized", "ResourceLock"]


class LockNotInitialized(RuntimeError):
    """``update`` was called before ``get`` or ``create`` remembered the object."""

    def __init__(self) -> None:
        super().__init__("lease not initialized, call get or create first")


class ResourceLock(Protocol):
    """A leader election lock."""

    def get(self) -> tuple[LeaderElectionRecord, bytes]: ...

    def create(self, record: LeaderElectionRecord) -> None: ...

    def update(self, record: LeaderElectionRecord) -> None: ...

    def record_event(self, message: str) -> None:
        """Emit a ``LeaderElection`` event (``"<identity> <message>"``) if a recorder is set."""
        ...

    def identity(self) -> str: ...

    def describe(self) -> str:
        """``"<namespace>/<name>"`` of the lock object, for logs."""
        ...

"""Which ``CreateMachine`` and ``DeleteMachine`` calls a sidecar is running now, by Machine.

A controller gives up a driver call at its ``--driver-call-timeout`` and cancels it; over gRPC
the call then returns at once, but the sidecar's handler runs on until the driver returns (a
cloud request need not honour cancellation). The controller no longer sees that Machine "in
creation", so its retry would run a second ``CreateMachine`` beside the first (two VMs), or a
``DeleteMachine`` that finds nothing to delete before the first makes its VM (a leaked VM).

Guarantees of :class:`MachineCalls`:

- A ``CreateMachine`` is refused while a ``CreateMachine`` or ``DeleteMachine`` for the same
  Machine runs; a ``DeleteMachine`` is refused while a ``CreateMachine`` for it runs. Concurrent
  ``DeleteMachine`` calls (idempotent) and every other RPC are never refused.
- A Machine is its namespace and name; a request whose Machine has no name is never refused
  and holds nothing.
- A call admitted holds its Machine until :meth:`MachineCalls.done` is called for it, which the
  server does when the handler really returns (driver answered or raised), not when the client
  went away.
"""

from __future__ import annotations

import threading
from collections import Counter

from mcm.apis.machine.v1alpha1 import Machine

__all__ = ["CREATE", "DELETE", "MachineCalls", "machine_key", "refusal_message"]

CREATE = "CreateMachine"
DELETE = "DeleteMachine"

_BLOCKED_BY: dict[str, tuple[str, ...]] = {CREATE: (CREATE, DELETE), DELETE: (CREATE,)}
"""RPC name → the RPCs whose running call for the same Machine refuses it."""

Key = tuple[str, str]


def machine_key(machine: Machine) -> Key | None:
    """``(namespace, name)`` of ``machine``; ``None`` when it has no name."""
    name = machine.metadata.name or ""
    if not name:
        return None
    return machine.metadata.namespace or "", name


class MachineCalls:
    """The guarded calls running now; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Counter[tuple[str, Key]] = Counter()

    @staticmethod
    def guards(rpc_name: str) -> bool:
        """Is ``rpc_name`` one of the RPCs this class admits or refuses?"""
        return rpc_name in _BLOCKED_BY

    def admit(self, rpc_name: str, key: Key) -> str | None:
        """Start a ``rpc_name`` call for ``key``: ``None`` when admitted (call :meth:`done`
        later), else the name of the running call that refuses it."""
        with self._lock:
            for blocker in _BLOCKED_BY.get(rpc_name, ()):
                if self._running[(blocker, key)] > 0:
                    return blocker
            self._running[(rpc_name, key)] += 1
            return None

    def done(self, rpc_name: str, key: Key) -> None:
        """The admitted ``rpc_name`` call for ``key`` has returned."""
        with self._lock:
            self._running[(rpc_name, key)] -= 1
            if self._running[(rpc_name, key)] <= 0:
                del self._running[(rpc_name, key)]

    def running(self, rpc_name: str, key: Key) -> int:
        """How many admitted ``rpc_name`` calls for ``key`` run now."""
        with self._lock:
            return self._running[(rpc_name, key)]


def refusal_message(rpc_name: str, blocker: str, key: Key) -> str:
    """The ``Aborted`` message for a ``rpc_name`` call refused because ``blocker`` still runs."""
    namespace, name = key
    machine = f"{namespace}/{name}" if namespace else name
    return (
        f"{rpc_name} refused: a {blocker} for machine {machine} is still running in this driver "
        f"sidecar (an earlier call the client gave up on); retry once it has returned"
    )

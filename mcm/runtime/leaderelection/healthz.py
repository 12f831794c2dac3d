"""A health check for leader election (``tools/leaderelection/healthzadaptor.go``).

Register one :class:`HealthzAdaptor` with the HTTP health endpoint before the elector exists and
pass it as ``LeaderElectionConfig.watchdog``. It reports healthy while no elector is attached,
while we are not the leader, and while we lead and renewed within ``lease_duration + timeout``;
otherwise unhealthy (a leader that should have stepped down but is stuck, e.g. deadlocked).
"""

from __future__ import annotations

import threading
from typing import Protocol

__all__ = ["HealthzAdaptor"]


class _Checkable(Protocol):
    def check(self, max_tolerable_expired_lease: float) -> Exception | None: ...


class HealthzAdaptor:
    """Health check named ``leaderElection``; ``timeout`` is the tolerated extra expiry in seconds."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._lock = threading.Lock()
        self._elector: _Checkable | None = None

    def name(self) -> str:
        return "leaderElection"

    def set_leader_elector(self, elector: _Checkable) -> None:
        with self._lock:
            self._elector = elector

    def check(self) -> Exception | None:
        """None when healthy, else the error describing why not."""
        with self._lock:
            elector = self._elector
        if elector is None:
            return None
        return elector.check(self._timeout)

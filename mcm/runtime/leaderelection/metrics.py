"""Leader election metrics (``tools/leaderelection/metrics.go``).

client-go reports through a global provider that does nothing until a component installs one.
Here the same: :func:`set_provider` installs one; :class:`PrometheusLeaderMetrics` serves
``leader_election_master_status{name}`` (1 while leading, 0 otherwise) on a registry.
"""

from __future__ import annotations

import threading
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge

__all__ = ["LeaderMetrics", "PrometheusLeaderMetrics", "get_provider", "set_provider"]


class LeaderMetrics(Protocol):
    """Receives leadership changes of the elector named ``name``."""

    def leader_on(self, name: str) -> None: ...

    def leader_off(self, name: str) -> None: ...


class _NoopMetrics:
    def leader_on(self, name: str) -> None:
        pass

    def leader_off(self, name: str) -> None:
        pass


class PrometheusLeaderMetrics:
    """The ``leader_election_master_status`` gauge on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, "
            "0 indicates backup, 1 indicates master. 'name' is the string used to "
            "identify the lease. Please make sure to group by name.",
            ["name"],
            registry=registry,
        )

    def leader_on(self, name: str) -> None:
        self._status.labels(name=name).set(1)

    def leader_off(self, name: str) -> None:
        self._status.labels(name=name).set(0)


_lock = threading.Lock()
_provider: LeaderMetrics = _NoopMetrics()


def set_provider(provider: LeaderMetrics) -> None:
    """Install the process-wide metrics provider (used by electors created afterwards)."""
    global _provider
    with _lock:
        _provider = provider


def get_provider() -> LeaderMetrics:
    with _lock:
        return _provider

"""The metrics of one ``machine-controller`` process, owned by its runner.

:class:`ProcessMetrics` is built once per run: a registry of its own holding the work-queue
metrics under upstream's names (``mcm_workqueue_*``), the drain's pod counters
(``mcm_machine_drain_{evicted,deleted}_pods_total``), the leader-election gauge
(``leader_election_master_status``) and, once the controller is built, the controller's metrics.
``/metrics`` serves that registry, which also forwards the default ``prometheus_client``
registry (process and Python metrics, and whatever a driver registers there). Nothing is
registered on the default registry, so a second run in the same process starts clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import prometheus_client
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from mcm.drain import DrainMetrics
from mcm.runtime.leaderelection import PrometheusLeaderMetrics
from mcm.runtime.workqueue.metrics import PrometheusMetricsProvider

__all__ = ["DefaultRegistry", "ProcessMetrics"]


class DefaultRegistry(Collector):
    """Forwards the default registry's metrics at scrape time."""

    def collect(self) -> Iterator[Metric]:
        yield from prometheus_client.REGISTRY.collect()


@dataclass(frozen=True)
class ProcessMetrics:
    """The metric providers of one process, all on ``registry``."""

    registry: CollectorRegistry
    workqueue: PrometheusMetricsProvider
    drain: DrainMetrics
    leader: PrometheusLeaderMetrics

    @classmethod
    def new(cls) -> ProcessMetrics:
        registry = CollectorRegistry()
        registry.register(DefaultRegistry())
        return cls(
            registry=registry,
            workqueue=PrometheusMetricsProvider(namespace="mcm", stability=None, registry=registry),
            drain=DrainMetrics(registry, with_duration=False),
            leader=PrometheusLeaderMetrics(registry),
        )

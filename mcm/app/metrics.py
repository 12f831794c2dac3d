"""The metrics of one command process, owned by its runner.

:class:`CommandMetrics` is built once per run: a registry of its own holding the work-queue
metrics under upstream's names (``mcm_workqueue_*``, as both upstream binaries register them:
v0.47.0 ``pkg/util/workqueue/prometheus``), the leader-election gauge
(``leader_election_master_status``) and, once the controller is built, the controller's metrics.
``machine-controller``'s :class:`ProcessMetrics` adds the drain's pod counters
(``mcm_machine_drain_{evicted,deleted}_pods_total``).
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

__all__ = ["CommandMetrics", "DefaultRegistry", "ProcessMetrics", "process_registry"]


class DefaultRegistry(Collector):
    """Forwards the default registry's metrics at scrape time."""

    def collect(self) -> Iterator[Metric]:
        yield from prometheus_client.REGISTRY.collect()


def process_registry() -> CollectorRegistry:
    """A registry of one run's own that also serves the default registry's metrics."""
    registry = CollectorRegistry()
    registry.register(DefaultRegistry())
    return registry


@dataclass(frozen=True)
class CommandMetrics:
    """The metric providers every command's process has, all on ``registry``."""

    registry: CollectorRegistry
    workqueue: PrometheusMetricsProvider
    leader: PrometheusLeaderMetrics

    @classmethod
    def new(cls, *, namespace: str = "mcm", stability: str | None = None) -> CommandMetrics:
        """A fresh registry and providers. ``namespace`` and ``stability`` name the work-queue
        metrics: by default upstream MCM's (``mcm_workqueue_*``); ``namespace="",
        stability="ALPHA"`` gives the Kubernetes components' (``workqueue_*``, ``[ALPHA]`` help)."""
        registry = process_registry()
        return cls(
            registry=registry,
            workqueue=PrometheusMetricsProvider(namespace=namespace, stability=stability, registry=registry),
            leader=PrometheusLeaderMetrics(registry),
        )


@dataclass(frozen=True)
class ProcessMetrics:
    """The metric providers of one ``machine-controller`` process, all on ``registry``."""

    registry: CollectorRegistry
    workqueue: PrometheusMetricsProvider
    drain: DrainMetrics
    leader: PrometheusLeaderMetrics

    @classmethod
    def new(cls) -> ProcessMetrics:
        common = CommandMetrics.new()
        return cls(
            registry=common.registry,
            workqueue=common.workqueue,
            drain=DrainMetrics(common.registry, with_duration=False),
            leader=common.leader,
        )

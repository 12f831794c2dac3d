"""Drain metrics (HEAD #1104): drain duration and the pods each drain evicted or deleted.

The machine controller already exports ``mcm_machine_drain_duration_seconds`` as a gauge per
namespace and MachineDeployment; pass ``with_duration=False`` when sharing its registry so the
name is not registered twice.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from mcm.drain.types import DrainResult

__all__ = ["DrainMetrics"]

DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


class DrainMetrics:
    """``mcm_machine_drain_evicted_pods_total`` / ``mcm_machine_drain_deleted_pods_total``
    (counters) and, unless ``with_duration`` is false, ``mcm_machine_drain_duration_seconds``
    (histogram), registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None, *, with_duration: bool = True) -> None:
        self.duration = (
            Histogram(
                "mcm_machine_drain_duration_seconds",
                "Time taken to drain a node, in seconds.",
                buckets=DURATION_BUCKETS,
                registry=registry,
            )
            if with_duration
            else None
        )
        self.evicted = Counter(
            "mcm_machine_drain_evicted_pods", "Pods removed from nodes by eviction.", registry=registry
        )
        self.deleted = Counter(
            "mcm_machine_drain_deleted_pods", "Pods removed from nodes by deletion.", registry=registry
        )

    def observe(self, result: DrainResult) -> None:
        if self.duration is not None:
            self.duration.observe(result.duration)
        self.evicted.inc(len(result.evicted))
        self.deleted.inc(len(result.deleted))

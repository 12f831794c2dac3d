"""Prometheus metrics of the MachineConfigController (served on ``/metrics`` by the command).

- ``mcc_machinepool_machines{pool,state}`` (gauge): the pool's nodes by state — ``total``,
  ``updated``, ``ready``, ``unavailable``, ``updating``, ``degraded``.
- ``mcc_machinepool_paused{pool}`` (gauge): 1 while the pool is paused.
- ``mcc_machinepool_rollout_duration_seconds{pool}`` (histogram): from the moment the controller
  sees a pool's new rendered config until all its nodes are updated to it (a rollout already
  complete when the process starts is not observed).

Work-queue metrics (``workqueue_*`` with the sub-controllers' queue names) come from the
runtime's provider.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Gauge, Histogram

__all__ = ["ROLLOUT_BUCKETS", "STATES", "PoolMetrics"]

STATES = ("total", "updated", "ready", "unavailable", "updating", "degraded")
ROLLOUT_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


class PoolMetrics:
    """The pool metrics on one registry (build one per registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.machines = Gauge(
            "mcc_machinepool_machines",
            "Nodes of a MachinePool by state.",
            ("pool", "state"),
            registry=registry,
        )
        self.paused = Gauge(
            "mcc_machinepool_paused", "1 while the MachinePool is paused.", ("pool",), registry=registry
        )
        self.rollout = Histogram(
            "mcc_machinepool_rollout_duration_seconds",
            "Seconds from a MachinePool's new rendered config to all of its nodes updated.",
            ("pool",),
            buckets=ROLLOUT_BUCKETS,
            registry=registry,
        )

    def set_pool(self, pool: str, counts: Mapping[str, int], paused: bool) -> None:
        for state in STATES:
            self.machines.labels(pool=pool, state=state).set(counts.get(state, 0))
        self.paused.labels(pool=pool).set(1 if paused else 0)

    def observe_rollout(self, pool: str, seconds: float) -> None:
        self.rollout.labels(pool=pool).observe(seconds)

    def forget_pool(self, pool: str) -> None:
        """Drop a deleted pool's series."""
        for state in STATES:
            try:
                self.machines.remove(pool, state)
            except KeyError:
                pass
        for metric in (self.paused, self.rollout):
            try:
                metric.remove(pool)
            except KeyError:
                pass

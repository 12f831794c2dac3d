"""The runner owns its metric providers: one :class:`ProcessMetrics` per run, none on the default registry."""

from __future__ import annotations

import prometheus_client

from mcm.app.metrics import ProcessMetrics
from mcm.drain import DrainResult


def _names(registry: prometheus_client.CollectorRegistry) -> set[str]:
    return {metric.name for metric in registry.collect()}


def test_each_run_builds_its_own_providers_and_leaves_the_default_registry_alone() -> None:
    before = _names(prometheus_client.REGISTRY)
    first, second = ProcessMetrics.new(), ProcessMetrics.new()  # a second run in one process
    assert _names(prometheus_client.REGISTRY) == before
    first.drain.observe(DrainResult(node="n", duration=1.0, evicted=("ns/a", "ns/b")))
    first.leader.leader_on("machine-controller")
    served = prometheus_client.generate_latest(first.registry).decode()
    assert "mcm_machine_drain_evicted_pods_total 2.0" in served
    assert 'leader_election_master_status{name="machine-controller"} 1.0' in served
    assert "mcm_workqueue_depth" in served
    assert "python_info" in served  # the default registry is forwarded
    assert (
        "mcm_machine_drain_evicted_pods_total 0.0"
        in prometheus_client.generate_latest(second.registry).decode()
    )

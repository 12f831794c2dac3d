"""Conformance (emulator only): faults and instrumentation seen through the typed client
(docs/emulator.md)."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from tests.conformance.semantics_support import Cluster, cluster, emulator_only, namespace, pod_body
from tests.conformance.wire import call

__all__ = ["cluster", "namespace"]


def test_stop_start_same_port_same_data_rv_continues(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    before = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "keep"}})
    port = emu.port
    emu.stop()
    emu.start()
    assert emu.port == port
    again = cluster.core.read_namespaced_config_map("keep", namespace)
    assert again.metadata.uid == before.metadata.uid
    after = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "after"}})
    assert int(after.metadata.resource_version) > int(before.metadata.resource_version)


def test_pause_error_503_and_healthz_500(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    emu.pause("error")
    try:
        with pytest.raises(client.ApiException) as info:
            cluster.core.list_namespaced_config_map(namespace)
        assert info.value.status == 503
        assert call(cluster, "GET", "/readyz").status == 500
    finally:
        emu.resume()
    assert call(cluster, "GET", "/readyz").status == 200


def test_fault_rule_times_and_phase_after_commits(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    rule = emu.faults.add(code=504, verb="create", resource="configmaps", namespace=namespace, phase="after")
    try:
        with pytest.raises(client.ApiException) as info:
            cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "lost"}})
        assert info.value.status == 504
        assert cluster.core.read_namespaced_config_map("lost", namespace).metadata.name == "lost"
        assert rule.hits == 1
        cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "fine"}})
    finally:
        rule.remove()


def test_latency_injection_applies_to_matching_requests_only(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    rule = emu.latency(0.25, verb="list", resource="secrets")
    try:
        cluster.core.list_namespaced_config_map(namespace)
        assert rule.hits == 0  # not delayed (counted, not timed: load would upset a clock)
        start = time.perf_counter()
        cluster.core.list_namespaced_secret(namespace)
        slow = time.perf_counter() - start
        assert rule.hits == 1
    finally:
        rule.remove()
    assert slow >= 0.25


def test_stats_counts_by_verb_resource_subresource(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    with emu.stats.delta() as delta:
        cluster.core.create_namespaced_pod(namespace, pod_body("p"))
        cluster.core.patch_namespaced_pod_status("p", namespace, {"status": {"phase": "Pending"}})
        cluster.core.create_namespaced_pod_eviction(
            "p", namespace, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
        )
        cluster.core.list_node()
    assert delta.count("create", "pods", subresource="") == 1
    assert delta.count("patch", "pods", subresource="status") == 1
    assert delta.count("create", "pods", subresource="eviction") == 1
    assert delta.count("list", "nodes") == 1

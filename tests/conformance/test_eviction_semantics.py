"""Conformance: eviction and PodDisruptionBudget status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.semantics_support import (
    Cluster,
    cleanup_node,
    cluster,
    emulator_deviation,
    emulator_only,
    manual_kubelet,
    mark_running,
    namespace,
    node_body,
    pod_body,
    unique,
    within,
)

__all__ = ["cluster", "manual_kubelet", "namespace"]

LABELS = {"app": "conf"}


@pytest.fixture
def node(cluster: Cluster) -> Iterator[str]:
    name = unique("conf-node")
    cluster.core.create_node(node_body(name))
    yield name
    cleanup_node(cluster, name)


def running_pods(cluster: Cluster, namespace: str, node: str, count: int) -> list[str]:
    names = [f"p{i}" for i in range(count)]
    for name in names:
        cluster.core.create_namespaced_pod(namespace, pod_body(name, node, LABELS))
        mark_running(cluster, namespace, name)
    return names


def create_pdb(cluster: Cluster, namespace: str, name: str = "budget", **spec: Any) -> None:
    body = {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": LABELS}, **spec}}
    cluster.policy.create_namespaced_pod_disruption_budget(namespace, body)


def pdb_status(cluster: Cluster, namespace: str, name: str = "budget") -> client.V1PodDisruptionBudgetStatus:
    return cluster.policy.read_namespaced_pod_disruption_budget(name, namespace).status


def wait_observed(cluster: Cluster, namespace: str, allowed: int, name: str = "budget") -> None:
    def observed() -> bool:
        status = pdb_status(cluster, namespace, name)
        return status.observed_generation == 1 and status.disruptions_allowed == allowed

    cluster.wait(observed, f"disruptionsAllowed={allowed}")


def evict(cluster: Cluster, namespace: str, name: str, **options: Any) -> Any:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    if options:
        body["deleteOptions"] = options
    return cluster.core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False)


def test_eviction_without_pdb_deletes_pod_201(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 1)
    response = evict(cluster, namespace, "p0", gracePeriodSeconds=0)
    assert response.status == 201


def test_eviction_pending_pod_ignores_pdb(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("pending", labels=LABELS))
    create_pdb(cluster, namespace, minAvailable=3)
    wait_observed(cluster, namespace, 0)
    assert evict(cluster, namespace, "pending").status == 201


def test_eviction_blocked_429_with_disruption_budget_cause(
    cluster: Cluster, namespace: str, node: str
) -> None:
    running_pods(cluster, namespace, node, 2)
    create_pdb(cluster, namespace, minAvailable=2)
    wait_observed(cluster, namespace, 0)
    with pytest.raises(client.ApiException) as err:
        evict(cluster, namespace, "p0")
    assert err.value.status == 429
    status = json.loads(err.value.body)
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget budget needs 2 healthy pods and has 2 currently",
        }
    ]


@pytest.mark.usefixtures("manual_kubelet")
def test_eviction_decrements_budget_and_records_disrupted_pod(
    cluster: Cluster, namespace: str, node: str
) -> None:
    running_pods(cluster, namespace, node, 3)
    create_pdb(cluster, namespace, minAvailable=2)
    wait_observed(cluster, namespace, 1)
    assert evict(cluster, namespace, "p0").status == 201
    cluster.wait(lambda: pdb_status(cluster, namespace).disruptions_allowed == 0, "the budget to be used up")
    with pytest.raises(client.ApiException) as err:
        evict(cluster, namespace, "p1")
    assert err.value.status == 429


def test_eviction_unready_pod_when_budget_satisfied(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 3)
    mark_running(cluster, namespace, "p2", ready=False)
    create_pdb(cluster, namespace, minAvailable=2)
    wait_observed(cluster, namespace, 0)
    assert evict(cluster, namespace, "p2", gracePeriodSeconds=0).status == 201
    assert pdb_status(cluster, namespace).current_healthy == 2


def test_eviction_unhealthy_policy_always_allow(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 1)
    mark_running(cluster, namespace, "p0", ready=False)
    create_pdb(cluster, namespace, minAvailable=5, unhealthyPodEvictionPolicy="AlwaysAllow")
    wait_observed(cluster, namespace, 0)
    assert evict(cluster, namespace, "p0", gracePeriodSeconds=0).status == 201


def test_eviction_multiple_pdbs_failure_status(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 1)
    create_pdb(cluster, namespace, "b1", minAvailable=0)
    create_pdb(cluster, namespace, "b2", minAvailable=0)
    try:
        response = evict(cluster, namespace, "p0")
        code, body = response.status, json.loads(response.data)
    except client.ApiException as err:
        code, body = err.status, json.loads(err.body)
    assert code in (201, 500)
    assert body["status"] == "Failure"
    assert (
        body["message"]
        == "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )


def test_eviction_name_mismatch_400(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 1)
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}
    with pytest.raises(client.ApiException) as err:
        cluster.core.create_namespaced_pod_eviction("p0", namespace, body)
    assert err.value.status == 400


def test_eviction_accepts_policy_v1beta1_body(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 1)
    body = {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "p0"}}
    response = cluster.core.create_namespaced_pod_eviction("p0", namespace, body, _preload_content=False)
    assert response.status == 201


@pytest.mark.usefixtures("manual_kubelet")
def test_eviction_respects_grace_period(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 1)
    evict(cluster, namespace, "p0", gracePeriodSeconds=7)
    pod = cluster.core.read_namespaced_pod("p0", namespace)
    assert pod.metadata.deletion_grace_period_seconds == 7
    cluster.core.delete_namespaced_pod("p0", namespace, grace_period_seconds=0)


def test_eviction_pdb_not_observed_429_retry_after(cluster: Cluster, namespace: str, node: str) -> None:
    emu = emulator_only(cluster)
    running_pods(cluster, namespace, node, 2)
    emu.controllers.pdb.enabled = False
    try:
        create_pdb(cluster, namespace, minAvailable=1)
        with pytest.raises(client.ApiException) as err:
            evict(cluster, namespace, "p0")
    finally:
        emu.controllers.pdb.enabled = True
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "10"


def test_pdb_status_min_available_int(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 3)
    create_pdb(cluster, namespace, minAvailable=2)
    wait_observed(cluster, namespace, 1)
    status = pdb_status(cluster, namespace)
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (3, 2, 3)


@pytest.mark.deviation
def test_pdb_status_max_unavailable_percent(cluster: Cluster, namespace: str, node: str) -> None:
    """Deviation: the emulator counts pods per controller UID (no workload controllers to scale)."""
    owner = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "name": "rc",
        "uid": "0f0f0f0f-0000-4000-8000-000000000001",
        "controller": True,
    }
    for name in ("p0", "p1", "p2", "p3"):
        cluster.core.create_namespaced_pod(namespace, pod_body(name, node, LABELS, ownerReferences=[owner]))
        mark_running(cluster, namespace, name)
    create_pdb(cluster, namespace, maxUnavailable="25%")
    observed = within(10, lambda: pdb_status(cluster, namespace).observed_generation == 1)
    emulator_deviation(observed, "never observes it (no ReplicationController to scale)")
    status = pdb_status(cluster, namespace)
    assert (status.expected_pods, status.desired_healthy) == (4, 3)


def test_pdb_condition_fields_complete(cluster: Cluster, namespace: str, node: str) -> None:
    running_pods(cluster, namespace, node, 2)
    create_pdb(cluster, namespace, minAvailable=1)
    wait_observed(cluster, namespace, 1)
    [condition] = pdb_status(cluster, namespace).conditions
    assert (condition.type, condition.status, condition.reason) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    assert condition.message == ""
    assert condition.last_transition_time is not None

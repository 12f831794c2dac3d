"""The manager's metrics: upstream v0.47.0's names, labels and values, computed at scrape time;
``mcm_machine_set_status_replicas`` exports ``status.replicas`` (defect 19)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from mcm.manager.metrics import ManagerMetrics

from .builders import deployment, machine_set
from .fakes import NS, World


def _scrape(world: World) -> str:
    registry = CollectorRegistry()
    ManagerMetrics(registry).register_collectors(
        world.deps.machine_sets.list, world.deps.machine_deployments.list
    )
    return generate_latest(registry).decode()


def _world() -> World:
    world = World()
    md = deployment(
        "pool",
        replicas=3,
        max_surge="25%",
        max_unavailable=1,
        revisionHistoryLimit=2,
        progressDeadlineSeconds=60,
        minReadySeconds=5,
    )
    md["status"] = {
        "replicas": 4,
        "updatedReplicas": 2,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "unavailableReplicas": 1,
        "collisionCount": 2,
        "conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "Unknown"}],
        "failedMachines": [
            {
                "name": "m9",
                "providerID": "fake:///m9",
                "ownerRef": "pool-a",
                "lastOperation": {"state": "Failed", "type": "HealthCheck"},
            }
        ],
    }
    world.add(world.machine_deployments, md)
    ms: dict[str, Any] = machine_set("pool-a", 3, labels={"name": "pool"}, minReadySeconds=5)
    ms["spec"]["machineClass"] = {"apiGroup": "g", "kind": "K", "name": "legacy"}
    ms["status"] = {
        "replicas": 4,
        "readyReplicas": 2,
        "availableReplicas": 3,
        "fullyLabeledReplicas": 4,
        "machineSetCondition": [{"type": "ReplicaFailure", "status": "False"}],
        "failedMachines": [
            {
                "name": "m9",
                "providerID": "fake:///m9",
                "ownerRef": "pool-a",
                "lastOperation": {"state": "Failed", "type": "HealthCheck"},
            }
        ],
    }
    world.add(world.machine_sets, ms)
    return world


def test_machine_set_metrics() -> None:
    text = _scrape(_world())
    key = f'name="pool-a",namespace="{NS}"'
    for line in (
        "mcm_machine_set_items_total 1.0",
        f"mcm_machine_set_info_spec_replicas{{{key}}} 3.0",
        f"mcm_machine_set_info_spec_min_ready_seconds{{{key}}} 5.0",
        f"mcm_machine_set_status_available_replicas{{{key}}} 3.0",
        f"mcm_machine_set_status_fully_labelled_replicas{{{key}}} 4.0",
        f"mcm_machine_set_status_ready_replicas{{{key}}} 2.0",
        f"mcm_machine_set_status_replicas{{{key}}} 4.0",
        f'mcm_machine_set_status_condition{{condition="ReplicaFailure",{key}}} 0.0',
    ):
        assert line in text
    assert (
        'spec_machine_class_api_group="g",spec_machine_class_kind="K",spec_machine_class_name="legacy"} 1.0'
        in text
    )
    assert (
        'mcm_machine_set_failed_machines{failed_machine_last_operation_machine_operation_type="HealthCheck",'
        'failed_machine_last_operation_state="Failed",failed_machine_name="m9",failed_machine_owner_ref="pool-a",'
        f'failed_machine_provider_id="fake:///m9",{key}}} 1.0'
    ) in text


def test_machine_deployment_metrics() -> None:
    text = _scrape(_world())
    key = f'name="pool",namespace="{NS}"'
    for line in (
        "mcm_machine_deployment_items_total 1.0",
        f"mcm_machine_deployment_info_spec_paused{{{key}}} 0.0",
        f"mcm_machine_deployment_info_spec_replicas{{{key}}} 3.0",
        f"mcm_machine_deployment_info_spec_min_ready_seconds{{{key}}} 5.0",
        f"mcm_machine_deployment_info_spec_rolling_update_max_surge{{{key}}} 0.0",  # a percentage shows 0
        f"mcm_machine_deployment_info_spec_rolling_update_max_unavailable{{{key}}} 1.0",
        f"mcm_machine_deployment_info_spec_revision_history_limit{{{key}}} 2.0",
        f"mcm_machine_deployment_info_spec_progress_deadline_seconds{{{key}}} 60.0",
        f'mcm_machine_deployment_status_condition{{condition="Available",{key}}} 1.0',
        f'mcm_machine_deployment_status_condition{{condition="Progressing",{key}}} 2.0',
        f"mcm_machine_deployment_status_available_replicas{{{key}}} 3.0",
        f"mcm_machine_deployment_status_unavailable_replicas{{{key}}} 1.0",
        f"mcm_machine_deployment_status_ready_replicas{{{key}}} 3.0",
        f"mcm_machine_deployment_status_updated_replicas{{{key}}} 2.0",
        f"mcm_machine_deployment_status_replicas{{{key}}} 4.0",
        f"mcm_machine_deployment_status_collision_count{{{key}}} 2.0",
    ):
        assert line in text
    assert f'createdAt="1767268800",{key},spec_strategy_type="RollingUpdate"}} 1.0' in text
    assert "mcm_machine_deployment_info_spec_rollback_to_revision{" not in text


def test_deleted_objects_leave_no_series() -> None:
    world = _world()
    world.machine_sets.objects.clear()
    text = _scrape(world)
    assert "mcm_machine_set_items_total 0.0" in text and 'name="pool-a"' not in text


def test_a_failing_scrape_counts_and_does_not_raise() -> None:
    registry = CollectorRegistry()

    def broken() -> list[Any]:
        raise RuntimeError("cache gone")

    metrics = ManagerMetrics(registry)
    metrics.register_collectors(broken, broken)
    generate_latest(registry)
    text = generate_latest(registry).decode()  # the counter is collected before the collectors
    assert 'mcm_misc_scrape_failure_total{kind="Machineset-count"} 1.0' in text
    assert 'mcm_misc_scrape_failure_total{kind="Machinedeployment-count"} 1.0' in text

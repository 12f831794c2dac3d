"""RenderController on the emulator, and bad input of every kind: each gives a
condition and an Event, never a crash (the autouse fixture fails the test on any reconcile bug)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.ignition import data_url, decode_data_url
from mcm.runtime.client.errors import ApiError

from .fixtures import Cluster, eventually, machine_config, pool_manifest


def _files(config: dict[str, Any]) -> dict[str, str]:
    return {
        f["path"]: decode_data_url(f["contents"]["source"]).decode()
        for f in config["spec"]["config"]["storage"]["files"]
    }


def test_render_merges_by_name_order_and_owns_an_immutable_rendered_config(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)])
    configs = cluster.client.resource(api.MACHINE_CONFIGS)
    configs.create(
        machine_config("20-b", "worker", {"/etc/x": "from b", "/etc/b": "b"}, kernelArguments=["a=1", "b"])
    )
    configs.create(
        machine_config("10-a", "worker", {"/etc/x": "from a"}, kernelArguments=["b", "c"], osImageURL="os:a")
    )
    configs.create(machine_config("30-c", "worker", {}, osImageURL=""))
    cluster.start_controller()
    target = cluster.wait_for_target("worker")
    rendered = cluster.get_config(target)
    assert rendered is not None
    files = _files(rendered)
    assert files["/etc/x"] == "from b" and files["/etc/b"] == "b"  # later name wins
    assert rendered["spec"]["kernelArguments"] == ["b", "c", "a=1", "b"]  # concatenated, as MCO
    assert rendered["spec"]["osImageURL"] == "os:a"  # last non-empty (the template's is before 10-a)
    owner = rendered["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("MachinePool", "worker", True)
    assert api.ROLE_LABEL not in (rendered["metadata"].get("labels") or {}), (
        "rendered configs are never inputs"
    )
    # Someone edits the rendered config: it is written back.
    configs.patch(target, {"spec": {"osImageURL": "evil"}})
    eventually(lambda: (cluster.get_config(target) or {})["spec"]["osImageURL"] == "os:a", what="restored")
    eventually(lambda: cluster.events(api.Reason.RENDERED_CONFIG_RESTORED, kind="MachinePool"))
    assert cluster.target("worker") == target


def test_same_content_gives_the_same_name_and_old_rendered_configs_are_kept(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)])
    cluster.start_controller()
    first = cluster.wait_for_target("worker")
    configs = cluster.client.resource(api.MACHINE_CONFIGS)
    configs.create(machine_config("50-app", "worker", {"/etc/app": "v1"}))
    second = cluster.wait_for_target("worker", different_from=first)
    configs.delete("50-app")
    assert cluster.wait_for_target("worker", different_from=second) == first
    configs.create(machine_config("60-other-name", "worker", {"/etc/app": "v1"}))
    assert cluster.wait_for_target("worker", different_from=first) == second  # content, not names
    assert cluster.get_config(first) is not None and cluster.get_config(second) is not None


def test_duplicate_file_path_degrades_the_render_and_keeps_the_old_config(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)])
    cluster.start_controller()
    first = cluster.wait_for_target("worker")
    bad = machine_config("50-dup", "worker", {"/etc/a": "1"})
    bad["spec"]["config"]["storage"]["files"].append(
        {"path": "/etc/a", "contents": {"source": data_url("2")}}
    )
    cluster.client.resource(api.MACHINE_CONFIGS).create(bad)
    render = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_RENDER_DEGRADED)).get("status") == "True" and c
    )
    assert render["reason"] == api.Reason.INVALID_MACHINE_CONFIG
    assert "duplicate file path /etc/a" in render["message"] and "50-dup" in render["message"]
    degraded = cluster.condition("worker", api.POOL_DEGRADED)
    assert degraded["status"] == "True" and degraded["reason"] == api.Reason.INVALID_MACHINE_CONFIG
    assert cluster.target("worker") == first
    eventually(
        lambda: cluster.events(api.Reason.INVALID_MACHINE_CONFIG, kind="MachinePool"), what="pool event"
    )
    eventually(lambda: cluster.events(api.Reason.INVALID_MACHINE_CONFIG, kind="MachineConfig", name="50-dup"))
    cluster.client.resource(api.MACHINE_CONFIGS).delete("50-dup")
    eventually(
        lambda: cluster.condition("worker", api.POOL_DEGRADED).get("status") == "False", what="recovered"
    )


@pytest.mark.parametrize(
    ("selector", "reason", "text"),
    [
        ({"matchLabels": {"not a valid key!": "x"}}, api.Reason.INVALID_SELECTOR, "invalid label key"),
        ({}, api.Reason.SELECTING_ALL, "non-empty selector"),
        (
            {"matchLabels": {"nothing": "matches"}},
            api.Reason.NO_MACHINE_CONFIGS,
            "no MachineConfigs found matching selector nothing=matches",  # the selector named
        ),
    ],
    ids=["bad-key", "empty", "matches-nothing"],
)
def test_machine_config_selector_problems_are_conditions(
    cluster: Cluster, selector: dict[str, Any], reason: str, text: str
) -> None:
    cluster.setup(pools=[])
    cluster.client.resource(api.MACHINE_POOLS).create(pool_manifest("odd", 1, machineConfigSelector=selector))
    cluster.start_controller()
    condition = eventually(
        lambda: (c := cluster.condition("odd", api.POOL_RENDER_DEGRADED)).get("status") == "True" and c
    )
    assert condition["reason"] == reason and text in condition["message"]
    assert cluster.condition("odd", api.POOL_DEGRADED)["status"] == "True"
    eventually(lambda: cluster.events(reason, kind="MachinePool", name="odd"), what=f"{reason} event")
    assert cluster.target("odd") == ""


ADMITTED_SPEC_PROBLEMS = [
    pytest.param({"maxUnavailable": 0}, api.Reason.INVALID_MAX_UNAVAILABLE, "would never start", id="zero"),
    pytest.param({"maxUnavailable": "0%"}, api.Reason.INVALID_MAX_UNAVAILABLE, "would never start", id="0%"),
    pytest.param(
        {"machineSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
        api.Reason.INVALID_SELECTOR,
        "machineSelector",
        id="in-without-values",
    ),
    pytest.param(
        {"machineSelector": {}}, api.Reason.SELECTING_ALL, "selecting all nodes", id="empty-selector"
    ),
]
"""Pool specs any API server admits that the controller cannot act on."""


@pytest.mark.parametrize(("spec", "reason", "text"), ADMITTED_SPEC_PROBLEMS)
def test_pool_spec_problems_stop_the_rollout_with_a_condition_and_event(
    cluster: Cluster, spec: dict[str, Any], reason: str, text: str
) -> None:
    cluster.setup(pools=[], nodes={"worker": 2})
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("00-worker-base", "worker", {"/etc/a": "1"})
    )
    cluster.client.resource(api.MACHINE_POOLS).create(pool_manifest("worker", **spec))
    cluster.start_controller()
    cluster.start_daemons()
    cluster.wait_for_target("worker")
    degraded = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_DEGRADED)).get("status") == "True" and c
    )
    assert degraded["reason"] == reason and text in degraded["message"]
    updating = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_UPDATING)).get("reason") == reason and c
    )
    assert updating["status"] == "False"
    eventually(lambda: cluster.events(reason, kind="MachinePool", name="worker"), what=f"{reason} event")
    assert all(api.DESIRED_CONFIG_ANNOTATION not in cluster.annotations(f"worker-{i}") for i in (0, 1))
    # Fixing the spec lets the rollout go.
    cluster.client.resource(api.MACHINE_POOLS).patch(
        "worker",
        {
            "spec": {
                "maxUnavailable": 1,
                "machineSelector": {
                    "matchLabels": {"node-role.kubernetes.io/worker": ""},
                    "matchExpressions": None,
                },
            }
        },
    )
    cluster.wait_updated("worker", cluster.target("worker"), 2)
    assert cluster.condition("worker", api.POOL_DEGRADED)["status"] == "False"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("abc", "should match"),
        ("150%", "should match"),
        ("5", "should match"),
        (-1, "greater than or equal to 0"),
    ],
)
def test_the_crd_schema_refuses_a_bad_max_unavailable(cluster: Cluster, value: Any, text: str) -> None:
    """(Pools stored before the schema had these rules get a condition: see the unit tests of
    ``max_unavailable``.)"""
    with pytest.raises(ApiError) as refused:
        cluster.client.resource(api.MACHINE_POOLS).create(pool_manifest("worker", value))
    assert refused.value.code == 422 and "maxUnavailable" in str(refused.value) and text in str(refused.value)


@pytest.mark.parametrize(
    ("field", "selector"),
    [
        ("machineSelector", {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}),
        ("machineConfigSelector", {"matchExpressions": [{"key": "a", "operator": "in"}]}),
    ],
)
def test_the_api_server_refuses_an_unknown_selector_operator(
    cluster: Cluster, field: str, selector: dict[str, Any]
) -> None:
    with pytest.raises(ApiError) as refused:
        cluster.client.resource(api.MACHINE_POOLS).create(pool_manifest("odd", 1, **{field: selector}))
    assert refused.value.code == 422 and "operator" in str(refused.value)


def test_a_node_three_pools_select_is_named_on_each_and_a_custom_pool_takes_it_from_worker(
    cluster: Cluster,
) -> None:
    """worker-0 is selected by ``worker``, ``infra`` and ``gpu``: it belongs to none, and each of the
    three pools says so. Once ``gpu`` is gone, the custom pool ``infra`` carved out of the workers
    takes it (as OpenShift) and rolls its own config out to it."""
    cluster.setup(pools=[("worker", 1), ("infra", 1), ("gpu", 1)], nodes={"worker": 2})
    only_worker_0 = {
        "matchLabels": None,
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker-0"]}],
    }
    for pool in ("infra", "gpu"):
        cluster.client.resource(api.MACHINE_POOLS).patch(pool, {"spec": {"machineSelector": only_worker_0}})
    cluster.start_controller()
    cluster.start_daemons()
    for pool in ("worker", "infra", "gpu"):
        conflict = eventually(
            lambda p=pool: (c := cluster.condition(p, api.POOL_NODES_CONFLICT)).get("status") == "True" and c,
            what=f"the conflict on pool {pool}",
        )
        assert "node worker-0 is selected by 3 pools (gpu, infra, worker)" in conflict["message"]
        degraded = cluster.condition(pool, api.POOL_DEGRADED)
        assert degraded["status"] == "True" and degraded["reason"] == api.Reason.NODE_IN_MULTIPLE_POOLS
    eventually(lambda: cluster.events(api.Reason.NODE_IN_MULTIPLE_POOLS, kind="Node", name="worker-0"))
    workers = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", workers, 1)  # worker-1 goes on
    assert cluster.annotations("worker-0").get(api.DESIRED_CONFIG_ANNOTATION) is None
    cluster.client.resource(api.MACHINE_POOLS).delete("gpu")
    infra = cluster.wait_for_target("infra")
    cluster.wait_updated("infra", infra, 1)
    assert cluster.annotations("worker-0")[api.CURRENT_CONFIG_ANNOTATION] == infra != workers
    for pool in ("worker", "infra"):
        eventually(
            lambda p=pool: cluster.condition(p, api.POOL_DEGRADED).get("status") == "False",
            what=f"pool {pool} healthy again",
        )
        assert cluster.condition(pool, api.POOL_NODES_CONFLICT)["status"] == "False"
    assert cluster.status("worker")["machineCount"] == 1


def test_kubectl_get_machinepools_shows_counts_and_conditions(cluster: Cluster, mcc_emulator: Any) -> None:
    from tests.emulator.raw import Raw

    cluster.setup(pools=[("worker", 1)], nodes={"worker": 2})
    cluster.start_controller()
    cluster.start_daemons()
    target = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", target, 2)
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    path = f"/apis/{api.API_VERSION}/machinepools"
    code, _, table = Raw(mcc_emulator.url).request("GET", path, headers={"Accept": accept})
    assert code == 200 and table["kind"] == "Table"
    row = dict(zip((c["name"] for c in table["columnDefinitions"]), table["rows"][0]["cells"], strict=True))
    assert row["Config"] == target and row["Updated"] == "True" and row["Degraded"] == "False"
    assert (row["MachineCount"], row["ReadyMachineCount"], row["UpdatedMachineCount"]) == (2, 2, 2)
    assert row["UnavailableMachineCount"] == 0


def test_a_stopped_controller_leaves_no_event_thread_behind(cluster: Cluster) -> None:
    """A controller embedded in a longer-lived process ends the Event threads it started (and
    flushes its Events) when it stops."""
    before = set(threading.enumerate())
    cluster.start_controller()
    started = [t for t in threading.enumerate() if t not in before and t.name.startswith("event-")]
    assert started
    cluster.stop_controller()
    for thread in started:  # each ends once the broadcaster's shutdown has closed its queue
        thread.join(10)
    assert [t.name for t in started if t.is_alive()] == []

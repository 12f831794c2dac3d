"""UpdateController rollouts on the emulator with simulated daemons. Every rollout test watches the
pool's Nodes and checks the ``maxUnavailable`` bound after every single watch event."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.testing.machineconfig import DaemonOptions, create_nodes

from .fixtures import Cluster, eventually, machine_config, role_label


def _rollout(cluster: Cluster, pool: str, count: int, limit: int, version: str = "v1") -> str:
    """Apply a new MachineConfig to ``pool`` and wait until every node runs it; returns the target."""
    before = cluster.target(pool)
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config(f"50-{pool}-{version}", pool, {f"/etc/{pool}-app": f"{version}\n"})
    )
    target = cluster.wait_for_target(pool, different_from=before)
    cluster.wait_updated(pool, target, count)
    return target


@pytest.mark.parametrize(
    ("max_unavailable", "nodes", "limit"),
    [(1, 4, 1), (2, 6, 2), ("30%", 7, 2), ("50%", 5, 2), ("10%", 4, 1), ("100%", 3, 3)],
)
def test_rollout_never_exceeds_max_unavailable(
    cluster: Cluster, max_unavailable: Any, nodes: int, limit: int
) -> None:
    cluster.setup(pools=[("worker", max_unavailable)], nodes={"worker": nodes})
    cluster.start_controller()
    cluster.start_daemons()
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, nodes)
    monitor = cluster.monitor("worker", limit)
    target = _rollout(cluster, "worker", nodes, limit)
    assert monitor.settle().violations == []
    assert monitor.max_seen == limit, "the rollout should use all the parallelism it is allowed"
    assert monitor.events > nodes  # the check ran on every watch event, not once at the end
    assert monitor.done_while_cordoned == [], "the daemon uncordons before it reports done"
    assert {
        n: cluster.annotations(n)[api.CURRENT_CONFIG_ANNOTATION]
        for n in (x["metadata"]["name"] for x in cluster.nodes("worker"))
    } == {f"worker-{i}": target for i in range(nodes)}


def test_nodes_already_not_ready_count_against_the_bound(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 2)], nodes={"worker": 5})
    cluster.start_controller()
    cluster.start_daemons()
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 5)
    cluster.set_ready("worker-4", False)
    eventually(lambda: cluster.status("worker").get("unavailableMachines") == 1, what="NotReady seen")
    monitor = cluster.monitor("worker", 2)
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("50-worker-v1", "worker", {"/etc/a": "1"})
    )
    target = cluster.wait_for_target("worker", different_from=first)
    eventually(lambda: cluster.status("worker").get("updatingMachines") == 4, what="4 ready nodes updated")
    assert monitor.settle().violations == []
    assert monitor.max_seen == 2
    assert cluster.annotations("worker-4").get(api.DESIRED_CONFIG_ANNOTATION) == first  # never picked
    cluster.set_ready("worker-4", True)
    cluster.wait_updated("worker", target, 5)
    assert monitor.settle().violations == []


def test_status_shows_what_the_nodes_run_apart_from_the_target(cluster: Cluster) -> None:
    """``currentMachineConfig`` is the target; ``configuration.name`` (the ``Config`` column of
    ``kubectl get machinepools``) is the config every node completed, and moves on completion."""
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    cluster.start_controller()
    cluster.start_daemons(DaemonOptions(apply_seconds=0.3))
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    assert cluster.status("worker")["configuration"] == {"name": first}
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("50-worker-v1", "worker", {"/etc/a": "1"})
    )
    target = cluster.wait_for_target("worker", different_from=first)
    seen = []

    def done() -> bool:
        status = cluster.status("worker")
        seen.append((status["configuration"]["name"], status.get("updatingMachines")))
        return status["configuration"]["name"] == target

    eventually(done, what="the completed rollout")
    assert cluster.status("worker")["updatingMachines"] == 3
    assert (first, 1) in seen or (first, 2) in seen, "mid-rollout the nodes' config was shown"
    assert all(count == 3 for name, count in seen if name == target)
    assert cluster.status("worker")["degradedMachineCount"] == 0


def test_a_cordoned_node_counts_as_unavailable(cluster: Cluster) -> None:
    """``kubectl cordon`` on one node of a ``maxUnavailable: 1`` pool uses the one slot: the rollout
    waits for the uncordon instead of taking a second node out of scheduling."""
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    cluster.start_controller()
    cluster.start_daemons()
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    monitor = cluster.monitor("worker", 1)
    cluster.cordon("worker-2")
    eventually(lambda: cluster.status("worker").get("unavailableMachines") == 1, what="the cordon counted")
    updated = cluster.condition("worker", api.POOL_UPDATED)
    assert updated["status"] == "False", "a pool with an unavailable node is not Updated"
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("50-worker-v1", "worker", {"/etc/a": "1"})
    )
    target = cluster.wait_for_target("worker", different_from=first)
    eventually(
        lambda: target in cluster.condition("worker", api.POOL_UPDATING).get("message", ""),
        what="a pass over the new target",
    )
    desired = [cluster.annotations(f"worker-{i}")[api.DESIRED_CONFIG_ANNOTATION] for i in range(3)]
    assert desired == [first] * 3
    assert monitor.settle().violations == []
    cluster.cordon("worker-2", False)
    cluster.wait_updated("worker", target, 3)
    assert monitor.settle().violations == []
    assert monitor.max_seen == 1


def test_rebooting_nodes_are_not_ready_for_a_while_and_the_bound_holds(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    cluster.start_controller()
    cluster.start_daemons(DaemonOptions(apply_seconds=0.1, reboot_seconds=0.4))
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    monitor = cluster.monitor("worker", 1)
    target = _rollout(cluster, "worker", 3, 1)
    assert monitor.settle().violations == []
    assert monitor.seen_not_ready == {"worker-0", "worker-1", "worker-2"}, "each node rebooted"
    assert cluster.status("worker")["readyMachines"] == 3
    assert all(cluster.annotations(f"worker-{i}")[api.CURRENT_CONFIG_ANNOTATION] == target for i in range(3))
    eventually(
        lambda: cluster.events("Reboot", kind="Node", name="worker-2"), what="the daemon's Reboot Event"
    )


def test_paused_pool_renders_nothing_starts_nothing_and_says_why(cluster: Cluster) -> None:
    """A paused pool generates no new rendered config and updates no node (the original design's
    ``paused``: "This includes generating new desiredMachineConfig and update of machines"); the
    unpaused ``master`` pool, changed at the same moment, shows the controller did its passes."""
    cluster.setup(pools=[("worker", 2), ("master", 1)], nodes={"worker": 3, "master": 1})
    cluster.start_controller()
    cluster.start_daemons()
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    masters = cluster.wait_for_target("master")
    cluster.client.resource(api.MACHINE_POOLS).patch("worker", {"spec": {"paused": True}})
    updating = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_UPDATING)).get("reason") == api.Reason.PAUSED and c
    )
    assert updating["status"] == "False" and "not rendered until it is unpaused" in updating["message"]
    for pool in ("worker", "master"):
        cluster.client.resource(api.MACHINE_CONFIGS).create(
            machine_config(f"50-{pool}-v1", pool, {"/etc/a": "1"})
        )
    cluster.wait_updated("master", cluster.wait_for_target("master", different_from=masters), 1)
    assert cluster.target("worker") == first, "a paused pool generates no new config"
    assert all(cluster.annotations(f"worker-{i}")[api.DESIRED_CONFIG_ANNOTATION] == first for i in range(3))
    held = eventually(
        lambda: [
            e
            for e in cluster.events(api.Reason.PAUSED, name="worker")
            if "when it is unpaused" in e["message"]
        ],
        what="the Paused event naming the held config",
    )
    pending = held[0]["message"].split("; ")[1].split(" ")[0]
    assert pending.startswith("rendered-worker-") and cluster.get_config(pending) is None
    cluster.client.resource(api.MACHINE_POOLS).patch("worker", {"spec": {"paused": False}})
    target = cluster.wait_for_target("worker", different_from=first)
    assert target == pending
    cluster.wait_updated("worker", target, 3)


def test_degraded_node_holds_the_rollout_and_sets_degraded(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    cluster.start_controller()
    cluster.start_daemons(DaemonOptions(apply_seconds=0.1, degrade_paths=r"^/etc/broken"))
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    monitor = cluster.monitor("worker", 1)
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("50-worker-bad", "worker", {"/etc/broken.conf": "x"})
    )
    bad = cluster.wait_for_target("worker", different_from=first)
    degraded = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_DEGRADED)).get("status") == "True" and c
    )
    assert degraded["reason"] == api.Reason.NODE_DEGRADED and "worker-0" in degraded["message"]
    assert cluster.condition("worker", api.POOL_NODE_DEGRADED)["status"] == "True"
    eventually(lambda: cluster.status("worker").get("degradedMachineCount") == 1, what="degradedMachineCount")
    eventually(
        lambda: cluster.events(api.Reason.NODE_DEGRADED, kind="Node", name="worker-0"), what="node event"
    )
    # The rollout is held: no other node is started while worker-0 is degraded.
    assert [cluster.annotations(f"worker-{i}")[api.DESIRED_CONFIG_ANNOTATION] for i in (1, 2)] == [
        first,
        first,
    ]
    # Removing the bad config brings everyone (worker-0 included) to a good one.
    cluster.client.resource(api.MACHINE_CONFIGS).delete("50-worker-bad")
    good = cluster.wait_for_target("worker", different_from=bad)
    assert good == first  # same content, same rendered name
    cluster.wait_updated("worker", good, 3)
    assert cluster.condition("worker", api.POOL_DEGRADED)["status"] == "False"
    assert monitor.settle().violations == []


def test_config_changed_mid_rollout_goes_to_the_newest(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 4})
    cluster.start_controller()
    cluster.start_daemons(DaemonOptions(apply_seconds=0.3))
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 4)
    monitor = cluster.monitor("worker", 1)
    configs = cluster.client.resource(api.MACHINE_CONFIGS)
    configs.create(machine_config("50-worker-app", "worker", {"/etc/app": "v1"}))
    middle = cluster.wait_for_target("worker", different_from=first)
    eventually(lambda: cluster.status("worker").get("updatingMachines", 0) >= 1, what="one node on v1")
    configs.patch(
        "50-worker-app",
        {"spec": {"config": machine_config("x", "worker", {"/etc/app": "v2"})["spec"]["config"]}},
    )
    newest = cluster.wait_for_target("worker", different_from=middle)
    cluster.wait_updated("worker", newest, 4)
    assert cluster.get_config(middle) is not None, "old rendered configs are kept"
    assert monitor.settle().violations == []


def test_a_node_that_joins_mid_rollout_gets_the_current_config(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    cluster.start_controller()
    cluster.start_daemons(DaemonOptions(apply_seconds=0.3))
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    monitor = cluster.monitor("worker", 1)
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("50-worker-app", "worker", {"/etc/app": "1"})
    )
    target = cluster.wait_for_target("worker", different_from=first)
    create_nodes(cluster.client, ["worker-new"], role_label("worker"))
    cluster.wait_updated("worker", target, 4)
    assert cluster.annotations("worker-new")[api.CURRENT_CONFIG_ANNOTATION] == target
    assert monitor.settle().violations == []


def test_controller_restart_mid_rollout_keeps_the_bound(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 2)], nodes={"worker": 6})
    cluster.start_controller()
    cluster.start_daemons(DaemonOptions(apply_seconds=0.4))
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 6)
    monitor = cluster.monitor("worker", 2)
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        machine_config("50-worker-app", "worker", {"/etc/app": "1"})
    )
    target = cluster.wait_for_target("worker", different_from=first)
    eventually(lambda: cluster.status("worker").get("unavailableMachines") == 2, what="two nodes updating")
    cluster.stop_controller()
    cluster.start_controller()
    cluster.wait_updated("worker", target, 6)
    assert monitor.settle().violations == []
    assert monitor.max_seen == 2


def test_two_pools_roll_out_independently(cluster: Cluster) -> None:
    cluster.setup(pools=[("master", 1), ("worker", 2)], nodes={"master": 2, "worker": 4})
    cluster.start_controller()
    cluster.start_daemons()
    masters = cluster.wait_for_target("master")
    workers = cluster.wait_for_target("worker")
    cluster.wait_updated("master", masters, 2)
    cluster.wait_updated("worker", workers, 4)
    assert masters.startswith("rendered-master-") and workers.startswith("rendered-worker-")
    rendered = cluster.get_config(workers)
    assert rendered is not None
    paths = {f["path"] for f in rendered["spec"]["config"]["storage"]["files"]}
    assert {
        "/etc/kubernetes/kubelet.conf",
        "/etc/worker-release",
    } <= paths and "/etc/master-release" not in paths
    eventually(lambda: cluster.events(api.Reason.COMPLETED, kind="MachinePool", name="worker"))
    eventually(lambda: cluster.events("ConfigApplied", kind="Node", name="worker-0"), what="daemon Event")
    eventually(lambda: cluster.events(api.Reason.SET_DESIRED_CONFIG, kind="Node", name="worker-0"))

"""The UpdateController one pass at a time, on the emulator with a fake clock: the controller's
informers run, its workers do not (each test calls the pass, or reads what its handlers put in
the queue). What a pass targets, what it writes to the pool's status and when, its Events, and
which Node and MachinePool changes bring a pass at all."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mcm.machineconfig import api
from mcm.machineconfig.base import CONFLICT_RETRY
from mcm.machineconfig.controller import MachineConfigController
from mcm.machineconfig.metrics import PoolMetrics
from mcm.machineconfig.update import STATUS_INTERVAL, _node_changed, _pool_changed
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.resources import EVENTS, NODES
from mcm.runtime.clock import FakeClock
from mcm.runtime.worker import Result
from mcm.testing.machineconfig import create_nodes

from .fixtures import eventually, pool_manifest, role_label

T = "rendered-worker-1"
OLD = "rendered-worker-0"
START = dt.datetime(2026, 12, 7, 12, 0, 0, tzinfo=dt.UTC)


class Harness:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.clock = FakeClock(START)
        self.registry = CollectorRegistry()
        self.mcc = MachineConfigController(client, clock=self.clock, metrics=PoolMetrics(self.registry))
        self.update = self.mcc.update
        self.mcc.ctx.informers.start(self.mcc.ctx.stop)
        eventually(self.mcc.has_synced, what="caches")

    # -- the world
    def pool(self, name: str = "worker", max_unavailable: Any = 1, **spec: Any) -> None:
        self.client.resource(api.MACHINE_POOLS).create(pool_manifest(name, max_unavailable, **spec))
        self.wait_pool(name)

    def target(self, name: str, target: str, **status: Any) -> None:
        pools = self.client.resource(api.MACHINE_POOLS)
        current = pools.get(name)
        pools.update_status(
            {**current, "status": {**api.status_of(current), "currentMachineConfig": target, **status}}
        )
        self.wait_pool(name)

    def wait_pool(self, name: str) -> None:
        version = self.client.resource(api.MACHINE_POOLS).get(name)["metadata"]["resourceVersion"]
        eventually(
            lambda: (
                (p := self.update.pools.get(name)) is not None
                and int(p["metadata"]["resourceVersion"]) >= int(version)
            ),
            what=f"pool {name} in the cache",
        )

    def nodes(self, names: list[str], role: str = "worker", **notes: str) -> None:
        create_nodes(self.client, names, role_label(role))
        for name in names:
            if notes:
                self.annotate(name, **notes)
            else:
                self.wait_node(name)

    def annotate(self, name: str, **notes: str | None) -> None:
        keys = {
            "desired": api.DESIRED_CONFIG_ANNOTATION,
            "current": api.CURRENT_CONFIG_ANNOTATION,
            "state": api.STATE_ANNOTATION,
            "reason": api.REASON_ANNOTATION,
        }
        patch = {keys.get(k, k): v for k, v in notes.items()}
        self.client.resource(NODES).patch(name, {"metadata": {"annotations": patch}})
        self.wait_node(name)

    def done(self, name: str, config: str) -> None:
        self.annotate(name, desired=config, current=config, state=api.STATE_DONE)

    def wait_node(self, name: str) -> None:
        version = self.client.resource(NODES).get(name)["metadata"]["resourceVersion"]
        eventually(
            lambda: (
                (n := self.update.nodes.get(name)) is not None
                and int(n["metadata"]["resourceVersion"]) >= int(version)
            ),
            what=f"node {name} in the cache",
        )
        # what the Node handler does, maybe a moment after the cache has the node
        self.update.ledger.touch(name)

    # -- what happened
    def desired(self, name: str) -> str:
        return api.annotations_of(self.client.resource(NODES).get(name)).get(
            api.DESIRED_CONFIG_ANNOTATION, ""
        )

    def status(self, name: str = "worker") -> dict[str, Any]:
        return api.status_of(self.client.resource(api.MACHINE_POOLS).get(name))

    def conditions(self, name: str = "worker") -> dict[str, tuple[str, str, str]]:
        return {
            c["type"]: (c["status"], c["reason"], c["message"])
            for c in self.status(name).get("conditions", [])
        }

    def events(self, reason: str, kind: str | None = None) -> list[tuple[str, str, str, str]]:
        return sorted(
            (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"])
            for e in self.client.resource(EVENTS).list(namespace="default")["items"]
            if e.get("reason") == reason and (kind is None or e["involvedObject"]["kind"] == kind)
        )

    def queued(self) -> set[str]:
        """Drain the update queue (no worker takes from it): the pools enqueued so far."""
        found = set()
        while self.update.queue.len():
            item, _ = self.update.queue.get()
            if item is not None:
                found.add(item)
                self.update.queue.done(item)
        return found

    def metric(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def close(self) -> None:
        self.mcc.ctx.stop.set()
        self.update.queue.shut_down()
        self.mcc.ctx.informers.shutdown()
        self.mcc.ctx.broadcaster.shutdown()


@pytest.fixture
def h(client: ClusterClient) -> Iterator[Harness]:
    harness = Harness(client)
    try:
        yield harness
    finally:
        harness.close()


def workers(n: int) -> list[str]:
    return [f"worker-{i}" for i in range(n)]


# --- what a pass targets ----------------------------------------------------------------------------


def test_a_pass_targets_as_many_outdated_nodes_as_the_bound_allows_in_name_order(h: Harness) -> None:
    h.pool(max_unavailable=2)
    h.nodes(workers(5))
    for name in workers(5):
        h.done(name, OLD)
    h.target("worker", T)
    assert h.update.sync("worker") is None
    assert [h.desired(n) for n in workers(5)] == [T, T, OLD, OLD, OLD]
    status = h.status()
    assert (status["machineCount"], status["updatingMachines"], status["unavailableMachines"]) == (5, 0, 2)
    assert h.conditions()[api.POOL_UPDATING] == ("True", "", f"All nodes are updating to MachineConfig {T}")
    for name in ("worker-0", "worker-1"):
        h.wait_node(name)
    assert h.update.sync("worker") is None, "the bound is used up: nothing more"
    assert [h.desired(n) for n in workers(5)] == [T, T, OLD, OLD, OLD]
    eventually(lambda: len(h.events(api.Reason.SET_DESIRED_CONFIG)) == 3, what="Events")
    assert h.events(api.Reason.SET_DESIRED_CONFIG) == [
        ("MachinePool", "worker", "Normal", f"Set target for 2 nodes to MachineConfig {T}"),
        ("Node", "worker-0", "Normal", f"Targeted node to MachineConfig {T}"),
        ("Node", "worker-1", "Normal", f"Targeted node to MachineConfig {T}"),
    ]


def test_one_node_targeted_is_named_on_the_pool(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(2))
    h.target("worker", T)
    h.update.sync("worker")
    assert [h.desired(n) for n in workers(2)] == [T, ""]
    eventually(lambda: h.events(api.Reason.SET_DESIRED_CONFIG, "MachinePool"), what="Event")
    assert h.events(api.Reason.SET_DESIRED_CONFIG, "MachinePool") == [
        ("MachinePool", "worker", "Normal", f"Targeted node worker-0 to MachineConfig {T}")
    ]


@pytest.mark.parametrize(
    ("spec", "target"),
    [({"paused": True}, T), ({}, "")],
    ids=["paused", "no-rendered-config"],
)
def test_a_paused_pool_or_one_without_a_target_starts_nothing(
    h: Harness, spec: dict[str, Any], target: str
) -> None:
    h.pool(max_unavailable=3, **spec)
    h.nodes(workers(2))
    if target:
        h.target("worker", target)
    assert h.update.sync("worker") is None
    assert [h.desired(n) for n in workers(2)] == ["", ""]
    assert h.status()["machineCount"] == 2, "the status still follows the nodes"


def test_a_bad_max_unavailable_starts_nothing_and_says_why(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(2))
    pools = h.client.resource(api.MACHINE_POOLS)
    pools.patch("worker", {"spec": {"maxUnavailable": 0}})
    h.wait_pool("worker")
    h.target("worker", T)
    h.update.sync("worker")
    assert [h.desired(n) for n in workers(2)] == ["", ""]
    assert h.conditions()[api.POOL_DEGRADED][:2] == ("True", api.Reason.INVALID_MAX_UNAVAILABLE)


def test_a_node_that_changed_since_it_was_read_is_not_targeted_and_the_pass_comes_back(h: Harness) -> None:
    h.pool(max_unavailable=2)
    h.nodes(workers(2))
    h.target("worker", T)
    # the pass decides from a copy of worker-1 whose version the server no longer has
    stale = h.update.nodes.get("worker-1")
    assert stale is not None
    stale = {**stale, "metadata": {**stale["metadata"], "resourceVersion": "99999999"}}
    h.update.nodes.record(stale)
    h.update.ledger.touch("worker-1")
    assert h.update.sync("worker") == Result.after(CONFLICT_RETRY)
    assert [h.desired(n) for n in workers(2)] == [T, ""]


def test_a_pass_trusts_its_own_writes_over_a_cache_that_lags(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(2))
    for name in workers(2):
        h.done(name, OLD)
    h.target("worker", T)
    monkeypatch.setattr(h.update.nodes.lister.indexer, "update", lambda _obj: None)  # a watch that lags
    assert h.update.sync("worker") is None
    assert h.status()["unavailableMachines"] == 1, "the node it just targeted counts at once"
    h.wait_pool("worker")
    assert h.update.sync("worker") is None, "nothing to retry: worker-0 is known to be targeted"
    assert [h.desired(n) for n in workers(2)] == [T, OLD]


def test_a_degraded_node_is_retargeted_without_using_the_bound(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(3))
    h.done("worker-1", OLD)
    h.done("worker-2", OLD)
    h.annotate(
        "worker-0", desired=OLD, current="rendered-worker-00", state=api.STATE_DEGRADED, reason="disk full"
    )
    h.target("worker", T)
    h.update.sync("worker")
    assert [h.desired(n) for n in workers(3)] == [T, OLD, OLD], "the degraded node moves, no other starts"


# --- degraded nodes ---------------------------------------------------------------------------------


def test_a_degraded_node_is_warned_about_once_and_again_when_it_degrades_anew(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(2))
    h.target("worker", T)
    h.annotate("worker-0", desired=T, current=OLD, state=api.STATE_DEGRADED, reason="cannot write /etc/x")
    h.annotate("worker-1", desired=T, current=OLD, state=api.STATE_DEGRADED)
    h.update.sync("worker")
    h.update.sync("worker")
    first = f"Node worker-0 cannot apply MachineConfig {T}: cannot write /etc/x"
    second = f"Node worker-1 cannot apply MachineConfig {T}: no reason given"
    expected = [
        ("MachinePool", "worker", "Warning", first),
        ("MachinePool", "worker", "Warning", second),
        ("Node", "worker-0", "Warning", first),
        ("Node", "worker-1", "Warning", second),
    ]
    eventually(lambda: len(h.events(api.Reason.NODE_DEGRADED)) >= 4, what="Warnings")
    assert h.events(api.Reason.NODE_DEGRADED) == expected
    assert h.conditions()[api.POOL_NODE_DEGRADED][0] == "True"
    assert h.status()["degradedMachineCount"] == 2
    h.annotate("worker-0", state=api.STATE_WORKING, reason=None)
    h.update.sync("worker")
    h.annotate("worker-0", state=api.STATE_DEGRADED, reason="again")
    h.update.sync("worker")
    again = f"Node worker-0 cannot apply MachineConfig {T}: again"
    eventually(lambda: len(h.events(api.Reason.NODE_DEGRADED)) >= 6, what="the second Warnings")
    assert h.events(api.Reason.NODE_DEGRADED) == sorted(
        [*expected, ("MachinePool", "worker", "Warning", again), ("Node", "worker-0", "Warning", again)]
    )


def test_a_node_two_pools_claim_is_warned_about_once(h: Harness) -> None:
    h.pool("infra", max_unavailable=1)
    h.pool("gpu", max_unavailable=1)
    create_nodes(h.client, ["both-0"], {**role_label("infra"), **role_label("gpu")})
    h.wait_node("both-0")
    h.target("infra", T)
    for i in range(3):
        h.annotate("both-0", note=str(i))  # a change of the node: read again, still claimed by two
        h.update.sync("infra")
        h.update.sync("gpu")
    why = "node both-0 is selected by 2 pools (gpu, infra); it belongs to none"
    assert h.status("infra")["machineCount"] == 0
    assert h.conditions("infra")[api.POOL_NODES_CONFLICT] == ("True", api.Reason.NODE_IN_MULTIPLE_POOLS, why)
    # a later Event of the same recorder as a barrier: Events are sent in order
    h.nodes(["infra-only"], role="infra")
    h.update.sync("infra")
    eventually(lambda: h.events(api.Reason.SET_DESIRED_CONFIG, "MachinePool"), what="the barrier")
    warnings = [
        e
        for e in h.client.resource(EVENTS).list(namespace="default")["items"]
        if e.get("reason") == api.Reason.NODE_IN_MULTIPLE_POOLS
    ]
    assert [(w["involvedObject"]["name"], w["type"], w["message"], w.get("count", 1)) for w in warnings] == [
        ("both-0", "Warning", why, 1)
    ]


# --- the status and when it is written --------------------------------------------------------------


def test_a_change_of_counts_alone_is_written_at_most_every_interval(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(3))
    for name in workers(3):
        h.done(name, OLD)
    h.target("worker", T)
    h.update.sync("worker")  # writes the status at once (new target)
    version = h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"]
    assert h.status()["unavailableMachines"] == 1
    h.wait_pool("worker")
    h.client.resource(NODES).patch("worker-2", {"spec": {"unschedulable": True}})  # counts only
    h.wait_node("worker-2")
    h.clock.step(0.1)
    result = h.update.sync("worker")
    assert result == Result.after(pytest.approx(STATUS_INTERVAL - 0.1))
    assert h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"] == version
    assert h.update.sync("worker") == Result.after(pytest.approx(STATUS_INTERVAL - 0.1)), (
        "same inputs, same wait"
    )
    h.clock.step(STATUS_INTERVAL)
    assert h.update.sync("worker") is None
    assert h.status()["unavailableMachines"] == 2
    h.wait_pool("worker")
    assert h.update.sync("worker") is None
    assert h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"] != version


def test_a_change_of_conditions_is_written_at_once(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(1))
    h.done("worker-0", OLD)
    h.target("worker", T)
    h.update.sync("worker")
    h.wait_pool("worker")
    h.annotate("worker-0", state=api.STATE_DEGRADED, reason="broken")
    h.clock.step(0.1)
    assert h.update.sync("worker") is None
    assert h.conditions()[api.POOL_NODE_DEGRADED][0] == "True"


def test_an_unchanged_status_is_not_written_again(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(1))
    h.done("worker-0", T)
    h.target("worker", T)
    h.update.sync("worker")
    h.wait_pool("worker")
    version = h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"]
    h.clock.step(10)
    assert h.update.sync("worker") is None
    assert h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"] == version
    eventually(lambda: h.events(api.Reason.COMPLETED), what="Completed")
    assert h.events(api.Reason.COMPLETED) == [
        ("MachinePool", "worker", "Normal", f"Pool worker has completed update to MachineConfig {T}")
    ]


def test_the_rollout_duration_is_observed_once_from_the_first_busy_pass(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(1))
    h.done("worker-0", OLD)
    h.target("worker", T)
    h.update.sync("worker")
    assert h.metric("mcc_machinepool_rollout_duration_seconds_count", pool="worker") in (None, 0.0)
    h.wait_node("worker-0")
    h.clock.step(42)
    h.done("worker-0", T)
    h.wait_pool("worker")
    h.update.sync("worker")
    assert h.metric("mcc_machinepool_rollout_duration_seconds_count", pool="worker") == 1
    assert h.metric("mcc_machinepool_rollout_duration_seconds_sum", pool="worker") == pytest.approx(42)
    h.wait_pool("worker")
    h.clock.step(5)
    h.update.sync("worker")
    assert h.metric("mcc_machinepool_rollout_duration_seconds_count", pool="worker") == 1, "observed once"


def test_a_deleted_pool_is_forgotten(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(workers(1))
    h.target("worker", T)
    h.update.sync("worker")
    assert h.metric("mcc_machinepool_machines", pool="worker", state="total") == 1
    h.client.resource(api.MACHINE_POOLS).delete("worker")
    eventually(lambda: h.update.pools.get("worker") is None, what="the pool gone from the cache")
    assert h.update.sync("worker") is None
    assert h.metric("mcc_machinepool_machines", pool="worker", state="total") is None


# --- which changes bring a pass -----------------------------------------------------------------------


NODE_CHANGES: list[tuple[str, Callable[[ClusterClient], None], bool]] = [
    (
        "other-annotation",
        lambda c: c.resource(NODES).patch("worker-0", {"metadata": {"annotations": {"x": "y"}}}),
        False,
    ),
    (
        "desired-config",
        lambda c: c.resource(NODES).patch(
            "worker-0", {"metadata": {"annotations": {api.DESIRED_CONFIG_ANNOTATION: T}}}
        ),
        True,
    ),
    (
        "reason",
        lambda c: c.resource(NODES).patch(
            "worker-0", {"metadata": {"annotations": {api.REASON_ANNOTATION: "r"}}}
        ),
        True,
    ),
    ("label", lambda c: c.resource(NODES).patch("worker-0", {"metadata": {"labels": {"zone": "a"}}}), True),
    ("cordon", lambda c: c.resource(NODES).patch("worker-0", {"spec": {"unschedulable": True}}), True),
    (
        "not-ready",
        lambda c: c.resource(NODES).update_status(
            {
                **(n := c.resource(NODES).get("worker-0")),
                "status": {**n["status"], "conditions": [{"type": "Ready", "status": "False"}]},
            }
        ),
        True,
    ),
    (
        "disk-pressure",
        lambda c: c.resource(NODES).update_status(
            {
                **(n := c.resource(NODES).get("worker-0")),
                "status": {
                    **n["status"],
                    "conditions": [*n["status"]["conditions"], {"type": "DiskPressure", "status": "True"}],
                },
            }
        ),
        True,
    ),
    (
        "capacity-only",
        lambda c: c.resource(NODES).update_status(
            {**(n := c.resource(NODES).get("worker-0")), "status": {**n["status"], "capacity": {"cpu": "4"}}}
        ),
        False,
    ),
]


@pytest.mark.parametrize(
    ("change", "relevant"), [c[1:] for c in NODE_CHANGES], ids=[c[0] for c in NODE_CHANGES]
)
def test_a_node_change_matters_to_its_pool_only_when_it_changes_what_a_pass_reads(
    h: Harness, change: Callable[[ClusterClient], None], relevant: bool
) -> None:
    """Judged on the informer's old and new copies (the handler enqueues by it; a change that
    matters is also seen enqueuing the pool)."""
    h.pool("worker", max_unavailable=1)
    h.nodes(["worker-0"])
    old = h.update.nodes.get("worker-0")
    assert old is not None
    change(h.client)
    h.wait_node("worker-0")
    new = h.update.nodes.get("worker-0")
    assert new is not None
    assert _node_changed(old, new) is relevant
    if relevant:
        seen: set[str] = set()
        eventually(lambda: bool(seen.update(h.queued())) or "worker" in seen, what="worker enqueued")


def test_a_new_or_deleted_node_enqueues_its_pool(h: Harness) -> None:
    h.pool("worker", max_unavailable=1)
    h.pool("infra", max_unavailable=1)
    h.nodes(["infra-0"], role="infra")
    h.queued()
    create_nodes(h.client, ["worker-0"], role_label("worker"))
    eventually(lambda: "worker" in h.queued(), what="worker enqueued on a new node")
    h.client.resource(NODES).delete("worker-0")
    eventually(lambda: "worker" in h.queued(), what="worker enqueued on a deleted node")


POOL_CHANGES: list[tuple[str, Callable[[ClusterClient], None], set[str]]] = [
    (
        "counts-written",
        lambda c: c.resource(api.MACHINE_POOLS).update_status(
            {
                **(p := c.resource(api.MACHINE_POOLS).get("worker")),
                "status": {**p.get("status", {}), "machineCount": 9},
            }
        ),
        set(),
    ),
    (
        "target",
        lambda c: c.resource(api.MACHINE_POOLS).update_status(
            {
                **c.resource(api.MACHINE_POOLS).get("worker"),
                "status": {"currentMachineConfig": "rendered-x"},
            }
        ),
        {"worker"},
    ),
    (
        "render-degraded",
        lambda c: c.resource(api.MACHINE_POOLS).update_status(
            {
                **c.resource(api.MACHINE_POOLS).get("worker"),
                "status": {
                    "conditions": [
                        {"type": api.POOL_RENDER_DEGRADED, "status": "True", "reason": "R", "message": "m"}
                    ]
                },
            }
        ),
        {"worker"},
    ),
    ("spec", lambda c: c.resource(api.MACHINE_POOLS).patch("worker", {"spec": {"paused": True}}), {"worker"}),
    (
        "selector",
        lambda c: c.resource(api.MACHINE_POOLS).patch(
            "worker", {"spec": {"machineSelector": {"matchLabels": {"node-role.kubernetes.io/other": ""}}}}
        ),
        {"worker", "infra"},
    ),
    (
        "labels-only",
        lambda c: c.resource(api.MACHINE_POOLS).patch("worker", {"metadata": {"labels": {"x": "y"}}}),
        set(),
    ),
    ("deleted", lambda c: c.resource(api.MACHINE_POOLS).delete("worker"), {"worker", "infra"}),
]


@pytest.mark.parametrize(
    ("change", "enqueued"), [c[1:] for c in POOL_CHANGES], ids=[c[0] for c in POOL_CHANGES]
)
def test_a_pool_change_enqueues_what_it_may_move(
    h: Harness, change: Callable[[ClusterClient], None], enqueued: set[str]
) -> None:
    """What is enqueued is seen; what is not is judged on the informer's old and new copies."""
    h.pool("worker", max_unavailable=1)
    h.pool("infra", max_unavailable=1)
    old = h.update.pools.get("worker")
    assert old is not None
    change(h.client)
    if enqueued:
        seen: set[str] = set()
        eventually(lambda: bool(seen.update(h.queued())) or seen >= enqueued, what=f"{enqueued} enqueued")
        return
    h.wait_pool("worker")
    new = h.update.pools.get("worker")
    assert new is not None
    assert api.spec_of(old).get("machineSelector") == api.spec_of(new).get("machineSelector")
    assert not _pool_changed(old, new)


def test_a_new_pool_enqueues_every_pool(h: Harness) -> None:
    h.pool("worker", max_unavailable=1)
    h.queued()
    h.pool("infra", max_unavailable=1)
    eventually(lambda: h.update.queue.len() >= 2, what="both pools")
    assert h.queued() == {"worker", "infra"}

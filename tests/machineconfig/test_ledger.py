"""The UpdateController's incremental ledger agrees with counting every node from scratch."""

from __future__ import annotations

import random
from typing import Any

from mcm.machineconfig import api
from mcm.machineconfig.ledger import NodeLedger
from mcm.machineconfig.nodes import (
    DEGRADED,
    OUTDATED,
    UPDATING,
    candidate_order,
    desired_config,
    is_ready,
    is_unavailable,
    node_phase,
)
from mcm.machineconfig.pools import PoolIndex, nodes_of_pool
from mcm.machineconfig.status import count_nodes
from mcm.testing.machineconfig import node_manifest

Obj = dict[str, Any]
ROLES = ("worker", "infra", "master")


def pool(name: str, role: str | None = None) -> Obj:
    selector = {"matchLabels": {f"role/{role or name}": ""}}
    return {"metadata": {"name": name}, "spec": {"machineSelector": selector}}


class Nodes:
    """A node store with increasing resource versions, as the ledger's read function sees it."""

    def __init__(self) -> None:
        self.items: dict[str, Obj] = {}
        self.version = 100

    def put(
        self,
        name: str,
        roles: list[str],
        current: str,
        desired: str,
        state: str,
        ready: bool,
        cordoned: bool = False,
        pressure: bool = False,
    ) -> Obj:
        self.version += 1
        manifest = node_manifest(name, {f"role/{r}": "" for r in roles}, ready=ready)
        if cordoned:
            manifest["spec"]["unschedulable"] = True
        if pressure:
            manifest["status"]["conditions"].append({"type": "DiskPressure", "status": "True"})
        manifest["metadata"]["resourceVersion"] = str(self.version)
        manifest["metadata"]["creationTimestamp"] = f"2020-01-{1 + int(name[1:]) % 28:02d}T00:00:00Z"
        annotations = {
            api.CURRENT_CONFIG_ANNOTATION: current,
            api.DESIRED_CONFIG_ANNOTATION: desired,
            api.STATE_ANNOTATION: state,
            api.REASON_ANNOTATION: f"reason of {name}" if state == api.STATE_DEGRADED else "",
        }
        manifest["metadata"]["annotations"] = {k: v for k, v in annotations.items() if v}
        self.items[name] = manifest
        return manifest


def from_scratch(pools: list[Obj], nodes: Nodes, name: str, target: str, limit: int) -> tuple[Any, list[str]]:
    """What the UpdateController computed on every pass before the ledger: counts and candidates."""
    the_pool = next(p for p in pools if api.name_of(p) == name)
    mine, contested = nodes_of_pool(the_pool, PoolIndex(pools), nodes.items.values())
    whys = [why for _, why in sorted(contested, key=lambda item: api.name_of(item[0]))]
    counts = count_nodes(sorted(mine, key=api.name_of), target, contested=whys)
    phases = {api.name_of(n): node_phase(n, target) for n in mine}
    unavailable = [n for n in mine if is_unavailable(n, phases[api.name_of(n)])]
    busy = [n for n in mine if phases[api.name_of(n)] in (UPDATING, DEGRADED)]
    retarget = sorted((n for n in busy if desired_config(n) != target and is_ready(n)), key=candidate_order)
    outdated = sorted(
        (n for n in mine if phases[api.name_of(n)] == OUTDATED and n not in unavailable), key=candidate_order
    )
    chosen = retarget + outdated[: max(0, limit - len(unavailable))]
    return counts, [api.name_of(n) for n in chosen]


def test_the_ledger_follows_random_changes_like_a_full_recount() -> None:
    rng = random.Random(28)
    nodes = Nodes()
    pools = [pool("worker"), pool("infra"), pool("gpu", "master")]
    ledger = NodeLedger(nodes.items.get, lambda: list(nodes.items))
    index = PoolIndex(pools)
    targets = {"worker": "w1", "infra": "i1", "gpu": "w1"}

    def random_node(name: str) -> None:
        roles = rng.sample(ROLES, rng.randint(0, 2))
        configs = ["w0", "w1", "w2", "i1", ""]
        state = rng.choice([api.STATE_DONE, api.STATE_DONE, api.STATE_WORKING, api.STATE_DEGRADED, ""])
        cordoned, pressure = rng.random() < 0.15, rng.random() < 0.05
        nodes.put(
            name,
            roles,
            rng.choice(configs),
            rng.choice(configs),
            state,
            rng.random() > 0.2,
            cordoned,
            pressure,
        )

    contested = 0
    for i in range(60):
        random_node(f"n{i}")
    for step in range(400):
        action = rng.random()
        if action < 0.75:  # nodes change (and are touched, as the informer handler does)
            for _ in range(rng.randint(1, 4)):
                name = f"n{rng.randrange(70)}"
                if rng.random() < 0.1:
                    nodes.items.pop(name, None)
                else:
                    random_node(name)
                ledger.touch(name)
        elif action < 0.85:  # a pool's selector changes: a new index
            pools = [pool("worker"), pool("infra", rng.choice(["infra", "master"])), pool("gpu", "master")]
            index = PoolIndex(pools)
        else:
            targets[rng.choice(list(targets))] = rng.choice(["w1", "w2", "i1"])
        ledger.refresh(index)
        for name, target in targets.items():
            ledger.retarget(name, target)
            limit = rng.randint(1, 8)
            counts, chosen = from_scratch(pools, nodes, name, target, limit)
            assert ledger.counts(name) == counts, f"step {step}, pool {name}"
            assert [api.name_of(n) for n in ledger.candidates(name, limit)] == chosen, f"step {step}"
            assert ledger.size(name) == counts.total
            contested += len(counts.contested)
    assert contested > 0, "nodes claimed by several pools were part of the test"


def test_an_untouched_change_waits_for_its_touch_and_an_older_copy_never_wins() -> None:
    nodes = Nodes()
    ledger = NodeLedger(nodes.items.get, lambda: list(nodes.items))
    index = PoolIndex([pool("worker")])
    newer = nodes.put("n1", ["worker"], "a", "a", api.STATE_DONE, True)
    ledger.refresh(index)
    ledger.retarget("worker", "b")
    assert ledger.counts("worker").updated == 0 and ledger.candidates("worker", 1) == [newer]
    nodes.put("n1", ["worker"], "b", "b", api.STATE_DONE, True)
    ledger.refresh(index)
    assert ledger.counts("worker").updated == 0  # not touched: not re-read
    ledger.touch("n1")
    ledger.refresh(index)
    assert ledger.counts("worker").updated == 1
    newest = nodes.items["n1"]
    nodes.items["n1"] = {**newer}  # the read function goes back to an older version
    ledger.refresh(index, ["n1"])
    assert ledger.counts("worker").updated == 1 and ledger.candidates("worker", 1) == []
    nodes.items["n1"] = newest
    del nodes.items["n1"]
    ledger.touch("n1")
    ledger.refresh(index)
    assert ledger.counts("worker").total == 0


def test_a_new_index_re_reads_every_node_and_a_forgotten_pool_has_no_nodes() -> None:
    nodes = Nodes()
    ledger = NodeLedger(nodes.items.get, lambda: list(nodes.items))
    nodes.put("n1", ["worker", "infra"], "a", "a", api.STATE_DONE, True)
    ledger.refresh(PoolIndex([pool("worker")]))
    assert ledger.size("worker") == 1
    contested = ledger.refresh(PoolIndex([pool("worker"), pool("infra"), pool("other", "infra")]))
    assert [e.name for e in contested] == ["n1"] and "selected by 3 pools" in contested[0].contested
    assert ledger.size("worker") == 0
    ledger.refresh(PoolIndex([pool("worker"), pool("infra")]))
    assert (ledger.size("worker"), ledger.size("infra")) == (0, 1)
    ledger.forget_pool("infra")
    assert ledger.size("infra") == 0


def test_only_a_degraded_node_is_degraded_and_a_deleted_one_no_longer() -> None:
    nodes = Nodes()
    ledger = NodeLedger(nodes.items.get, lambda: list(nodes.items))
    index = PoolIndex([pool("worker")])
    nodes.put("n1", ["worker"], "a", "b", api.STATE_DEGRADED, True)
    nodes.put("n2", ["worker"], "a", "a", api.STATE_DONE, True)
    ledger.refresh(index)
    ledger.retarget("worker", "a")
    assert [ledger.is_degraded(n) for n in ("n1", "n2", "n3")] == [True, False, False]
    del nodes.items["n1"]
    ledger.touch("n1")
    ledger.refresh(index)
    assert not ledger.is_degraded("n1")
    assert [api.name_of(n) for n in ledger.degraded("worker")] == []


def test_a_pool_forgotten_and_back_under_its_name_finds_its_nodes_again() -> None:
    """A pool deleted and created again before the pool index changes: its nodes are counted
    again at the next refresh, without waiting for each node to change."""
    nodes = Nodes()
    ledger = NodeLedger(nodes.items.get, lambda: list(nodes.items))
    index = PoolIndex([pool("worker")])
    nodes.put("n1", ["worker"], "a", "a", api.STATE_DONE, True)
    ledger.refresh(index)
    ledger.forget_pool("worker")
    assert ledger.size("worker") == 0
    ledger.refresh(index)
    assert ledger.size("worker") == 1

"""Machine indices (node label, MachineClass) answer exactly what a scan of the cache answers."""

from __future__ import annotations

import dataclasses
from typing import Any

from mcm.apis.machine import constants as c
from mcm.controller.indexes import MACHINE_INDEXERS, count_of_class, machines_by_node, machines_of_class
from mcm.controller.node import machine_for_node
from mcm.runtime.cache.keys import NAMESPACE_INDEX, meta_namespace_index_func
from mcm.runtime.cache.listers import Lister, NamespaceLister
from mcm.runtime.cache.store import Indexer

from .builders import mk_machine
from .fakes import NS, World, make_world


def _names(machines: list[Any]) -> list[str]:
    return sorted(m["metadata"]["name"] for m in machines)


def _machines(world: World) -> list[dict[str, Any]]:
    other_ns = mk_machine(world.clock, "other-ns", node="node-a")
    other_ns["metadata"]["namespace"] = "elsewhere"
    odd_kind = mk_machine(world.clock, "odd-kind", class_name="class-a")
    odd_kind["spec"]["class"]["kind"] = "AWSMachineClass"
    bad_label = mk_machine(world.clock, "bad-label")
    bad_label["metadata"]["labels"][c.LABEL_NODE] = 7
    return [
        mk_machine(world.clock, "m-a", node="node-a", class_name="class-a"),
        mk_machine(world.clock, "m-b", node="node-b", class_name="class-a"),
        mk_machine(world.clock, "m-none", class_name="class-b"),
        other_ns,
        odd_kind,
        bad_label,
    ]


def _indexed_world(machines: list[dict[str, Any]]) -> tuple[World, World]:
    scanning = make_world()
    indexed = make_world()
    indexer = Indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func, **MACHINE_INDEXERS})
    for machine in machines:
        scanning.machines.objects[machine["metadata"]["name"]] = machine
        indexer.add(machine)
    listers = indexed.deps.listers
    namespaced = _namespaced(indexer)
    indexed.deps.listers = dataclasses.replace(listers, machines=namespaced, machine_indexer=indexer)
    return scanning, indexed


def _namespaced(indexer: Indexer) -> NamespaceLister:
    return Lister(indexer, group="machine.sapcloud.io", resource="machine", namespaced=True).namespaced(NS)


def test_index_lookups_match_a_scan() -> None:
    scanning, indexed = _indexed_world(_machines(make_world()))
    scanning.machines.objects.pop("other-ns")  # the fake lister is one namespace already
    for node in ("node-a", "node-b", "node-c", ""):
        assert _names(machines_by_node(indexed.deps, node)) == _names(machines_by_node(scanning.deps, node))
    for name in ("class-a", "class-b", "class-0", ""):
        assert _names(machines_of_class(indexed.deps, name)) == _names(machines_of_class(scanning.deps, name))
        expected = len(machines_of_class(scanning.deps, name))
        assert count_of_class(indexed.deps, name) == count_of_class(scanning.deps, name) == expected
    assert _names(machines_by_node(indexed.deps, "node-a")) == ["m-a"]
    assert _names(machines_of_class(indexed.deps, "class-a")) == ["m-a", "m-b"]


def test_index_follows_label_changes() -> None:
    world = make_world()
    machine = mk_machine(world.clock, "m-a", node="node-a")
    _, indexed = _indexed_world([machine])
    indexer = indexed.deps.listers.machine_indexer
    assert indexer is not None
    moved = {**machine, "metadata": {**machine["metadata"], "labels": {c.LABEL_NODE: "node-b"}}}
    indexer.update(moved)
    assert machine_for_node(indexed.deps, "node-a") is None
    found = machine_for_node(indexed.deps, "node-b")
    assert found is not None and found["metadata"]["name"] == "m-a"

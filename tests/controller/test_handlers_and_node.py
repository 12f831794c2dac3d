"""Informer handlers (upstream ``NewController``, as at HEAD) and the HEAD node loop (``node.go``)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from mcm.apis.machine import constants as c
from mcm.controller import node
from mcm.controller.handlers import EventHandlers
from mcm.controller.node import reconcile_node_key
from mcm.controller.nodesync import sync_node_templates
from mcm.runtime.cache.keys import DeletedFinalStateUnknown
from mcm.runtime.client.errors import ConnectionFailed
from mcm.runtime.worker import DONE, Result

from .builders import HEALTHY, mk_class, mk_machine, mk_node
from .fakes import NS, World, make_world, ts


def handlers(world: World) -> tuple[EventHandlers, list[tuple[str, str, float]]]:
    seen: list[tuple[str, str, float]] = []
    return EventHandlers(world.deps, lambda q, k, a: seen.append((q, k, a))), seen


def test_status_only_machine_updates_do_not_enqueue() -> None:
    world = make_world()
    h, seen = handlers(world)
    old = mk_machine(world.clock)
    old["metadata"]["generation"] = 1
    new = copy.deepcopy(old)
    new["status"]["currentStatus"] = {"phase": "Running"}
    h.machine_updated(old, new)
    assert seen == []
    new["metadata"]["generation"] = 2
    h.machine_updated(old, new)
    assert seen == [("machine", f"{NS}/machine-0", 0.0)]


def test_deleting_machines_go_to_the_termination_queue() -> None:
    world = make_world()
    h, seen = handlers(world)
    old = mk_machine(world.clock)
    new = mk_machine(world.clock, deleting_ago=0)
    h.machine_updated(old, new)
    assert ("machinetermination", f"{NS}/machine-0", 0.0) in seen


def test_machine_add_and_delete_use_one_class_key_spelling_and_accept_tombstones() -> None:
    world = make_world()
    h, seen = handlers(world)
    m = mk_machine(world.clock)
    h.machine_added(m)
    h.machine_deleted(DeletedFinalStateUnknown(f"{NS}/machine-0", m))
    h.machine_deleted(DeletedFinalStateUnknown(f"{NS}/gone", None))
    class_keys = {k for q, k, _ in seen if q == "machineclass"}
    assert class_keys == {f"{NS}/class-0"}
    assert ("machinetermination", f"{NS}/machine-0", 0.0) in seen


def test_machine_events_let_the_mutation_cache_drop_writes_the_informer_delivered() -> None:
    """Issue 39: the answers to the controller's Machine writes stayed in the mutation cache until
    read again (a second copy of every machine written to); the Machine handlers now tell the
    cache what the informer delivered, and which Machine went."""
    from mcm.runtime.cache import Indexer, MutationCache

    world = make_world()
    machine = mk_machine(world.clock)
    machine["metadata"]["resourceVersion"] = "5"
    written = copy.deepcopy(machine)
    written["metadata"]["resourceVersion"] = "7"
    backing = Indexer()
    backing.add(machine)
    mutations = MutationCache(backing, ttl=60)
    handlers = EventHandlers(world.deps, lambda q, k, a: None, mutations)
    mutations.mutation(written)
    assert len(mutations) == 1
    handlers.machine_updated(machine, written)  # the informer's copy of our write: dropped
    assert len(mutations) == 0
    mutations.mutation(copy.deepcopy(written) | {"metadata": {**written["metadata"], "resourceVersion": "9"}})
    handlers.machine_deleted(DeletedFinalStateUnknown(f"{NS}/machine-0", written))
    assert len(mutations) == 0


def test_node_events_let_the_node_mutation_cache_drop_writes_the_informer_delivered() -> None:
    """Issue 39: a machine reconciled twice as its Node arrived wrote the node template again on
    the cached Node its first pass had already written (409, 0.085 writes a machine); Nodes are
    now read through a mutation cache, which the Node handlers keep small."""
    from mcm.runtime.cache import Indexer, MutationCache

    world = make_world()
    node = mk_node("node-0", metadata={"resourceVersion": "5"})
    written = mk_node("node-0", metadata={"resourceVersion": "6", "labels": {"a": "b"}})
    backing = Indexer()
    backing.add(node)
    mutations = MutationCache(backing, ttl=60)
    handlers = EventHandlers(world.deps, lambda q, k, a: None, node_mutations=mutations)
    mutations.mutation(written)
    assert mutations.get_by_key("node-0") is written  # the next reconcile sees its own write
    handlers.node_updated(node, written)  # no machine for it: still observed
    assert len(mutations) == 0
    mutations.mutation(mk_node("node-0", metadata={"resourceVersion": "9"}))
    handlers.node_deleted(DeletedFinalStateUnknown("node-0", written))
    assert len(mutations) == 0


def test_class_events_enqueue_class_and_secrets() -> None:
    world = make_world()
    h, seen = handlers(world)
    h.class_added_or_deleted(DeletedFinalStateUnknown(f"{NS}/class-0", mk_class()))
    assert seen == [("machineclass", f"{NS}/class-0", 0.0), ("secret", f"{NS}/secret-0", 0.0)]


def test_node_condition_change_enqueues_its_machine() -> None:
    world = make_world()
    h, seen = handlers(world)
    world.machines.put(mk_machine(world.clock, node="node-0", phase=c.PHASE_RUNNING, conditions=HEALTHY))
    old = mk_node("node-0", HEALTHY, metadata={"finalizers": [c.NODE_FINALIZER]})
    new = copy.deepcopy(old)
    new["status"]["conditions"][0]["status"] = "False"
    h.node_updated(old, new)
    assert seen == [("machine", f"{NS}/machine-0", 0.0)]


def test_a_new_node_reaches_its_machine_in_one_hop_and_the_node_queue_after_the_grace() -> None:
    """A Node whose conditions the Machine does not hold yet enqueues the Machine at once
    (upstream v0.47.0 ``addNodeToMachine``): before, the Machine was reached only through the
    node queue's worker, a second queue hop on the way to Running. The node queue looks at the
    finalizer once the grace is over (the machine's node-template write carries it)."""
    world = make_world()
    h, seen = handlers(world)
    world.machines.put(mk_machine(world.clock, node="node-0", phase=c.PHASE_PENDING))
    h.node_added(mk_node("node-0", HEALTHY))
    assert seen == [("machine", f"{NS}/machine-0", 0.0), ("node", "node-0", node.NODE_FINALIZER_GRACE)]


def test_a_new_node_goes_to_the_node_queue_at_once_without_news_for_its_machine() -> None:
    world = make_world()
    h, seen = handlers(world)
    h.node_added(mk_node("node-0", HEALTHY))  # no machine
    world.machines.put(mk_machine(world.clock, node="node-1", phase=c.PHASE_RUNNING, conditions=HEALTHY))
    h.node_added(mk_node("node-1", HEALTHY))  # the machine holds these conditions (a relist)
    world.machines.put(mk_machine(world.clock, node="node-2", name="machine-2", phase=c.PHASE_TERMINATING))
    h.node_added(mk_node("node-2", HEALTHY))
    deleting = mk_node("node-3", HEALTHY, metadata={"deletionTimestamp": ts(world.clock)})
    world.machines.put(mk_machine(world.clock, node="node-3", name="machine-3", phase=c.PHASE_PENDING))
    h.node_added(deleting)
    assert seen == [("node", f"node-{i}", 0.0) for i in range(4)]


def test_a_new_node_goes_to_the_node_queue_at_once_while_the_controller_is_frozen() -> None:
    world = make_world()
    world.deps = dataclasses.replace(world.deps, frozen=lambda: True)
    h, seen = handlers(world)
    world.machines.put(mk_machine(world.clock, node="node-0", phase=c.PHASE_PENDING))
    h.node_added(mk_node("node-0", HEALTHY))
    assert seen == [("node", "node-0", 0.0)]


def test_not_managed_nodes_are_ignored() -> None:
    world = make_world()
    h, seen = handlers(world)
    node = mk_node("node-0", metadata={"annotations": {c.ANNOTATION_NOT_MANAGED_BY_MCM: "1"}})
    h.node_added(node)
    h.node_deleted(node)
    assert seen == []


def test_deleting_a_node_deletes_its_machine_from_the_node_queue() -> None:
    """The handler only enqueues; the node queue's worker sends the DELETE (and retries it)."""
    world = make_world()
    h, seen = handlers(world)
    world.machines.put(mk_machine(world.clock, node="node-0"))
    h.node_deleted(DeletedFinalStateUnknown("node-0", mk_node("node-0")))
    assert world.machines.writes == []
    assert seen == [("node", node.deleted_node_key("node-0"), 0.0)]
    world.machines.fail("delete", ConnectionFailed("connection reset by peer"), 1)
    assert reconcile_node_key(world.deps, node.deleted_node_key("node-0")) == Result.after(c.SHORT_RETRY)
    assert reconcile_node_key(world.deps, node.deleted_node_key("node-0")) == DONE
    assert world.machines.get("machine-0")["metadata"].get("deletionTimestamp")


def test_a_deleted_node_that_is_back_does_not_delete_its_machine() -> None:
    world = make_world()
    world.machines.put(mk_machine(world.clock, node="node-0"))
    world.nodes.put(mk_node("node-0"))
    assert reconcile_node_key(world.deps, node.deleted_node_key("node-0")) == DONE
    assert world.machines.writes == []


def test_node_handlers_make_no_api_call_for_a_deleting_node() -> None:
    world = make_world()
    h, seen = handlers(world)
    world.machines.put(mk_machine(world.clock, node="node-0"))
    old = mk_node("node-0", metadata={"finalizers": [c.NODE_FINALIZER]})
    new = copy.deepcopy(old)
    new["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    world.machines.fail("delete", ConnectionFailed("connection reset by peer"))
    h.node_updated(old, new)  # used to send the DELETE from the informer's thread
    assert seen == [("node", "node-0", 0.0)]
    assert world.machines.writes == []


def _node_world(node: dict[str, Any], machine: dict[str, Any] | None = None) -> World:
    world = make_world()
    world.nodes.put(node)
    if machine is not None:
        world.machines.put(machine)
    return world


def test_node_loop_adds_the_node_finalizer() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0"))
    world.machines.put(mk_machine(world.clock, node="node-0"))
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert world.nodes.get("node-0")["metadata"]["finalizers"] == [c.NODE_FINALIZER]


def _new_node(world: World, name: str, age: float) -> dict[str, Any]:
    return mk_node(name, metadata={"creationTimestamp": ts(world.clock, age)})


def test_node_loop_leaves_a_new_nodes_finalizer_to_the_machines_node_write() -> None:
    """The finalizer of a Node younger than the grace rides on the machine's node-template
    write: the node loop writes nothing, enqueues the machine and looks again after the grace."""
    world = make_world()
    world.nodes.put(_new_node(world, "node-0", 10.0))
    machine = mk_machine(world.clock, node="node-0", phase=c.PHASE_PENDING)
    world.machines.put(machine)
    assert reconcile_node_key(world.deps, "node-0") == Result.after(node.NODE_FINALIZER_GRACE - 10.0)
    assert world.nodes.writes == []
    assert ("machine", f"{NS}/machine-0") in world.enqueued
    assert sync_node_templates(world.deps, machine) is None
    assert world.nodes.writes == [("update", "node-0")]
    assert world.nodes.get("node-0")["metadata"]["finalizers"] == [c.NODE_FINALIZER]
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert world.nodes.writes == [("update", "node-0")]


def test_node_loop_adds_the_finalizer_once_the_grace_is_over() -> None:
    world = make_world()
    world.nodes.put(_new_node(world, "node-0", 0.0))
    world.machines.put(mk_machine(world.clock, node="node-0", phase=c.PHASE_PENDING))
    assert reconcile_node_key(world.deps, "node-0") == Result.after(node.NODE_FINALIZER_GRACE)
    world.clock.step(node.NODE_FINALIZER_GRACE)
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert world.nodes.get("node-0")["metadata"]["finalizers"] == [c.NODE_FINALIZER]
    assert world.nodes.writes == [("patch", "node-0")]


def test_node_template_write_adds_no_finalizer_to_a_deleting_or_unmanaged_node() -> None:
    world = make_world()
    deleting = {"deletionTimestamp": ts(world.clock), "finalizers": ["other"]}
    world.nodes.put(mk_node("node-0", metadata=deleting))
    world.nodes.put(mk_node("node-1", metadata={"annotations": {c.ANNOTATION_NOT_MANAGED_BY_MCM: "1"}}))
    for name in ("node-0", "node-1"):
        machine = mk_machine(world.clock, f"machine-{name}", node=name, phase=c.PHASE_RUNNING)
        assert sync_node_templates(world.deps, machine) is None
    assert world.nodes.get("node-0")["metadata"]["finalizers"] == ["other"]
    assert "finalizers" not in world.nodes.get("node-1")["metadata"]


def test_node_loop_skips_nodes_without_machine() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0"))
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert "finalizers" not in world.nodes.get("node-0")["metadata"]


def test_node_loop_deleting_node_deletes_machine() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", metadata={"deletionTimestamp": "2026-01-01T12:00:00Z"}))
    world.machines.put(mk_machine(world.clock, node="node-0"))
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert world.machines.get("machine-0")["metadata"].get("deletionTimestamp")


def test_node_loop_multiple_machines_is_retried_not_crashed() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0"))
    world.machines.put(mk_machine(world.clock, "machine-0", node="node-0"))
    world.machines.put(mk_machine(world.clock, "machine-1", node="node-0"))
    assert reconcile_node_key(world.deps, "node-0") == Result.after(c.SHORT_RETRY)


def test_secret_and_class_delete_handlers_accept_tombstones_and_junk() -> None:
    """A tombstone (with or without its object) or junk never crashes a handler."""
    world = make_world()
    h, seen = handlers(world)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "secret-0", "namespace": NS}}
    h.secret_event(DeletedFinalStateUnknown(f"{NS}/secret-0", secret))
    for junk in (DeletedFinalStateUnknown(f"{NS}/gone", None), None, "not-an-object"):
        h.secret_event(junk)
        h.class_added_or_deleted(junk)
        h.node_deleted(junk)
    assert seen == [("secret", f"{NS}/secret-0", 0.0)]


def test_node_loop_adds_no_finalizer_to_the_node_of_a_deleting_machine() -> None:
    """The deletion flow removes the node finalizer: the node loop must not put it back."""
    world = make_world()
    world.nodes.put(mk_node("node-0"))
    world.machines.put(mk_machine(world.clock, node="node-0", deleting_ago=0.0))
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert world.nodes.writes == []


def test_the_foreign_node_warning_names_both_provider_ids() -> None:
    world = make_world()
    machine = mk_machine(world.clock, node="node-0", provider_id="vm-a")
    foreign = mk_node("node-0", spec={"providerID": "vm-b"})
    assert node.foreign_node_message(
        machine, foreign, "not drained"
    ) == c.MSG_NODE_PROVIDER_ID_MISMATCH.format(
        node="node-0", node_provider_id="vm-b", provider_id="vm-a", left_alone="not drained"
    )


def test_a_failed_node_finalizer_patch_is_retried_by_its_kind() -> None:
    """A conflict comes back soon with fresh data, another error after ShortRetry; a Node gone
    meanwhile needs nothing more."""
    from mcm.runtime.cache.listers import new_not_found
    from mcm.runtime.client.errors import Conflict, InternalError

    for error, result in (
        (Conflict({"message": "modified", "code": 409}), Result.after(c.CONFLICT_RETRY)),
        (InternalError({"message": "etcd down", "code": 500}), Result.after(c.SHORT_RETRY)),
        (new_not_found("", "nodes", "node-0"), DONE),
    ):
        world = make_world()
        world.nodes.put(mk_node("node-0"))
        world.machines.put(mk_machine(world.clock, node="node-0"))
        world.nodes.fail("patch", error, 1)
        assert reconcile_node_key(world.deps, "node-0") == result

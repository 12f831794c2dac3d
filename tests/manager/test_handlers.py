"""Event handlers: upstream v0.47.0's handler cases of ``machineset_test.go`` and
``deployment_test.go`` (queue lengths), and the fixes of defects 1 and 28."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcm.manager.handlers import (
    MACHINE_DEPLOYMENT_QUEUE,
    MACHINE_SET_QUEUE,
    OVERSHOOTING_QUEUE,
    EventHandlers,
)
from mcm.runtime.cache.keys import DeletedFinalStateUnknown

from .builders import deployment, machine, machine_set
from .fakes import NS, World


class Queues:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def __call__(self, queue: str, key: str, after: float) -> None:
        self.items.append((queue, key))

    def of(self, queue: str) -> list[str]:
        return sorted({key for q, key in self.items if q == queue})


@pytest.fixture
def setup() -> tuple[World, EventHandlers, Queues, dict[str, Any], dict[str, Any]]:
    world = World()
    md = world.add(world.machine_deployments, deployment("pool", labels={"name": "pool"}))
    ms = world.add(world.machine_sets, machine_set("pool-a", labels={"name": "pool"}, owner=md))
    queues = Queues()
    return world, EventHandlers(world.deps, queues), queues, md, ms


def _changed(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["metadata"].update(meta)
    new["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1000)
    return new


# --- Machine → MachineSet ------------------------------------------------------------------------


def test_machine_set_update_should_enqueue_the_machineset(setup: Any) -> None:
    _, h, q, _, ms = setup
    new = _changed(ms)
    new["spec"]["replicas"] = 5
    h.machine_set_updated(ms, new)
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]


def test_a_status_only_write_does_not_wake_the_machine_set(setup: Any) -> None:
    """Defect 28: the set's own status writes re-enqueued it."""
    _, h, q, _, ms = setup
    new = _changed(ms)
    new["status"] = {"replicas": 3}
    h.machine_set_updated(ms, new)
    assert q.of(MACHINE_SET_QUEUE) == []
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]  # the deployment reads set statuses


def test_a_resync_wakes_the_machine_set(setup: Any) -> None:
    _, h, q, _, ms = setup
    h.machine_set_updated(ms, copy.deepcopy(ms))
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]


def test_add_machine_should_enqueue_the_machineset_as_controller_ref_matches(setup: Any) -> None:
    _, h, q, _, ms = setup
    h.machine_added(machine("m", owner=ms, labels={"name": "pool"}))
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]
    assert q.of(OVERSHOOTING_QUEUE) == [""]


def test_add_machine_should_enqueue_the_machineset_though_controller_ref_is_not_set(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_added(machine("m", labels={"name": "pool"}))
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]


def test_add_machine_should_enqueue_the_machineset_while_machine_is_being_deleted(setup: Any) -> None:
    _, h, q, _, ms = setup
    body = machine("m", owner=ms, labels={"name": "pool"})
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    h.machine_added(body)
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]


def test_add_machine_shouldnt_enqueue_if_machineset_is_not_found_via_controller_ref(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_added(
        machine("m", owner={"metadata": {"name": "gone", "uid": "gone"}}, labels={"name": "pool"})
    )
    assert q.of(MACHINE_SET_QUEUE) == []


def test_a_machine_without_labels_enqueues_no_orphan_owner(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_added(machine("m", labels={}))
    assert q.of(MACHINE_SET_QUEUE) == []


def test_update_machine_shouldnt_enqueue_if_resource_version_matches(setup: Any) -> None:
    _, h, q, _, ms = setup
    body = machine("m", owner=ms, labels={"name": "pool"})
    body["metadata"]["resourceVersion"] = "7"
    h.machine_updated(body, copy.deepcopy(body))
    assert q.items == []


def _stale_owner(body: dict[str, Any]) -> dict[str, Any]:
    stale = copy.deepcopy(body)
    stale["metadata"]["ownerReferences"][0]["uid"] = "stale-uid"
    return stale


def _machine_updates(ms: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    base = machine("m", owner=ms, labels={"name": "pool"})
    base["metadata"]["resourceVersion"] = "7"
    orphan = machine("m", labels={"name": "pool"})
    orphan["metadata"]["resourceVersion"] = "7"
    return {
        "ResourceVersion is different for new machine": (base, _changed(base)),
        "newMachine is being deleted": (base, _changed(base, deletionTimestamp="2026-01-01T00:00:00Z")),
        "labels on newMachine has changed": (orphan, _changed(orphan, labels={"name": "pool", "x": "y"})),
        "if controllerRef has changed and new ref is nil": (base, _changed(orphan)),
        "if controllerRef has changed and new ref points to valid machineSet": (
            _stale_owner(base),
            _changed(base),
        ),
    }


@pytest.mark.parametrize("case", list(_machine_updates({"metadata": {"name": "x", "uid": "x"}})))
def test_update_machine_should_enqueue_the_machineset(setup: Any, case: str) -> None:
    _, h, q, _, ms = setup
    old, new = _machine_updates(ms)[case]
    h.machine_updated(old, new)
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]


def test_a_machine_deletion_marks_the_deletion_observed(setup: Any) -> None:
    world, h, _, _, ms = setup
    key = f"{NS}/pool-a"
    world.deps.expectations.expect_deletions(key, [f"{NS}/m"])
    h.machine_deleted(DeletedFinalStateUnknown(f"{NS}/m", machine("m", owner=ms, labels={"name": "pool"})))
    assert world.deps.expectations.satisfied(key)


def test_a_machine_deletion_wakes_the_deployment(setup: Any) -> None:
    """Defect 1: at v0.47.0 a machine deletion never reached the deployment."""
    _, h, q, _, ms = setup
    h.machine_deleted(machine("m", owner=ms, labels={"name": "pool"}))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_a_machine_add_marks_the_creation_observed(setup: Any) -> None:
    world, h, _, _, ms = setup
    key = f"{NS}/pool-a"
    world.deps.expectations.expect_creations(key, 1)
    h.machine_added(machine("m", owner=ms, labels={"name": "pool"}))
    assert world.deps.expectations.satisfied(key)


# --- #resolveMachineSetControllerRef / #getMachineDeploymentForMachine -----------------------------


@pytest.mark.parametrize(
    ("ref_change", "found"),
    [({}, True), ({"uid": "other"}, False), ({"kind": "MachineDeployment"}, False)],
    ids=[
        "should return MachineSet",
        "should not return MachineSet (uid)",
        "should not return MachineSet (kind)",
    ],
)
def test_resolve_machine_set_controller_ref(setup: Any, ref_change: dict[str, str], found: bool) -> None:
    _, h, _, _, ms = setup
    ref = {"kind": "MachineSet", "name": "pool-a", "uid": ms["metadata"]["uid"], **ref_change}
    assert (h._resolve(ref, "MachineSet") is not None) is found


@pytest.mark.parametrize(
    "case",
    [
        "return the expected machine deployment",
        "return nil as machine's controller-ref is buggy",
        "return nil as machine's controller-ref has different UID",
        "return nil as machine-set's controller-ref is nil",
    ],
)
def test_get_machine_deployment_for_machine(setup: Any, case: str) -> None:
    world, h, q, _, ms = setup
    body = machine("m", owner=ms, labels={"name": "pool"})
    if "buggy" in case:
        body["metadata"]["ownerReferences"][0]["kind"] = "Bogus"
    if "different UID" in case:
        body["metadata"]["ownerReferences"][0]["uid"] = "other"
    if "machine-set's controller-ref is nil" in case:
        current = world.machine_sets.read("pool-a")
        current["metadata"]["ownerReferences"] = []
        world.machine_sets.update(current)
    h.machine_deleted(body)
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == ([f"{NS}/pool"] if case.startswith("return the") else [])


# --- MachineSet → MachineDeployment -------------------------------------------------------------


def test_md_be_enqueued_as_machine_set_is_added(setup: Any) -> None:
    _, h, q, _, ms = setup
    h.machine_set_added(ms)
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_md_be_enqueued_as_machine_set_is_deleted(setup: Any) -> None:
    _, h, q, _, ms = setup
    h.machine_set_deleted(DeletedFinalStateUnknown(f"{NS}/pool-a", ms))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_md_be_enqueued_as_controller_ref_is_nil_and_it_should_find_it_via_label(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_set_added(machine_set("orphan", labels={"name": "pool"}))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_md_not_be_enqueued_as_controller_ref_is_nil_and_labels_are_also_not_matching(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_set_added(machine_set("orphan", labels={"name": "other"}))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []


def test_md_not_be_enqueued_as_controller_ref_doesnt_match_any_machine_deployment(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_set_added(
        machine_set("x", labels={"name": "pool"}, owner={"metadata": {"name": "nope", "uid": "n"}})
    )
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []


def test_md_not_be_enqueued_as_resource_version_is_same(setup: Any) -> None:
    _, h, q, _, ms = setup
    h.machine_set_updated(ms, copy.deepcopy(ms))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []


def test_md_not_be_enqueued_as_both_machine_sets_have_nil_controller_ref(setup: Any) -> None:
    _, h, q, _, _ = setup
    orphan = machine_set("orphan", labels={"name": "pool"})
    orphan["metadata"]["resourceVersion"] = "3"
    h.machine_set_updated(orphan, _changed(orphan))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []


@pytest.mark.parametrize(
    "case",
    [
        "newMachineSet is being deleted",
        "newMachineSet's label has changed",
        "newMachineSet's controllerRef has changed",
        "newMachineSet's controllerRef has changed and points to a other valid MachineDeployment",
    ],
)
def test_md_be_enqueued_on_machine_set_update(setup: Any, case: str) -> None:
    _, h, q, _, ms = setup
    orphan = copy.deepcopy(ms)
    orphan["metadata"]["ownerReferences"] = []
    if case == "newMachineSet is being deleted":
        old, new = ms, _changed(ms, deletionTimestamp="2026-01-01T00:00:00Z")
    elif case == "newMachineSet's label has changed":
        old, new = orphan, _changed(orphan, labels={"name": "pool", "new": "label"})
    elif case == "newMachineSet's controllerRef has changed":
        old, new = orphan, _changed(ms)
    else:
        stale = copy.deepcopy(ms)
        stale["metadata"]["ownerReferences"][0]["uid"] = "older"
        old, new = stale, _changed(ms)
    h.machine_set_updated(old, new)
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_md_not_be_enqueued_as_machine_set_controller_ref_is_nil_on_delete(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_set_deleted(machine_set("orphan", labels={"name": "other"}))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []


def test_md_not_be_enqueued_as_deployment_uid_differs_on_delete(setup: Any) -> None:
    _, h, q, _, ms = setup
    stale = copy.deepcopy(ms)
    stale["metadata"]["ownerReferences"][0]["uid"] = "older"
    h.machine_set_deleted(stale)
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []


def test_the_deployment_owner_is_resolved_from_the_cache_without_api_calls(setup: Any) -> None:
    """Defect 28: upstream resolved it with a live GET from the handler."""
    world, h, q, _, ms = setup
    world.machine_deployments.fail("get", AssertionError("no API call from a handler"))
    h.machine_set_added(ms)
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


# --- MachineDeployment -----------------------------------------------------------------------------


@pytest.mark.parametrize("event", ["MachineDeployment is added", "MachineDeployment is deleted"])
def test_should_enqueue_the_machine_deployment(setup: Any, event: str) -> None:
    _, h, q, md, _ = setup
    h.machine_deployment_added_or_deleted(
        md if "added" in event else DeletedFinalStateUnknown(f"{NS}/pool", md)
    )
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_machine_deployment_is_updated(setup: Any) -> None:
    _, h, q, md, _ = setup
    new = _changed(md)
    new["spec"]["replicas"] = 9
    h.machine_deployment_updated(md, new)
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == [f"{NS}/pool"]


def test_the_deployment_s_own_status_write_does_not_wake_it(setup: Any) -> None:
    _, h, q, md, _ = setup
    new = _changed(md)
    new["status"] = {"replicas": 1}
    h.machine_deployment_updated(md, new)
    assert q.items == []


def test_unfreezing_a_deployment_wakes_its_machine_sets(setup: Any) -> None:
    _, h, q, md, _ = setup
    frozen = _changed(md, labels={"freeze": "True"})
    h.machine_deployment_updated(frozen, _changed(frozen, labels={}))
    assert q.of(MACHINE_SET_QUEUE) == [f"{NS}/pool-a"]


def test_not_be_enqueued_as_machine_is_deleted_without_a_machine_set(setup: Any) -> None:
    _, h, q, _, _ = setup
    h.machine_deleted(machine("m", labels={"name": "pool"}))
    assert q.of(MACHINE_DEPLOYMENT_QUEUE) == []

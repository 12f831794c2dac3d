"""The mutation cache: each guarantee of ``mcm.runtime.cache.mutation_cache``'s docstring. A
reconcile that runs before the informer delivered our own write sees that write's result
(client-go's mutation cache), never an older object and never a hidden newer one."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.apis.machine.resources import MACHINES
from mcm.runtime import errors
from mcm.runtime.cache import (
    Indexer,
    Lister,
    MutationCache,
    compare_resource_versions,
    new_namespace_indexers,
)
from mcm.runtime.cache.mutation_cache import MutationLister, RecordingRESTClient
from mcm.runtime.client import load_config
from mcm.runtime.client.errors import Conflict, NotFound
from mcm.runtime.clock import FakeClock

NS = "default"


def node(name: str, rv: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": labels}}


def pod(namespace: str, name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": rv}}


def test_the_newer_copy_wins_and_a_caught_up_mutation_is_dropped() -> None:
    backing = Indexer()
    backing.add(node("a", "5"))
    cache = MutationCache(backing, ttl=60)
    cache.mutation(node("a", "7", written="yes"))
    assert cache.get_by_key("a")["metadata"]["resourceVersion"] == "7"
    backing.update(node("a", "7"))
    assert cache.get_by_key("a") is backing.get_by_key("a")
    backing.update(node("a", "6"))  # the mutation was dropped on the previous read
    assert cache.get_by_key("a")["metadata"]["resourceVersion"] == "6"


def test_an_older_mutation_never_replaces_a_newer_one() -> None:
    backing = Indexer()
    backing.add(node("a", "1"))
    cache = MutationCache(backing, ttl=60)
    cache.mutation(node("a", "9"))
    cache.mutation(node("a", "3"))
    assert cache.get_by_key("a")["metadata"]["resourceVersion"] == "9"


def test_missing_keys_stay_missing_unless_adds_are_included() -> None:
    cache = MutationCache(Indexer(), ttl=60)
    cache.mutation(node("new", "2"))
    assert cache.get_by_key("new") is None
    with_adds = MutationCache(Indexer(), ttl=60, include_adds=True)
    with_adds.mutation(node("new", "2"))
    assert with_adds.get_by_key("new")["metadata"]["resourceVersion"] == "2"


def test_entries_expire_after_the_ttl_on_the_injected_clock() -> None:
    clock = FakeClock()
    backing = Indexer()
    backing.add(node("a", "1"))
    cache = MutationCache(backing, ttl=10, clock=clock)
    cache.mutation(node("a", "2"))
    clock.step(9)
    assert cache.get_by_key("a")["metadata"]["resourceVersion"] == "2"
    clock.step(2)
    assert cache.get_by_key("a")["metadata"]["resourceVersion"] == "1"


def test_a_mutation_the_informer_delivered_is_dropped_without_being_read() -> None:
    """Issue 39: write answers stayed until read or evicted, so after a burst the cache held a
    second copy of up to 10,000 objects, a third of the controller's memory at thousands of
    machines."""
    backing = Indexer()
    backing.add(node("a", "5"))
    cache = MutationCache(backing, ttl=60)
    cache.mutation(node("a", "7"))
    cache.observe(node("a", "6"))  # the informer is still behind: kept
    assert len(cache) == 1
    cache.observe(node("a", "7"))
    assert len(cache) == 0
    cache.mutation(pod(NS, "p", "3"))
    cache.observe(pod(NS, "p", "4"))  # namespaced keys too
    assert len(cache) == 0
    cache.observe({"metadata": {"name": "a", "resourceVersion": "x"}})  # never raises
    cache.observe("not an object")


def test_a_deleted_objects_mutation_is_forgotten() -> None:
    from mcm.runtime.cache.keys import DeletedFinalStateUnknown

    cache = MutationCache(Indexer(), ttl=60)
    cache.mutation(pod(NS, "p", "3"))
    cache.mutation(pod(NS, "q", "3"))
    cache.forget(pod(NS, "p", "4"))
    cache.forget(DeletedFinalStateUnknown(f"{NS}/q", pod(NS, "q", "4")))
    cache.forget({"metadata": {}})  # no key: nothing to forget, no error
    assert len(cache) == 0


def test_recording_sweeps_expired_entries_at_the_least_recently_used_end() -> None:
    clock = FakeClock()
    cache = MutationCache(Indexer(), ttl=10, clock=clock)
    cache.mutation(node("a", "1"))
    cache.mutation(node("b", "1"))
    clock.step(11)
    cache.mutation(node("c", "1"))  # a and b expired: both go
    assert len(cache) == 1


def test_the_cluster_lister_reads_cluster_scoped_objects_through_the_cache() -> None:
    from mcm.runtime.cache.mutation_cache import MutationClusterLister

    backing = Indexer()
    backing.add(node("a", "5"))
    cache = MutationCache(backing, ttl=60)
    lister = MutationClusterLister(Lister(backing, group="", resource="node", namespaced=False), cache)
    cache.mutation(node("a", "7"))
    assert lister.get("a")["metadata"]["resourceVersion"] == "7"
    assert [n["metadata"]["resourceVersion"] for n in lister.list()] == ["5"]  # lists are the cache's
    with pytest.raises(NotFound):
        lister.get("b")


def test_the_least_recently_used_entry_is_evicted_beyond_the_bound() -> None:
    backing = Indexer()
    for name in "abc":
        backing.add(node(name, "1"))
    cache = MutationCache(backing, ttl=60, max_entries=2)
    for name in "abc":
        cache.mutation(node(name, "2"))
    versions = {name: cache.get_by_key(name)["metadata"]["resourceVersion"] for name in "abc"}
    assert versions == {"a": "1", "b": "2", "c": "2"}


def test_by_index_overlays_mutations_and_includes_adds_when_asked() -> None:
    backing = Indexer(indexers=new_namespace_indexers())
    backing.add(pod("ns", "p1", "1"))
    backing.add(pod("other", "p2", "1"))
    cache = MutationCache(backing, ttl=60, include_adds=True)
    cache.mutation(pod("ns", "p1", "4"))
    cache.mutation(pod("ns", "p3", "5"))
    cache.mutation(pod("other", "p4", "5"))
    items = cache.by_index("namespace", "ns")
    found = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in items}
    assert found == {"p1": "4", "p3": "5"}


def test_a_resource_version_that_is_not_an_integer_is_reported_and_the_backing_copy_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported: list[BaseException] = []
    monkeypatch.setattr(errors, "ERROR_HANDLERS", [lambda err, _context: reported.append(err)])
    backing = Indexer()
    backing.add(node("a", "abc"))
    cache = MutationCache(backing, ttl=60)
    cache.mutation(node("a", "3"))
    assert cache.get_by_key("a")["metadata"]["resourceVersion"] == "abc"
    assert reported and "not an unsigned integer" in str(reported[0])


def test_compare_resource_versions_orders_integers_and_treats_empty_as_zero() -> None:
    assert compare_resource_versions(node("a", "10"), node("a", "9")) == 1
    assert compare_resource_versions(node("a", ""), node("a", "0")) == 0
    assert compare_resource_versions(node("a", "2"), node("a", "11")) == -1


def _obj(rv: str, value: str = "") -> dict[str, object]:
    return {"metadata": {"name": "m", "namespace": NS, "resourceVersion": rv}, "spec": {"v": value}}


def _cache(clock: FakeClock | None = None) -> tuple[Indexer, MutationCache]:
    indexer = Indexer()
    return indexer, MutationCache(indexer, ttl=60.0, clock=clock or FakeClock())


def test_a_newer_write_is_served_until_the_informer_catches_up() -> None:
    indexer, cache = _cache()
    indexer.add(_obj("5", "cached"))
    cache.mutation(_obj("7", "written"))
    assert cache.get_by_key("default/m")["spec"] == {"v": "written"}  # type: ignore[index]
    indexer.update(_obj("7", "written"))
    assert cache.get_by_key("default/m")["spec"] == {"v": "written"}  # type: ignore[index]
    assert len(cache) == 0  # caught up: forgotten


def test_a_newer_object_from_the_informer_always_wins() -> None:
    indexer, cache = _cache()
    indexer.add(_obj("5"))
    cache.mutation(_obj("7", "ours"))
    indexer.update(_obj("9", "theirs"))
    assert cache.get_by_key("default/m")["spec"] == {"v": "theirs"}  # type: ignore[index]


def test_a_deleted_object_stays_deleted_and_unknown_keys_are_missing() -> None:
    _indexer, cache = _cache()
    cache.mutation(_obj("7"))
    assert cache.get_by_key("default/m") is None
    assert cache.get_by_key("default/other") is None


def test_mutations_expire_and_odd_resource_versions_are_not_compared() -> None:
    clock = FakeClock()
    indexer, cache = _cache(clock)
    indexer.add(_obj("5", "cached"))
    cache.mutation(_obj("7", "written"))
    clock.step(61.0)
    assert cache.get_by_key("default/m")["spec"] == {"v": "cached"}  # type: ignore[index]
    cache.mutation(_obj("x9", "odd"))
    assert cache.get_by_key("default/m")["spec"] == {"v": "cached"}  # type: ignore[index]
    cache.mutation({"metadata": {"resourceVersion": "9"}})  # no name: ignored
    assert len(cache) == 0


def test_at_most_max_entries_are_kept() -> None:
    cache = MutationCache(Indexer(), max_entries=2, clock=FakeClock())
    for name in ("a", "b", "c"):
        cache.mutation({"metadata": {"name": name, "namespace": NS, "resourceVersion": "1"}})
    assert len(cache) == 2


def test_a_second_write_built_on_the_first_ones_result_does_not_conflict(kubeconfig: str) -> None:
    """Issue 25: the controller's writes are built on what it reads; with an informer that has not
    delivered the first write yet, a plain lister hands back the old object and the second write
    fails with a 409. Through the mutation cache it gets the first write's result."""
    client = load_config(kubeconfig, qps=-1)
    machines = client.resource(MACHINES)
    created = machines.create(
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": "m", "namespace": NS},
            "spec": {"class": {"kind": "MachineClass", "name": "c"}},
        }
    )
    indexer = Indexer()
    indexer.add(created)  # the informer's view; it never sees the writes below
    lister = Lister(indexer, group="machine.sapcloud.io", resource="machine", namespaced=True)
    plain = lister.namespaced(NS)
    cache = MutationCache(indexer, clock=FakeClock())
    through = MutationLister(lister, NS, cache)
    writer = RecordingRESTClient(machines, cache)

    first = dict(through.get("m"))
    first["metadata"] = {**first["metadata"], "labels": {"node": "n1"}}
    writer.update(first)
    second = dict(through.get("m"))
    second["spec"] = {**second["spec"], "providerID": "fake:///m"}
    stored = writer.update(second)
    assert stored["metadata"]["labels"] == {"node": "n1"}
    assert stored["spec"]["providerID"] == "fake:///m"

    stale = dict(plain.get("m"))
    stale["spec"] = {**stale["spec"], "providerID": "other"}
    with pytest.raises(Conflict):
        machines.update(stale)
    with pytest.raises(NotFound):
        through.get("absent")

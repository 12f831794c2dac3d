"""The mutation cache: each guarantee of ``mcm.runtime.cache.mutation_cache``'s docstring."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.runtime import errors
from mcm.runtime.cache import Indexer, MutationCache, compare_resource_versions, new_namespace_indexers
from mcm.runtime.clock import FakeClock


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

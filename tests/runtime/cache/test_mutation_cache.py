"""MutationCache: a reconcile that runs before the informer delivered our own write sees that
write's result (client-go's mutation cache), never an older object and never a hidden newer one."""

from __future__ import annotations

import pytest

from mcm.apis.machine.resources import MACHINES
from mcm.runtime.cache import Indexer, Lister
from mcm.runtime.cache.mutation_cache import MutationCache, MutationLister, RecordingRESTClient
from mcm.runtime.client import load_config
from mcm.runtime.client.errors import Conflict, NotFound
from mcm.runtime.clock import FakeClock

NS = "default"


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

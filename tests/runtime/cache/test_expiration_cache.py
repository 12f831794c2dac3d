"""The expiration cache: client-go's ``tools/cache/expiration_cache_test.go`` ported, plus the
TTL store driven by a fake clock (client-go's tests use the real clock there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mcm.runtime.cache import (
    ExpirationCache,
    ThreadSafeStore,
    TimestampedEntry,
    TTLPolicy,
    new_ttl_store,
)
from mcm.runtime.clock import FakeClock


class StoreObj(NamedTuple):
    id: str
    val: str


def store_key_func(obj: Any) -> str:
    return str(obj.id)


class RecordingStore(ThreadSafeStore):
    """client-go's ``fakeThreadSafeMap``: reports every deleted key."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete(self, key: str) -> None:
        super().delete(key)
        self.deleted.append(key)


@dataclass
class FakeExpirationPolicy:
    """Everything expires except the keys in ``never_expire``."""

    never_expire: set[str] = field(default_factory=set)

    def is_expired(self, entry: TimestampedEntry) -> bool:
        return entry.key not in self.never_expire


def fake_expiration_store(policy: FakeExpirationPolicy) -> tuple[ExpirationCache, RecordingStore]:
    storage = RecordingStore()
    return ExpirationCache(store_key_func, policy, clock=FakeClock(), storage=storage), storage


def test_ttl_expiration_basic() -> None:
    obj = StoreObj("foo", "bar")
    store, storage = fake_expiration_store(FakeExpirationPolicy())
    store.add(obj)
    assert store.get(obj) is None
    assert storage.deleted == ["foo"]


def test_re_add_expired_item() -> None:
    policy = FakeExpirationPolicy()
    store, storage = fake_expiration_store(policy)
    obj = StoreObj("foo", "bar")
    store.add(obj)
    assert store.get(obj) is None  # this get expires the item
    store.add(StoreObj("foo", "different_bar"))
    assert storage.deleted == ["foo"]
    policy.never_expire = {"foo"}
    assert store.get_by_key("foo") == StoreObj("foo", "different_bar")


def test_ttl_list() -> None:
    objs = [StoreObj("foo", "bar"), StoreObj("foo1", "bar1"), StoreObj("foo2", "bar2")]
    store, storage = fake_expiration_store(FakeExpirationPolicy(never_expire={"foo1"}))
    for obj in objs:
        store.add(obj)
    assert store.list() == [objs[1]]
    assert sorted(storage.deleted) == ["foo", "foo2"]


def test_ttl_policy() -> None:
    clock = FakeClock()
    ttl = 30.0
    now = clock.monotonic()
    policy = TTLPolicy(ttl, clock)
    assert not policy.is_expired(TimestampedEntry(object(), now - ttl, "k")), "not exactly on the ttl"
    assert not policy.is_expired(TimestampedEntry(object(), now, "k")), "not before the ttl"
    expired = TimestampedEntry(object(), now - (ttl + 1), "k")
    assert policy.is_expired(expired), "entries older than the ttl expire"
    for no_ttl in (0.0, -1.0):
        policy.ttl = no_ttl
        assert not policy.is_expired(expired), "only a ttl > 0 expires entries"


def test_ttl_store_on_a_fake_clock() -> None:
    clock = FakeClock()
    store = new_ttl_store(store_key_func, 10.0, clock)
    store.add(StoreObj("a", "1"))
    store.add(StoreObj("b", "1"))
    clock.step(6)
    store.update(StoreObj("b", "2"))  # refreshes b's stamp
    clock.step(4)
    assert store.get_by_key("a") == StoreObj("a", "1")  # exactly on the ttl: kept
    clock.step(0.5)
    assert sorted(store.list_keys()) == ["a", "b"]  # list_keys does not expire
    assert store.list() == [StoreObj("b", "2")]
    assert store.list_keys() == ["b"]
    store.replace([StoreObj("c", "1")], "7")
    clock.step(10.5)
    assert store.get(StoreObj("c", "")) is None
    store.add(StoreObj("d", "1"))
    store.delete(StoreObj("d", ""))
    assert store.list_keys() == []

"""Keys, the thread-safe store and the indexer (client-go store, index and thread_safe_store tests)."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.runtime.cache import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    ExplicitKey,
    Indexer,
    IndexerError,
    KeyFuncError,
    ThreadSafeStore,
    deletion_handling_meta_namespace_key_func,
    index_func_to_key_func_adapter,
    meta_namespace_index_func,
    meta_namespace_key_func,
    object_key,
    split_meta_namespace_key,
)

from .fake_server import make_obj


def test_namespaced_and_cluster_scoped_keys() -> None:
    assert meta_namespace_key_func(make_obj("a", "ns")) == "ns/a"
    assert meta_namespace_key_func(make_obj("n1", None)) == "n1"
    assert meta_namespace_key_func(ExplicitKey("x/y")) == "x/y"


def test_object_without_metadata_has_no_key() -> None:
    with pytest.raises(ValueError, match="object has no meta"):
        meta_namespace_key_func({"kind": "Thing"})


def test_object_key_is_the_store_key_and_never_raises() -> None:
    assert object_key(make_obj("a", "ns")) == meta_namespace_key_func(make_obj("a", "ns")) == "ns/a"
    assert object_key(make_obj("n1", None)) == "n1"
    assert object_key({"kind": "Thing"}) == ""
    assert object_key({"metadata": "junk"}) == ""
    assert object_key({"metadata": {"namespace": "ns", "name": 7}}) == "ns/"
    assert object_key({"metadata": {"namespace": 3, "name": "x"}}) == "x"


def test_tombstone_keys_as_its_stored_key() -> None:
    tomb = DeletedFinalStateUnknown("ns/gone", None)
    assert deletion_handling_meta_namespace_key_func(tomb) == "ns/gone"
    assert deletion_handling_meta_namespace_key_func(make_obj("a")) == "ns/a"


@pytest.mark.parametrize(
    ("key", "expected"),
    [("name", ("", "name")), ("ns/name", ("ns", "name")), ("/x", ("", "x"))],
)
def test_split_key(key: str, expected: tuple[str, str]) -> None:
    assert split_meta_namespace_key(key) == expected


def test_split_key_rejects_more_than_one_slash() -> None:
    with pytest.raises(ValueError, match='unexpected key format: "a/b/c"'):
        split_meta_namespace_key("a/b/c")


def test_key_error_wraps_the_key_function_failure_without_dumping_the_object() -> None:
    indexer = Indexer()
    secret = {"kind": "Secret", "data": {"password": "hunter2"}}
    with pytest.raises(KeyFuncError, match="couldn't create key for object") as info:
        indexer.add(secret)
    assert "hunter2" not in str(info.value)


def _by_color(obj: Any) -> list[str]:
    return list(obj["metadata"].get("labels", {}).get("colors", "").split(",")) if obj else []


def _indexer() -> Indexer:
    return Indexer(meta_namespace_key_func, {NAMESPACE_INDEX: meta_namespace_index_func, "color": _by_color})


def test_add_update_delete_keep_indices_in_step() -> None:
    idx = _indexer()
    idx.add(make_obj("a", colors="red,blue"))
    idx.add(make_obj("b", "other", colors="red"))
    assert sorted(o["metadata"]["name"] for o in idx.by_index("color", "red")) == ["a", "b"]
    assert idx.index_keys("color", "red") == ["ns/a", "other/b"]
    assert idx.index_keys(NAMESPACE_INDEX, "other") == ["other/b"]

    idx.update(make_obj("a", colors="green"))
    assert idx.index_keys("color", "red") == ["other/b"]
    assert idx.index_keys("color", "green") == ["ns/a"]
    assert "blue" not in idx.list_index_func_values("color")

    idx.delete(make_obj("b", "other"))
    assert idx.get_by_key("other/b") is None
    assert idx.by_index("color", "red") == []
    assert sorted(idx.list_index_func_values("color")) == ["green"]
    assert sorted(idx.list_index_func_values(NAMESPACE_INDEX)) == ["ns"]


def test_delete_removes_empty_sets_from_index() -> None:
    store = ThreadSafeStore({"color": _by_color})
    store.add("k", make_obj("a", colors="red"))
    store.delete("k")
    store.delete("missing")  # no-op
    assert store.list_index_func_values("color") == []


def test_index_returns_objects_sharing_any_value_once() -> None:
    idx = _indexer()
    a = make_obj("a", colors="red,blue")
    idx.add(a)
    idx.add(make_obj("b", colors="blue"))
    probe = make_obj("p", colors="red,blue")
    assert sorted(o["metadata"]["name"] for o in idx.index("color", probe)) == ["a", "b"]


def test_reads_return_the_stored_instance() -> None:
    idx = _indexer()
    obj = make_obj("a")
    idx.add(obj)
    assert idx.get_by_key("ns/a") is obj
    assert idx.list()[0] is obj
    assert idx.by_index(NAMESPACE_INDEX, "ns")[0] is obj


def test_unknown_index_is_an_error_and_unknown_value_is_empty() -> None:
    idx = _indexer()
    with pytest.raises(IndexerError, match="Index with name nope does not exist"):
        idx.by_index("nope", "x")
    assert idx.by_index("color", "none") == []
    assert idx.index_keys("color", "none") == []


def test_add_indexers_only_while_empty_and_without_conflicts() -> None:
    idx = _indexer()
    with pytest.raises(IndexerError, match="indexer conflict"):
        idx.add_indexers({"color": _by_color})
    idx.add_indexers({"name": lambda o: [o["metadata"]["name"]]})
    idx.add(make_obj("a"))
    assert idx.index_keys("name", "a") == ["ns/a"]
    with pytest.raises(IndexerError, match="cannot add indexers to running index"):
        idx.add_indexers({"other": _by_color})


def test_replace_swaps_items_and_rebuilds_indices() -> None:
    idx = _indexer()
    idx.add(make_obj("a", colors="red"))
    idx.replace([make_obj("b", colors="blue"), make_obj("c", colors="blue")], "7")
    assert sorted(idx.list_keys()) == ["ns/b", "ns/c"]
    assert idx.by_index("color", "red") == []
    assert idx.index_keys("color", "blue") == ["ns/b", "ns/c"]


def test_index_function_failure_names_key_and_index() -> None:
    def broken(obj: Any) -> list[str]:
        raise ValueError("boom")

    store = ThreadSafeStore({"broken": broken})
    with pytest.raises(RuntimeError, match="key 'k' on index 'broken': boom"):
        store.add("k", make_obj("a"))


def test_index_func_to_key_func_adapter_requires_exactly_one_value() -> None:
    key_func = index_func_to_key_func_adapter(_by_color)
    assert key_func(make_obj("a", colors="red")) == "red"
    with pytest.raises(ValueError, match="too many keys"):
        key_func(make_obj("a", colors="red,blue"))

"""The cache never half-applies an update, and a rejected delta never takes later deltas with it.

client-go panics when an index function fails (``thread_safe_store.go`` ``updateIndices``), so
the item is already replaced, the indices are half-updated and the rest of the popped batch is
lost with the goroutine. mcm computes every index value first and applies all or nothing; the
informer reports the failure with ``handle_error`` and goes on with the next delta.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from mcm.runtime import errors as runtime_errors
from mcm.runtime.cache import (
    DeletedFinalStateUnknown,
    Delta,
    DeltaType,
    Indexer,
    IndexFuncError,
    SharedIndexInformer,
    ThreadSafeStore,
    deletion_handling_meta_namespace_key_func,
    process_deltas,
    wait_for_cache_sync,
)
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, make_obj
from .recorder import Recorder


def _by_color(obj: Any) -> list[str]:
    labels = obj["metadata"].get("labels", {})
    if labels.get("color") == "poison":
        raise ValueError("cannot index poison")
    return [labels["color"]] if "color" in labels else []


def _by_name(obj: Any) -> list[str]:
    return [obj["metadata"]["name"]]


def _snapshot(store: ThreadSafeStore) -> tuple[dict[str, Any], dict[str, list[str]]]:
    items = {key: store.get(key) for key in store.list_keys()}
    indices = {
        f"{name}={value}": store.index_keys(name, value)
        for name in ("name", "color")
        for value in store.list_index_func_values(name)
    }
    return items, indices


@pytest.fixture
def errors_seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[BaseException, Mapping[str, object]]]:
    seen: list[tuple[BaseException, Mapping[str, object]]] = []
    monkeypatch.setattr(runtime_errors, "ERROR_HANDLERS", [lambda err, ctx: seen.append((err, ctx))])
    return seen


def test_failing_index_function_leaves_an_update_unapplied() -> None:
    # "name" runs before "color", so the old code had already re-indexed the name (and replaced
    # the item) when "color" raised.
    store = ThreadSafeStore({"name": _by_name, "color": _by_color})
    store.add("ns/a", make_obj("a", color="red"))
    before = _snapshot(store)
    renamed_poison = make_obj("renamed", color="poison")
    with pytest.raises(IndexFuncError, match="key 'ns/a' on index 'color': cannot index poison") as info:
        store.update("ns/a", renamed_poison)
    assert (info.value.key, info.value.index_name) == ("ns/a", "color")
    assert _snapshot(store) == before


def test_failing_index_function_leaves_an_add_unapplied() -> None:
    store = ThreadSafeStore({"name": _by_name, "color": _by_color})
    with pytest.raises(IndexFuncError):
        store.add("ns/p", make_obj("p", color="poison"))
    assert _snapshot(store) == ({}, {})


def test_failing_index_function_leaves_a_replace_unapplied() -> None:
    store = ThreadSafeStore({"name": _by_name, "color": _by_color})
    store.add("ns/a", make_obj("a", color="red"))
    before = _snapshot(store)
    with pytest.raises(IndexFuncError):
        store.replace({"ns/b": make_obj("b", color="blue"), "ns/p": make_obj("p", color="poison")})
    assert _snapshot(store) == before


def test_delete_and_the_old_side_of_an_update_never_call_the_index_function() -> None:
    calls: list[str] = []

    def counting(obj: Any) -> list[str]:
        calls.append(obj["metadata"]["resourceVersion"])
        return _by_color(obj)

    store = ThreadSafeStore({"color": counting})
    store.add("ns/a", make_obj("a", rv="1", color="red"))
    store.update("ns/a", make_obj("a", rv="2", color="blue"))
    store.delete("ns/a")
    assert calls == ["1", "2"]
    assert store.list_index_func_values("color") == []


def test_process_deltas_reports_a_rejected_delta_and_applies_the_ones_after_it(
    errors_seen: list[tuple[BaseException, Mapping[str, object]]],
) -> None:
    store = Indexer(deletion_handling_meta_namespace_key_func, {"color": _by_color})
    handler = Recorder()
    deltas = [
        Delta(DeltaType.ADDED, make_obj("a", rv="1", color="poison")),
        Delta(DeltaType.UPDATED, make_obj("a", rv="2", color="red")),
        Delta(DeltaType.UPDATED, make_obj("a", rv="3", color="poison")),
        Delta(DeltaType.UPDATED, make_obj("a", rv="4", color="blue")),
        Delta(DeltaType.DELETED, DeletedFinalStateUnknown("ns/a", make_obj("a", rv="4", color="blue"))),
    ]
    process_deltas(handler, store, deltas, False)
    assert handler.events == [("add", "a", False), ("update", "a", "change"), ("delete", "tombstone:ns/a")]
    assert [type(err) for err, _ in errors_seen] == [IndexFuncError, IndexFuncError]
    assert [ctx["delta_type"] for _, ctx in errors_seen] == ["Added", "Updated"]
    assert store.list_keys() == []


def test_process_deltas_keeps_the_last_good_state_when_an_update_is_rejected(
    errors_seen: list[tuple[BaseException, Mapping[str, object]]],
) -> None:
    store = Indexer(deletion_handling_meta_namespace_key_func, {"color": _by_color})
    handler = Recorder()
    deltas = [
        Delta(DeltaType.ADDED, make_obj("a", rv="1", color="red")),
        Delta(DeltaType.UPDATED, make_obj("a", rv="2", color="poison")),
    ]
    process_deltas(handler, store, deltas, True)
    assert handler.events == [("add", "a", True)]
    assert store.get_by_key("ns/a") == make_obj("a", rv="1", color="red")
    assert store.index_keys("color", "red") == ["ns/a"]
    assert len(errors_seen) == 1


def test_process_deltas_goes_on_after_a_handler_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", False)
    monkeypatch.setattr(runtime_errors, "PANIC_HANDLERS", [])
    store = Indexer(deletion_handling_meta_namespace_key_func)
    handler = Recorder(fail_on="a")
    deltas = [Delta(DeltaType.ADDED, make_obj("a")), Delta(DeltaType.UPDATED, make_obj("a", rv="2"))]
    process_deltas(handler, store, deltas, False)
    assert handler.events == [("add", "a", False), ("update", "a", "change")]
    assert store.get_by_key("ns/a") == make_obj("a", rv="2")


@pytest.fixture
def poisoned_informer() -> Iterator[tuple[FakeServer, SharedIndexInformer, threading.Thread]]:
    server = FakeServer()
    server.create(make_obj("p", color="poison"))
    server.create(make_obj("a", color="red"))
    informer = SharedIndexInformer(server, 0.0, {"color": _by_color}, clock=FakeClock())
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    yield server, informer, thread
    stop.set()
    if thread.is_alive():
        thread.join(5)


def test_informer_reports_an_unindexable_object_and_keeps_delivering(
    poisoned_informer: tuple[FakeServer, SharedIndexInformer, threading.Thread],
    errors_seen: list[tuple[BaseException, Mapping[str, object]]],
) -> None:
    server, informer, thread = poisoned_informer
    handler = Recorder()
    informer.add_event_handler(handler)
    thread.start()
    assert wait_for_cache_sync(threading.Event(), informer.has_synced, timeout=5)
    server.create(make_obj("b", color="blue"))
    server.update(make_obj("p", rv="9", color="green"))  # fixed: now it can be indexed
    events = handler.wait_for(3)
    assert sorted(events) == [("add", "a", True), ("add", "b", False), ("add", "p", False)]
    assert sorted(informer.get_indexer().list_keys()) == ["ns/a", "ns/b", "ns/p"]
    assert informer.get_indexer().index_keys("color", "green") == ["ns/p"]
    assert any(isinstance(err, IndexFuncError) and err.key == "ns/p" for err, _ in errors_seen)

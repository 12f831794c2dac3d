"""DeltaFIFO semantics (ports of client-go's delta_fifo_test cases)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcm.runtime.cache import (
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    Deltas,
    DeltaType,
    FIFOClosedError,
    Indexer,
    RequeueError,
)

from .fake_server import make_obj

A, U, D, R, S = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED, DeltaType.REPLACED, DeltaType.SYNC


def obj(name: str, value: int = 0) -> dict[str, Any]:
    o = make_obj(name)
    o["value"] = value
    return o


def pop(fifo: DeltaFIFO) -> tuple[Deltas, bool]:
    seen: list[tuple[Deltas, bool]] = []
    fifo.pop(lambda d, initial: seen.append((d, initial)), timeout=1.0)
    return seen[0]


def shape(deltas: Deltas) -> list[tuple[DeltaType, Any]]:
    result: list[tuple[DeltaType, Any]] = []
    for d in deltas:
        if isinstance(d.object, DeletedFinalStateUnknown):
            inner = d.object.obj["value"] if d.object.obj else None
            result.append((d.type, ("tombstone", d.object.key, inner)))
        else:
            result.append((d.type, d.object["value"]))
    return result


def known(*objs: dict[str, Any]) -> Indexer:
    idx = Indexer()
    for o in objs:
        idx.add(o)
    return idx


def test_basic_fifo_order_one_entry_per_key() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.add(obj("b", 2))
    fifo.update(obj("a", 3))
    assert fifo.list_keys() == ["ns/a", "ns/b"]
    assert shape(pop(fifo)[0]) == [(A, 1), (U, 3)]
    assert shape(pop(fifo)[0]) == [(A, 2)]


def test_add_then_update_are_not_coalesced() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.update(obj("a", 2))
    fifo.update(obj("a", 3))
    assert shape(fifo.get_by_key("ns/a") or []) == [(A, 1), (U, 2), (U, 3)]


def test_consecutive_deletes_are_deduplicated_keeping_the_non_tombstone() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.delete(obj("a", 2))
    fifo.delete(obj("a", 3))
    assert shape(fifo.get_by_key("ns/a") or []) == [(A, 1), (D, 2)]
    fifo.delete(DeletedFinalStateUnknown("ns/a", obj("a", 4)))
    assert shape(fifo.get_by_key("ns/a") or []) == [(A, 1), (D, 2)]


def test_delete_after_tombstone_keeps_the_newer_delete() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.delete(DeletedFinalStateUnknown("ns/a", obj("a", 2)))
    fifo.delete(obj("a", 3))
    assert shape(fifo.get_by_key("ns/a") or []) == [(A, 1), (D, 3)]


def test_delete_of_unknown_unqueued_key_is_dropped() -> None:
    fifo = DeltaFIFO(known_objects=known(obj("b", 9)))
    fifo.delete(obj("a", 1))
    assert fifo.list_keys() == []
    fifo.delete(obj("b", 2))
    assert shape(pop(fifo)[0]) == [(D, 2)]


def test_delete_without_known_objects_needs_a_queued_key() -> None:
    fifo = DeltaFIFO()
    fifo.delete(obj("a", 1))
    assert len(fifo) == 0


def test_replace_emits_tombstones_for_queued_and_known_keys_not_listed() -> None:
    fifo = DeltaFIFO(known_objects=known(obj("k", 5), obj("both", 6)), emit_delta_type_replaced=True)
    fifo.add(obj("q", 1))
    fifo.replace([obj("both", 7), obj("new", 8)], "10")
    got = {k: shape(fifo.get_by_key(k) or []) for k in fifo.list_keys()}
    assert got == {
        "ns/q": [(A, 1), (D, ("tombstone", "ns/q", 1))],
        "ns/both": [(R, 7)],
        "ns/new": [(R, 8)],
        "ns/k": [(D, ("tombstone", "ns/k", 5))],
    }


def test_replace_uses_sync_type_unless_replaced_is_requested() -> None:
    fifo = DeltaFIFO()
    fifo.replace([obj("a", 1)], "1")
    assert shape(pop(fifo)[0]) == [(S, 1)]


def test_replace_unwraps_a_queued_tombstone() -> None:
    fifo = DeltaFIFO(known_objects=known(obj("a", 1)))
    fifo.delete(DeletedFinalStateUnknown("ns/a", obj("a", 1)))
    fifo.replace([], "2")
    deltas = fifo.get_by_key("ns/a") or []
    # the second tombstone wraps the inner object, never a tombstone in a tombstone
    assert all(not isinstance(d.object.obj, DeletedFinalStateUnknown) for d in deltas)
    assert shape(deltas) == [(D, ("tombstone", "ns/a", 1))]


def test_known_key_already_queued_gets_only_the_queued_tombstone() -> None:
    fifo = DeltaFIFO(known_objects=known(obj("a", 1)))
    fifo.update(obj("a", 2))
    fifo.replace([], "3")
    assert shape(fifo.get_by_key("ns/a") or []) == [(U, 2), (D, ("tombstone", "ns/a", 2))]


def test_resync_skips_keys_with_pending_deltas() -> None:
    fifo = DeltaFIFO(known_objects=known(obj("a", 1), obj("b", 2)))
    fifo.update(obj("a", 3))
    fifo.resync()
    assert shape(fifo.get_by_key("ns/a") or []) == [(U, 3)]
    assert shape(fifo.get_by_key("ns/b") or []) == [(S, 2)]


def test_resync_without_known_objects_does_nothing() -> None:
    fifo = DeltaFIFO()
    fifo.resync()
    assert len(fifo) == 0


def test_has_synced_only_after_last_initial_item_is_processed() -> None:
    fifo = DeltaFIFO(known_objects=known())
    assert not fifo.has_synced()
    fifo.replace([obj("a"), obj("b")], "1")
    states: list[tuple[bool, bool]] = []
    fifo.pop(lambda d, initial: states.append((initial, fifo._has_synced())), timeout=1)
    fifo.pop(lambda d, initial: states.append((initial, fifo._has_synced())), timeout=1)
    # the initial flag holds for both; synced is reached only once the second pop finished
    assert [s[0] for s in states] == [True, True]
    assert fifo.has_synced()


def test_empty_initial_list_is_synced_at_once() -> None:
    fifo = DeltaFIFO()
    fifo.replace([], "1")
    assert fifo.has_synced()


def test_has_synced_counts_initial_deletions() -> None:
    fifo = DeltaFIFO(known_objects=known(obj("gone")))
    fifo.replace([obj("a")], "1")
    pop(fifo)
    assert not fifo.has_synced()
    pop(fifo)
    assert fifo.has_synced()


def test_add_before_first_replace_counts_as_populated_with_nothing_initial() -> None:
    # as in client-go: only the first *replace* sets the initial population count
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    assert fifo.has_synced()
    fifo.replace([obj("b")], "1")
    assert fifo.has_synced()


def test_requeue_puts_deltas_back_unless_key_was_requeued() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))

    def fail(deltas: Deltas, initial: bool) -> None:
        raise RequeueError(ValueError("try later"))

    with pytest.raises(ValueError, match="try later"):
        fifo.pop(fail, timeout=1)
    assert shape(fifo.get_by_key("ns/a") or []) == [(A, 1)]


def test_add_if_not_present() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.add_if_not_present([Delta(A, obj("a", 2))])
    fifo.add_if_not_present([Delta(A, obj("b", 3))])
    assert shape(pop(fifo)[0]) == [(A, 1)]
    assert shape(pop(fifo)[0]) == [(A, 3)]


def test_transformer_applies_before_storing() -> None:
    def strip(o: Any) -> Any:
        if isinstance(o, dict):
            o = dict(o)
            o["value"] = -1
        return o

    fifo = DeltaFIFO(transformer=strip)
    fifo.add(obj("a", 1))
    assert shape(pop(fifo)[0]) == [(A, -1)]


def test_pop_unblocks_when_closed_and_drains_first() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    fifo.close()
    pop(fifo)
    with pytest.raises(FIFOClosedError, match="DeltaFIFO: manipulating with closed queue"):
        fifo.pop(lambda d, i: None, timeout=1)


def test_blocked_pop_wakes_on_close() -> None:
    fifo = DeltaFIFO()
    errors: list[BaseException] = []

    def consumer() -> None:
        try:
            fifo.pop(lambda d, i: None, timeout=5)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=consumer)
    thread.start()
    fifo.close()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(errors[0], FIFOClosedError)


def test_key_of_deltas_and_tombstones() -> None:
    fifo = DeltaFIFO()
    assert fifo.key_of([Delta(A, obj("a"))]) == "ns/a"
    assert fifo.key_of(DeletedFinalStateUnknown("x/y", None)) == "x/y"


def test_list_gives_newest_object_per_key() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.update(obj("a", 2))
    assert [o["value"] for o in fifo.list()] == [2]

"""DeltaFIFO cases of client-go's delta_fifo_test.go not covered by test_delta_fifo.py.

Objects are ``{"name": ..., "val": ...}`` dicts keyed by name, like client-go's ``testFifoObject``;
``Literal`` plays ``literalListerGetter`` (a fixed set of known objects).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from mcm.runtime.cache import (
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    Deltas,
    DeltaType,
    FIFOClosedError,
    RequeueError,
)

A, U, D, R, S = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED, DeltaType.REPLACED, DeltaType.SYNC
Tomb = DeletedFinalStateUnknown


def mk(name: str, val: Any) -> dict[str, Any]:
    return {"name": name, "val": val}


def key(obj: Any) -> str:
    return str(obj["name"])


class Literal:
    """Known objects that never change (client-go's ``literalListerGetter``)."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self._objs = objs

    def list_keys(self) -> list[str]:
        return [key(o) for o in self._objs]

    def get_by_key(self, k: str) -> dict[str, Any] | None:
        return next((o for o in self._objs if key(o) == k), None)


def fifo(*known: dict[str, Any], with_known: bool = True, replaced: bool = False) -> DeltaFIFO:
    return DeltaFIFO(
        key_function=key,
        known_objects=Literal(*known) if with_known else None,
        emit_delta_type_replaced=replaced,
    )


def pop(f: DeltaFIFO) -> Deltas:
    return f.pop(lambda deltas, initial: None, timeout=5.0)


def pop2(f: DeltaFIFO) -> tuple[Deltas, bool]:
    seen: list[bool] = []
    deltas = f.pop(lambda d, initial: seen.append(initial), timeout=5.0)
    return deltas, seen[0]


def newest_val(f: DeltaFIFO) -> Any:
    return pop(f)[-1].object["val"]


def test_basic_two_producers_keep_their_order() -> None:
    f = DeltaFIFO(key_function=key)
    amount = 500

    def produce(prefix: str) -> None:
        for i in range(amount):
            f.add(mk(f"{prefix}{i}", i + 1))

    producers = [threading.Thread(target=produce, args=(p,)) for p in "ab"]
    for thread in producers:
        thread.start()
    last = {"a": 0, "b": 0}
    for _ in range(amount * 2):
        obj = pop(f)[-1].object
        prefix = obj["name"][0]
        assert obj["val"] > last[prefix], f"{obj} out of order"
        last[prefix] = obj["val"]
    for thread in producers:
        thread.join(5)
    assert last == {"a": amount, "b": amount}


def test_replace_with_delete_delta_in_queue_adds_the_sync() -> None:
    old, new = mk("foo", 1), mk("foo", 2)
    f = fifo(old)
    f.delete(old)
    f.replace([new], "")
    assert pop(f) == [Delta(D, old), Delta(S, new)]


OBJ, OBJ_V2 = mk("foo", 2), mk("foo", 3)
Step = tuple[str, Any]
ONLY_IN_QUEUE_CASES: dict[str, tuple[list[Step], Deltas]] = {
    "added object is deleted on replace": (
        [("add", OBJ), ("replace", [])],
        [Delta(A, OBJ), Delta(D, Tomb("foo", OBJ))],
    ),
    "replaced object gets a single delete": (
        [("add", OBJ), ("replace", [OBJ]), ("replace", [])],
        [Delta(A, OBJ), Delta(R, OBJ), Delta(D, Tomb("foo", OBJ))],
    ),
    "deleted object gets a single delete": (
        [("add", OBJ), ("delete", OBJ), ("replace", [])],
        [Delta(A, OBJ), Delta(D, OBJ)],
    ),
    "synced object gets a single delete": (
        [("add", OBJ), ("replace", [OBJ]), ("replace", [OBJ]), ("replace", [])],
        [Delta(A, OBJ), Delta(S, OBJ), Delta(S, OBJ), Delta(D, Tomb("foo", OBJ))],
    ),
    "added object gets a single delete on several replaces": (
        [("add", OBJ), ("replace", []), ("replace", [])],
        [Delta(A, OBJ), Delta(D, Tomb("foo", OBJ))],
    ),
    "added, deleted and re-added object is deleted": (
        [("add", OBJ), ("delete", OBJ), ("add", OBJ_V2), ("replace", [])],
        [Delta(A, OBJ), Delta(D, OBJ), Delta(A, OBJ_V2), Delta(D, Tomb("foo", OBJ_V2))],
    ),
}


@pytest.mark.parametrize("with_known", [True, False])
@pytest.mark.parametrize("case", list(ONLY_IN_QUEUE_CASES))
def test_replace_makes_deletions_for_objects_only_in_queue(case: str, with_known: bool) -> None:
    operations, expected = ONLY_IN_QUEUE_CASES[case]
    f = fifo(with_known=with_known, replaced=case.startswith("replaced"))
    for method, arg in operations:
        getattr(f, method)(arg)
    assert pop(f) == expected
    assert len(f) == 0


def test_requeue_on_pop_with_and_without_an_error() -> None:
    f = DeltaFIFO(key_function=key)
    f.add(mk("foo", 10))

    def requeue(err: BaseException | None) -> Any:
        def process(deltas: Deltas, initial: bool) -> None:
            assert deltas[0].object["name"] == "foo"
            raise RequeueError(err)

        return process

    f.pop(requeue(None), timeout=5)  # no error comes out
    assert f.get_by_key("foo") is not None
    with pytest.raises(ValueError, match="test error"):
        f.pop(requeue(ValueError("test error")), timeout=5)
    assert f.get_by_key("foo") is not None
    pop(f)
    assert f.get_by_key("foo") is None


def test_add_update_delete_pop_once_with_the_newest() -> None:
    f = DeltaFIFO(key_function=key)
    f.add(mk("foo", 10))
    f.update(mk("foo", 12))
    f.delete(mk("foo", 15))
    assert f.list() == [mk("foo", 15)]
    assert f.list_keys() == ["foo"]
    assert newest_val(f) == 15
    assert len(f) == 0
    assert f.get(mk("foo", "")) is None


def test_transformer_runs_once_per_object() -> None:
    counts: dict[int, int] = {}

    def transform(obj: Any) -> Any:
        if isinstance(obj, DeletedFinalStateUnknown):
            assert counts[id(obj.obj)] == 1, "tombstoned object transformed a wrong number of times"
            return obj
        counts[id(obj)] = counts.get(id(obj), 0) + 1
        return obj

    f = DeltaFIFO(key_function=key, transformer=transform)
    foo15, bar16 = mk("foo", 15), mk("bar", 16)
    f.add(mk("foo", 10))
    f.add(mk("bar", 11))
    f.update(mk("foo", 12))
    f.delete(foo15)
    f.replace([], "")
    f.add(bar16)
    f.replace([], "")
    assert f.list_keys() == ["foo", "bar"]
    assert pop(f)[-1].object is foo15  # a regular deletion of foo
    newest = pop(f)[-1].object
    assert isinstance(newest, DeletedFinalStateUnknown)
    assert newest.obj is bar16
    assert counts[id(foo15)] == 1
    assert counts[id(bar16)] == 1


def test_enqueueing_without_a_lister() -> None:
    f = DeltaFIFO(key_function=key)
    f.add(mk("foo", 10))
    f.update(mk("bar", 15))
    f.add(mk("qux", 17))
    f.delete(mk("qux", 18))
    f.delete(mk("baz", 20))  # neither queued nor known: nothing queued
    assert [newest_val(f) for _ in range(3)] == [10, 15, 18]
    assert len(f) == 0


def test_enqueueing_with_a_lister() -> None:
    f = fifo(mk("foo", 5), mk("bar", 6), mk("baz", 7))
    f.add(mk("foo", 10))
    f.update(mk("bar", 15))
    f.delete(mk("baz", 20))  # known: queued
    assert [newest_val(f) for _ in range(3)] == [10, 15, 20]
    assert len(f) == 0


def test_add_then_replace_pops_once_with_the_listed_object() -> None:
    f = DeltaFIFO(key_function=key)
    f.add(mk("foo", 10))
    f.replace([mk("foo", 15)], "0")
    assert newest_val(f) == 15
    assert len(f) == 0


def test_resync_of_a_queued_deletion_adds_nothing() -> None:
    f = fifo(mk("foo", 5))
    f.delete(mk("foo", 10))
    f.resync()
    assert [d.type for d in f.get_by_key("foo") or []] == [D]


def test_resync_queues_sync_for_known_objects() -> None:
    f = fifo(mk("foo", 5))
    f.resync()
    assert f.get_by_key("foo") == [Delta(S, mk("foo", 5))]


def test_delete_of_a_queued_but_unknown_object_is_kept() -> None:
    f = fifo()
    f.add(mk("foo", 5))
    f.delete(mk("foo", 6))
    assert [d.type for d in f.get_by_key("foo") or []] == [A, D]


KNOWN = (mk("foo", 5), mk("bar", 6), mk("baz", 7))


def test_replace_makes_deletions_after_a_queued_delete() -> None:
    f = fifo(*KNOWN)
    f.delete(mk("baz", 10))
    f.replace([mk("foo", 5)], "0")
    assert [pop(f) for _ in range(3)] == [
        [Delta(D, mk("baz", 10))],
        [Delta(S, mk("foo", 5))],
        [Delta(D, Tomb("bar", mk("bar", 6)))],
    ]


def test_replace_makes_deletions_after_a_queued_add() -> None:
    f = fifo(*KNOWN)
    f.add(mk("baz", 10))
    f.replace([mk("foo", 5)], "0")
    assert [pop(f) for _ in range(3)] == [
        [Delta(A, mk("baz", 10)), Delta(D, Tomb("baz", mk("baz", 10)))],
        [Delta(S, mk("foo", 5))],
        [Delta(D, Tomb("bar", mk("bar", 6)))],
    ]


def test_replace_makes_deletions_with_the_newest_queued_object() -> None:
    f = fifo(*KNOWN)
    f.delete(mk("bar", 6))
    f.add(mk("bar", 100))
    f.replace([mk("foo", 5)], "0")
    assert [pop(f) for _ in range(3)] == [
        [Delta(D, mk("bar", 6)), Delta(A, mk("bar", 100)), Delta(D, Tomb("bar", mk("bar", 100)))],
        [Delta(S, mk("foo", 5))],
        [Delta(D, Tomb("baz", mk("baz", 7)))],
    ]


def test_replace_makes_deletions_after_a_previous_replace() -> None:
    f = fifo(*KNOWN)
    f.replace([mk("bar", 100), mk("foo", 5)], "0")
    f.replace([mk("foo", 5)], "0")
    assert [pop(f) for _ in range(3)] == [
        [Delta(S, mk("bar", 100)), Delta(D, Tomb("bar", mk("bar", 100)))],
        [Delta(S, mk("foo", 5)), Delta(S, mk("foo", 5))],
        [Delta(D, Tomb("baz", mk("baz", 7)))],
    ]


def test_replace_makes_deletions_without_known_objects() -> None:
    f = DeltaFIFO(key_function=key)
    f.add(mk("baz", 10))
    f.replace([mk("foo", 5)], "0")
    assert [pop(f) for _ in range(2)] == [
        [Delta(A, mk("baz", 10)), Delta(D, Tomb("baz", mk("baz", 10)))],
        [Delta(S, mk("foo", 5))],
    ]
    assert len(f) == 0


def test_replace_makes_deletions_replaced() -> None:
    f = fifo(*KNOWN, replaced=True)
    f.delete(mk("baz", 10))
    f.replace([mk("foo", 6)], "0")
    assert [pop(f) for _ in range(3)] == [
        [Delta(D, mk("baz", 10))],
        [Delta(R, mk("foo", 6))],
        [Delta(D, Tomb("bar", mk("bar", 6)))],
    ]


def test_replace_delta_type() -> None:
    f = fifo(mk("foo", 5), replaced=True)
    f.replace([mk("foo", 5)], "0")
    assert pop(f) == [Delta(R, mk("foo", 5))]


def test_update_resync_race_keeps_only_the_update() -> None:
    f = fifo(mk("foo", 5))
    f.update(mk("foo", 6))
    f.resync()
    assert pop(f) == [Delta(U, mk("foo", 6))]
    assert len(f) == 0


def test_has_synced_correct_on_deletion() -> None:
    f = fifo(*KNOWN)
    f.replace([mk("foo", 5)], "0")
    expected = [
        [Delta(S, mk("foo", 5))],
        [Delta(D, Tomb("bar", mk("bar", 6)))],
        [Delta(D, Tomb("baz", mk("baz", 7)))],
    ]
    for deltas in expected:
        assert not f.has_synced()
        assert pop2(f) == (deltas, True)
    assert f.has_synced()


def test_detect_line_jumpers() -> None:
    f = DeltaFIFO(key_function=key)
    for name, val in (("foo", 10), ("bar", 1), ("foo", 11), ("foo", 13), ("zab", 30)):
        f.add(mk(name, val))
    assert newest_val(f) == 13
    f.add(mk("foo", 14))  # goes to the back of the line
    assert [newest_val(f) for _ in range(3)] == [1, 30, 14]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (mk("A", 0), "A"),
        (Tomb("B", None), "B"),
        ([Delta(A, mk("C", 0))], "C"),
        ([Delta(D, Tomb("D", None))], "D"),
    ],
)
def test_key_of(obj: Any, expected: str) -> None:
    assert DeltaFIFO(key_function=key).key_of(obj) == expected


HAS_SYNCED_CASES: list[tuple[list[str], bool]] = [
    ([], False),
    (["add"], True),
    (["replace-empty"], True),
    (["replace-two"], False),
    (["replace-two", "pop"], False),
    (["replace-two", "pop", "pop"], True),
    (["replace-duplicate-keys", "pop"], True),
]


@pytest.mark.parametrize(("actions", "synced"), HAS_SYNCED_CASES)
def test_has_synced(actions: list[str], synced: bool) -> None:
    f = DeltaFIFO(key_function=key)
    run: dict[str, Callable[[], object]] = {
        "add": lambda: f.add(mk("a", 1)),
        "replace-empty": lambda: f.replace([], "0"),
        "replace-two": lambda: f.replace([mk("a", 1), mk("b", 2)], "0"),
        "replace-duplicate-keys": lambda: f.replace([mk("a", 1), mk("a", 2)], "0"),
        "pop": lambda: pop(f),
    }
    for action in actions:
        run[action]()
    assert f.has_synced() is synced


def test_pop_unblocks_every_waiter_when_closed() -> None:
    f = fifo(mk("foo", 5))
    outcomes: list[FIFOClosedError] = []
    lock = threading.Lock()

    def waiter() -> None:
        try:
            pop(f)
        except FIFOClosedError as exc:
            with lock:
                outcomes.append(exc)

    threads = [threading.Thread(target=waiter) for _ in range(10)]
    for thread in threads:
        thread.start()
    f.close()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert len(outcomes) == 10

"""The keyed heap: client-go's ``tools/cache/heap_test.go`` ported."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import pytest

from mcm.runtime.cache import Heap, HeapClosedError, ObjectNotFoundError


class Obj(NamedTuple):
    name: str
    val: int


def key_func(obj: Any) -> str:
    return str(obj.name)


def compare_ints(a: Any, b: Any) -> bool:
    return bool(a.val < b.val)


def new_heap() -> Heap:
    return Heap(key_func, compare_ints)


def pop_val(h: Heap) -> int:
    return int(h.pop(timeout=5).val)


def test_heap_basic() -> None:
    h = new_heap()
    amount = 500

    def down() -> None:
        for i in range(amount, 0, -1):
            h.add(Obj(f"a{i}", i))

    def up() -> None:
        for u in range(amount):
            h.add(Obj(f"b{u}", u + 1))

    threads = [threading.Thread(target=down), threading.Thread(target=up)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    popped = [pop_val(h) for _ in range(amount * 2)]
    assert popped == sorted(popped)


def test_heap_add() -> None:
    h = new_heap()
    h.add(Obj("foo", 10))
    h.add(Obj("bar", 1))
    h.add(Obj("baz", 11))
    h.add(Obj("zab", 30))
    h.add(Obj("foo", 13))  # updates foo
    assert pop_val(h) == 1
    assert pop_val(h) == 11
    with pytest.raises(ObjectNotFoundError):
        h.delete(Obj("baz", 11))  # nothing is deleted (client-go ignores the error here)
    h.add(Obj("foo", 14))  # foo is updated
    assert pop_val(h) == 14
    assert pop_val(h) == 30


def test_heap_bulk_add() -> None:
    h = new_heap()
    amount = 500
    adder = threading.Thread(target=h.bulk_add, args=([Obj(f"a{i}", i) for i in range(amount, 0, -1)],))
    adder.start()
    previous = -1
    for _ in range(amount):
        value = pop_val(h)
        assert value > previous, f"got {value} out of order, last was {previous}"
        previous = value
    adder.join(5)


def test_heap_empty_pop() -> None:
    h = new_heap()
    popped: list[BaseException] = []

    def popper() -> None:
        try:
            h.pop()
        except HeapClosedError as exc:
            popped.append(exc)

    t = threading.Thread(target=popper)
    t.start()
    h.close()  # client-go closes after a 1 s sleep; order does not matter here
    t.join(5)
    assert [str(e) for e in popped] == ["heap is closed"]


def test_heap_add_if_not_present() -> None:
    h = new_heap()
    h.add_if_not_present(Obj("foo", 10))
    h.add_if_not_present(Obj("bar", 1))
    h.add_if_not_present(Obj("baz", 11))
    h.add_if_not_present(Obj("zab", 30))
    h.add_if_not_present(Obj("foo", 13))  # not added
    assert len(h) == 4
    assert h.get_by_key("foo") == Obj("foo", 10)
    assert pop_val(h) == 1
    assert pop_val(h) == 10
    h.add_if_not_present(Obj("bar", 14))  # bar was popped: added again
    assert pop_val(h) == 11
    assert pop_val(h) == 14


def test_heap_delete() -> None:
    h = new_heap()
    h.add(Obj("foo", 10))
    h.add(Obj("bar", 1))
    h.add(Obj("bal", 31))
    h.add(Obj("baz", 11))
    h.delete(Obj("bar", 200))  # the head; by key, whatever the value
    assert pop_val(h) == 10
    h.add(Obj("zab", 30))
    h.add(Obj("faz", 30))
    size = len(h)
    with pytest.raises(ObjectNotFoundError, match="object not found"):
        h.delete(Obj("non-existent", 10))
    assert len(h) == size
    h.delete(Obj("bal", 31))  # the tail
    h.delete(Obj("zab", 30))  # one of the two 30s
    assert pop_val(h) == 11
    assert pop_val(h) == 30
    assert len(h) == 0


def test_heap_update() -> None:
    h = new_heap()
    h.add(Obj("foo", 10))
    h.add(Obj("bar", 1))
    h.add(Obj("bal", 31))
    h.add(Obj("baz", 11))
    h.update(Obj("baz", 0))  # to the head
    assert h._queue[0] == "baz"
    assert h._items["baz"].index == 0
    assert pop_val(h) == 0
    h.update(Obj("bar", 100))  # further back
    assert h._queue[0] == "foo"
    assert h._items["foo"].index == 0


def _four() -> Heap:
    h = new_heap()
    for name, val in (("foo", 10), ("bar", 1), ("bal", 31), ("baz", 11)):
        h.add(Obj(name, val))
    return h


def test_heap_get() -> None:
    h = _four()
    assert h.get(Obj("baz", 0)) == Obj("baz", 11)  # by key
    assert h.get(Obj("non-existing", 0)) is None


def test_heap_get_by_key() -> None:
    h = _four()
    assert h.get_by_key("baz") == Obj("baz", 11)
    assert h.get_by_key("non-existing") is None


def test_heap_close() -> None:
    h = new_heap()
    h.add(Obj("foo", 10))
    h.add(Obj("bar", 1))
    assert not h.is_closed()
    h.close()
    assert h.is_closed()
    assert [pop_val(h), pop_val(h)] == [1, 10]  # what is held is still handed out
    with pytest.raises(HeapClosedError):
        h.pop()


ITEMS = {"foo": 10, "bar": 1, "bal": 30, "baz": 11, "faz": 30}


def test_heap_list() -> None:
    h = new_heap()
    assert h.list() == []
    for name, val in ITEMS.items():
        h.add(Obj(name, val))
    listed = h.list()
    assert len(listed) == len(ITEMS)
    assert {obj.name: obj.val for obj in listed} == ITEMS


def test_heap_list_keys() -> None:
    h = new_heap()
    assert h.list_keys() == []
    for name, val in ITEMS.items():
        h.add(Obj(name, val))
    assert sorted(h.list_keys()) == sorted(ITEMS)


def test_heap_add_after_close() -> None:
    h = new_heap()
    h.close()
    for write in (h.add, h.add_if_not_present, lambda o: h.bulk_add([o])):
        with pytest.raises(HeapClosedError, match="heap is closed"):
            write(Obj("test", 1))


def test_heap_invariant_holds_under_random_updates_and_deletes() -> None:
    import random

    rng = random.Random(3)
    h = new_heap()
    live: dict[str, int] = {}
    for _ in range(2000):
        name = f"k{rng.randrange(50)}"
        if rng.random() < 0.2 and name in live:
            h.delete(Obj(name, 0))
            del live[name]
        else:
            live[name] = rng.randrange(1000)
            h.add(Obj(name, live[name]))
    popped = [pop_val(h) for _ in range(len(live))]
    assert popped == sorted(live.values())

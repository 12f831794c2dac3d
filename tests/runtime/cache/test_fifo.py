"""The plain FIFO: client-go's ``tools/cache/fifo_test.go`` ported (including the older
``requeueOnPop`` and ``addIfNotPresent`` cases)."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, NamedTuple

import pytest

from mcm.runtime.cache import FIFO, FIFOClosedError, RequeueError


class Obj(NamedTuple):
    name: str
    val: Any


def key_func(obj: Any) -> str:
    return str(obj.name)


def pop(f: FIFO) -> Any:
    return f.pop(lambda obj, initial: None, timeout=5)


def test_fifo_basic() -> None:
    f = FIFO(key_func)
    amount = 500

    def producer(prefix: str) -> None:
        for i in range(amount):
            f.add(Obj(f"{prefix}{i}", (prefix, i + 1)))

    threads = [threading.Thread(target=producer, args=(p,)) for p in "ab"]
    for t in threads:
        t.start()
    last = {"a": 0, "b": 0}
    for _ in range(amount * 2):
        prefix, value = pop(f).val
        assert value > last[prefix], f"got {value} ({prefix}) out of order, last was {last[prefix]}"
        last[prefix] = value
    for t in threads:
        t.join(5)


def test_fifo_requeue_on_pop() -> None:
    f = FIFO(key_func)
    f.add(Obj("foo", 10))

    def requeue(obj: Any, initial: bool) -> None:
        assert obj.name == "foo"
        raise RequeueError()

    f.pop(requeue)
    assert f.get_by_key("foo") == Obj("foo", 10)

    def requeue_with_error(obj: Any, initial: bool) -> None:
        raise RequeueError(ValueError("test error"))

    with pytest.raises(ValueError, match="test error"):
        f.pop(requeue_with_error)
    assert f.get_by_key("foo") == Obj("foo", 10)

    f.pop(lambda obj, initial: None)
    assert f.get_by_key("foo") is None


def test_fifo_add_update() -> None:
    f = FIFO(key_func)
    f.add(Obj("foo", 10))
    f.update(Obj("foo", 15))
    assert f.list() == [Obj("foo", 15)]
    assert f.list_keys() == ["foo"]
    assert pop(f).val == 15
    assert f._queue == deque()  # nothing left to pop (client-go waits 50 ms for a second value)
    assert f.get(Obj("foo", "")) is None


def test_fifo_add_replace() -> None:
    f = FIFO(key_func)
    f.add(Obj("foo", 10))
    f.replace([Obj("foo", 15)], "15")
    assert pop(f).val == 15
    assert f._queue == deque()
    assert f.get(Obj("foo", "")) is None


def test_fifo_add_if_not_present() -> None:
    f = FIFO(key_func)
    f.add(Obj("a", 1))
    f.add(Obj("b", 2))
    f.add_if_not_present(Obj("b", 3))
    f.add_if_not_present(Obj("c", 4))
    assert len(f) == 3
    assert [pop(f).val for _ in range(3)] == [1, 2, 4]


def test_fifo_detect_line_jumpers() -> None:
    f = FIFO(key_func)
    f.add(Obj("foo", 10))
    f.add(Obj("bar", 1))
    f.add(Obj("foo", 11))
    f.add(Obj("foo", 13))
    f.add(Obj("zab", 30))
    assert pop(f).val == 13
    f.add(Obj("foo", 14))  # foo does not jump back in line
    assert [pop(f).val for _ in range(3)] == [1, 30, 14]


def _replace_ab(f: FIFO) -> None:
    f.replace([Obj("a", 1), Obj("b", 2)], "0")


@pytest.mark.parametrize(
    ("actions", "expected_synced"),
    [
        ([], False),
        ([lambda f: f.add(Obj("a", 1))], True),
        ([lambda f: f.replace([], "0")], True),
        ([_replace_ab], False),
        ([_replace_ab, pop], False),
        ([_replace_ab, pop, pop], True),
    ],
)
def test_fifo_has_synced(actions: list[Any], expected_synced: bool) -> None:
    f = FIFO(key_func)
    for action in actions:
        action(f)
    assert f.has_synced() is expected_synced


def test_fifo_pop_should_unblock_when_closed() -> None:
    f = FIFO(key_func)
    outcomes: list[type[BaseException]] = []
    lock = threading.Lock()

    def popper() -> None:
        try:
            f.pop(lambda obj, initial: None)
        except FIFOClosedError as exc:
            with lock:
                outcomes.append(type(exc))

    threads = [threading.Thread(target=popper) for _ in range(10)]
    for t in threads:
        t.start()
    f.close()
    for t in threads:
        t.join(5)
        assert not t.is_alive(), "Pop did not return after Close"
    assert outcomes == [FIFOClosedError] * 10


def test_fifo_is_in_initial_list_and_skips_deleted_keys() -> None:
    f = FIFO(key_func)
    _replace_ab(f)
    f.delete(Obj("a", None))
    seen: list[tuple[Any, bool]] = []
    f.pop(lambda obj, initial: seen.append((obj.val, initial)))
    f.add(Obj("c", 3))
    f.pop(lambda obj, initial: seen.append((obj.val, initial)))
    assert seen == [(2, True), (3, False)]


def test_fifo_resync_requeues_stored_keys_not_in_line() -> None:
    f = FIFO(key_func)
    f.add(Obj("a", 1))
    f.add(Obj("b", 2))
    f.resync()
    assert [pop(f).val for _ in range(2)] == [1, 2]
    assert len(f) == 0

"""The basic work queue: fair, stingy, deduplicated, re-add while processing, shut-down.

Ports of client-go's queue_test.go (TestBasic, TestAddWhileProcessing, TestLen, TestReinsert,
the drain/shut-down tests and TestGarbageCollection).
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable

import pytest

from mcm.runtime.clock import FakeClock
from mcm.runtime.workqueue import Queue

TIMEOUT = 10.0


def eventually(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll ``predicate`` (bounded), like client-go's tests do with wait.Poll."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


def start(fn: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_worked_sequence_from_the_spec() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert q.get() == ("a", False)
    assert q.len() == 1
    q.add("a")  # processing: only marked dirty
    assert q.len() == 1
    q.done("a")
    assert [q.get()[0], q.get()[0]] == ["b", "a"]


def test_fifo_order() -> None:
    q: Queue[int] = Queue()
    for i in range(100):
        q.add(i)
    assert [q.get()[0] for _ in range(100)] == list(range(100))


def test_duplicate_keeps_its_first_position() -> None:
    q: Queue[str] = Queue()
    for key in ("x", "y", "x", "z", "y"):
        q.add(key)
    assert [q.get()[0] for _ in range(3)] == ["x", "y", "z"]
    assert q.len() == 0


def test_basic_concurrent_producers_and_consumers_never_share_an_item() -> None:
    q: Queue[int] = Queue()
    producers, consumers, items = 20, 8, 50
    active: set[int] = set()
    active_lock = threading.Lock()
    violations: list[int] = []
    processed: list[int] = []

    def produce() -> None:
        for i in range(items):
            q.add(i)

    def consume() -> None:
        while True:
            item, shutdown = q.get()
            if shutdown:
                return
            assert item is not None
            with active_lock:
                if item in active:
                    violations.append(item)
                active.add(item)
            time.sleep(0)  # yield so overlapping processing would show up
            with active_lock:
                active.discard(item)
                processed.append(item)
            q.done(item)

    consumer_threads = [start(consume) for _ in range(consumers)]
    for thread in [start(produce) for _ in range(producers)]:
        thread.join(TIMEOUT)
    eventually(lambda: q.len() == 0 and not active)
    q.shut_down()
    for thread in consumer_threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    assert violations == []
    assert set(processed) == set(range(items))
    assert len(processed) <= producers * items


def test_add_while_processing_runs_once_more_after_done() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    item, _ = q.get()
    assert item == "foo"
    q.add("foo")
    q.add("foo")
    assert q.len() == 0  # not handed out while still processing
    q.done("foo")
    assert q.len() == 1
    assert q.get() == ("foo", False)
    q.done("foo")
    assert q.len() == 0


def test_len_counts_only_queued_items() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    assert q.len() == 1
    q.add("bar")
    assert q.len() == 2
    q.add("foo")
    assert q.len() == 2
    q.get()
    assert q.len() == 1


def test_reinsert_after_done() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    item, _ = q.get()
    assert item == "foo"
    q.add(item)
    q.done(item)
    assert q.get() == ("foo", False)
    q.done("foo")
    assert q.len() == 0


def test_done_for_an_item_not_processing_changes_nothing() -> None:
    q: Queue[str] = Queue()
    q.done("ghost")
    q.add("a")
    q.done("a")  # queued, not processing
    assert q.len() == 1
    assert q.get() == ("a", False)
    q.done("a")
    assert q.len() == 0


def test_get_blocks_until_an_item_arrives() -> None:
    q: Queue[str] = Queue()
    got: list[tuple[str | None, bool]] = []
    thread = start(lambda: got.append(q.get()))
    q.add("late")
    thread.join(TIMEOUT)
    assert got == [("late", False)]


def test_get_within_hands_out_a_queued_item_at_once_and_polls_with_no_time() -> None:
    q: Queue[str] = Queue(clock=FakeClock())
    assert q.get_within(0) is None
    q.add("a")
    assert q.get_within(0) == ("a", False)
    q.add("b")
    assert q.get_within(30) == ("b", False)  # no waiting, no clock step needed


def test_get_within_gives_up_after_the_time_on_the_queues_clock() -> None:
    clock = FakeClock()
    q: Queue[str] = Queue(clock=clock)
    got: list[tuple[str | None, bool] | None] = []
    thread = start(lambda: got.append(q.get_within(30)))
    clock.block_until_waiters()
    clock.step(29)
    assert got == []  # not yet
    clock.step(1)
    thread.join(TIMEOUT)
    assert got == [None]
    assert q._getters == 0


def test_get_within_takes_an_item_that_arrives_while_waiting() -> None:
    clock = FakeClock()
    q: Queue[str] = Queue(clock=clock)
    got: list[tuple[str | None, bool] | None] = []
    thread = start(lambda: got.append(q.get_within(30)))
    clock.block_until_waiters()
    q.add("late")
    thread.join(TIMEOUT)
    assert got == [("late", False)]


def test_get_within_reports_shut_down_before_the_time() -> None:
    clock = FakeClock()
    q: Queue[str] = Queue(clock=clock)
    got: list[tuple[str | None, bool] | None] = []
    thread = start(lambda: got.append(q.get_within(30)))
    clock.block_until_waiters()
    q.shut_down()
    thread.join(TIMEOUT)
    assert got == [(None, True)]
    assert q.get_within(0) == (None, True)


def test_shut_down_still_hands_out_queued_items_then_reports_shutdown() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.add("b")
    q.shut_down()
    assert q.shutting_down()
    q.add("c")  # refused
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    assert q.get() == (None, True)


def test_shut_down_wakes_blocked_getters() -> None:
    q: Queue[str] = Queue()
    results: list[tuple[str | None, bool]] = []
    threads = [start(lambda: results.append(q.get())) for _ in range(3)]
    eventually(lambda: q._getters == 3)  # all three are blocked in get()
    q.shut_down()
    for thread in threads:
        thread.join(TIMEOUT)
    assert results == [(None, True)] * 3


def test_add_while_processing_after_shut_down_is_refused_but_done_requeues_earlier_add() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.get()
    q.add("a")  # dirty before shut-down
    q.shut_down()
    q.done("a")  # done after shut-down still requeues the dirty item
    assert q.get() == ("a", False)
    q.add("a")  # processing again; refused now
    q.done("a")
    assert q.get() == (None, True)


def test_queue_drainage_using_shut_down_with_drain() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    q.add("bar")
    first, _ = q.get()
    second, _ = q.get()
    assert first is not None and second is not None
    finished = threading.Event()
    drainer = start(lambda: (q.shut_down_with_drain(), finished.set()))  # type: ignore[func-returns-value]
    assert not finished.wait(0.05)  # processing items keep it blocked
    q.done(first)
    assert not finished.wait(0.05)
    q.done(second)
    assert finished.wait(TIMEOUT)
    drainer.join(TIMEOUT)


def test_shut_down_with_drain_returns_at_once_when_nothing_is_processing() -> None:
    q: Queue[str] = Queue()
    q.add("queued")
    q.shut_down_with_drain()  # waits only for in-flight items, not for queued ones
    assert q.get() == ("queued", False)


def test_no_queue_drainage_using_shut_down() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    q.get()
    q.shut_down()  # returns although foo is still processing
    assert q.shutting_down()


def test_force_queue_shutdown_using_shut_down() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    q.get()
    finished = threading.Event()
    start(lambda: (q.shut_down_with_drain(), finished.set()))  # type: ignore[func-returns-value]
    assert not finished.wait(0.05)
    q.shut_down()
    assert finished.wait(TIMEOUT)


def test_queue_drainage_with_dirty_item() -> None:
    q: Queue[str] = Queue()
    q.add("foo")
    q.get()
    q.add("foo")  # dirty while processing
    finished = threading.Event()
    start(lambda: (q.shut_down_with_drain(), finished.set()))  # type: ignore[func-returns-value]
    assert not finished.wait(0.05)
    q.done("foo")  # requeued: processing is empty, drain finishes
    assert finished.wait(TIMEOUT)
    assert q.get() == ("foo", False)
    q.done("foo")
    assert q.get() == (None, True)


def test_queue_is_always_truthy() -> None:
    assert bool(Queue())


def test_unhashable_items_are_rejected() -> None:
    q: Queue[object] = Queue()  # type: ignore[type-var]
    with pytest.raises(TypeError):
        q.add([1, 2])  # type: ignore[arg-type]
    q.add("ok")  # the lock was released
    assert q.get() == ("ok", False)


def test_garbage_collection_after_shut_down() -> None:
    q: Queue[str] = Queue(name="gc-test")  # named: has an updater thread
    ref = weakref.ref(q)
    q.shut_down()
    eventually(lambda: not any(t.name == "workqueue-unfinished-work-gc-test" for t in threading.enumerate()))
    del q
    gc.collect()
    assert ref() is None

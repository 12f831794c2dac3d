"""The delaying queue with a FakeClock: delivery on step, earliest-time dedup, shut-down.

Ports of client-go's delaying_queue_test.go (TestSimpleQueue, TestDeduping, TestAddTwoFireEarly,
TestCopyShifting) plus the divergence checklist items (zero delay, direct add independence).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mcm.runtime.clock import FakeClock
from mcm.runtime.workqueue import DelayingQueue

TIMEOUT = 10.0


def eventually(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll ``predicate`` (bounded), like client-go's waitForAdded."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


def step(q: DelayingQueue[str], clock: FakeClock, seconds: float) -> None:
    """Step once the waiting loop has parked at least once.

    The loop may still be catching up afterwards (a notified waiter counts as parked until it
    runs), so deliveries are awaited with ``eventually``; the loop only ever delivers items
    whose ready time the clock has reached, so "not yet delivered" checks cannot be fooled
    into failing.
    """
    clock.block_until_waiters()
    clock.step(seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> Iterator[DelayingQueue[str]]:
    queue: DelayingQueue[str] = DelayingQueue(clock=clock)
    yield queue
    queue.shut_down()


def drain(q: DelayingQueue[str]) -> list[str]:
    items = []
    while q.len():
        item, _ = q.get()
        assert item is not None
        items.append(item)
        q.done(item)
    return items


def test_simple_queue(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("foo", 0.050)
    step(q, clock, 0.049)
    assert q.len() == 0
    clock.step(0.001)
    eventually(lambda: q.len() == 1)
    assert q.get() == ("foo", False)
    q.done("foo")
    step(q, clock, 60.0)  # nothing else fires, the heartbeat changes nothing
    assert q.len() == 0
    assert q.waiting_len() == 0


def test_deduping_keeps_the_earliest_time(q: DelayingQueue[str], clock: FakeClock) -> None:
    first = "foo"
    q.add_after(first, 0.050)
    q.add_after(first, 0.070)  # later request: ignored
    assert q.waiting_len() == 1
    step(q, clock, 0.060)
    eventually(lambda: q.len() == 1)
    assert q.waiting_len() == 0  # the 70 ms request left no entry behind
    drain(q)
    step(q, clock, 0.020)
    assert q.len() == 0

    q.add_after(first, 0.070)
    q.add_after(first, 0.050)  # earlier request: moves it forward
    step(q, clock, 0.060)
    eventually(lambda: q.len() == 1)
    assert q.waiting_len() == 0
    drain(q)


def test_add_two_fire_early(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("foo", 1.0)
    q.add_after("bar", 0.050)
    step(q, clock, 0.060)
    eventually(lambda: q.len() == 1)
    assert drain(q) == ["bar"]
    q.add_after("foo", 0.030)  # earlier than the pending 1 s
    step(q, clock, 0.040)
    eventually(lambda: q.len() == 1)
    assert drain(q) == ["foo"]
    step(q, clock, 1.0)
    assert q.len() == 0


def test_copy_shifting_delivers_in_ready_order(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("foo", 1.0)
    q.add_after("bar", 0.5)
    q.add_after("baz", 0.25)
    step(q, clock, 2.0)
    eventually(lambda: q.len() == 3)
    assert drain(q) == ["baz", "bar", "foo"]


def test_zero_or_negative_delay_adds_at_once(q: DelayingQueue[str]) -> None:
    q.add_after("now", 0)
    q.add_after("past", -1.0)
    assert q.len() == 2  # synchronously, without the loop
    assert q.waiting_len() == 0


def test_direct_add_does_not_cancel_a_waiting_entry(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add_after("foo", 1.0)
    q.add("foo")
    assert drain(q) == ["foo"]
    assert q.waiting_len() == 1
    step(q, clock, 1.0)
    eventually(lambda: q.len() == 1)  # fires again: one more processing
    assert drain(q) == ["foo"]


def test_due_entry_for_a_queued_item_is_deduplicated(q: DelayingQueue[str], clock: FakeClock) -> None:
    q.add("foo")
    q.add_after("foo", 1.0)
    step(q, clock, 1.0)
    eventually(lambda: q.waiting_len() == 0)
    assert q.len() == 1


def test_many_items_with_equal_delays_keep_insertion_order(q: DelayingQueue[str], clock: FakeClock) -> None:
    keys = [f"k{i}" for i in range(200)]
    for key in keys:
        q.add_after(key, 5.0)
    step(q, clock, 5.0)
    eventually(lambda: q.len() == len(keys))
    assert drain(q) == keys


def test_shut_down_discards_waiting_items_and_ignores_add_after(clock: FakeClock) -> None:
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("later", 1.0)
    q.shut_down()
    assert q.waiting_len() == 0
    q.add_after("refused", 0)
    q.add_after("refused-too", 1.0)
    clock.step(2.0)
    assert q.get() == (None, True)


def test_background_threads_end_on_shut_down() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(name="thread-end-test", clock=clock)
    ours = [t for t in threading.enumerate() if t.name.endswith("-thread-end-test")]
    assert sorted(t.name for t in ours) == [
        "workqueue-unfinished-work-thread-end-test",
        "workqueue-waiting-loop-thread-end-test",
    ]
    q.shut_down()
    for thread in ours:
        thread.join(TIMEOUT)
        assert not thread.is_alive()


def test_shut_down_with_drain_stops_the_loop_and_waits_for_processing(clock: FakeClock) -> None:
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add("busy")
    q.get()
    q.add_after("later", 1.0)
    finished = threading.Event()

    def drain_it() -> None:
        q.shut_down_with_drain()
        finished.set()

    threading.Thread(target=drain_it, daemon=True).start()
    assert not finished.wait(0.05)
    q.done("busy")
    assert finished.wait(TIMEOUT)
    assert q.waiting_len() == 0


def test_real_clock_delivers_short_delays() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    try:
        q.add_after("soon", 0.01)
        eventually(lambda: q.len() == 1)
    finally:
        q.shut_down()

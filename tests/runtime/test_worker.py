"""The controller worker: forget on success, bounded rate-limited retries, bad keys, survival."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping

import pytest

from mcm.driver import Code, MachineError
from mcm.runtime import errors
from mcm.runtime.client import errors as client_errors
from mcm.runtime.clock import FakeClock
from mcm.runtime.worker import (
    DONE,
    Result,
    WorkerSlot,
    current_worker,
    join_workers,
    process_next_work_item,
    start_workers,
)
from mcm.runtime.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue

TIMEOUT = 10.0


def eventually(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


class Reported:
    """Captures handle_error calls (and skips its 1 ms throttle)."""

    def __init__(self) -> None:
        self.calls: list[tuple[BaseException, dict[str, object]]] = []
        self.lock = threading.Lock()

    def __call__(self, err: BaseException, context: Mapping[str, object]) -> None:
        with self.lock:
            self.calls.append((err, dict(context)))

    def outcomes(self) -> list[object]:
        return [ctx.get("outcome") for _, ctx in self.calls]


@pytest.fixture
def reported(monkeypatch: pytest.MonkeyPatch) -> Reported:
    recorder = Reported()
    monkeypatch.setattr(errors, "ERROR_HANDLERS", [recorder])
    return recorder


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> Iterator[RateLimitingQueue[str]]:
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock
    )
    yield queue
    queue.shut_down()


def failing(calls: list[str]) -> Callable[[str], None]:
    def reconcile(key: str) -> None:
        calls.append(key)
        raise RuntimeError(f"cannot sync {key}")

    return reconcile


def deliver(q: RateLimitingQueue[str], clock: FakeClock, seconds: float) -> None:
    clock.block_until_waiters()
    clock.step(seconds)
    eventually(lambda: q.len() == 1)


def test_success_forgets_and_marks_done(q: RateLimitingQueue[str], reported: Reported) -> None:
    q.add_rate_limited("ns/a")  # pretend earlier failures
    q.add("ns/a")
    assert q.num_requeues("ns/a") == 1
    seen: list[str] = []
    assert process_next_work_item(q, seen.append, 15, True)
    assert seen == ["ns/a"]
    assert q.num_requeues("ns/a") == 0
    q.add("ns/a")  # done was called: the key can be taken again at once
    assert q.len() == 1
    assert reported.calls == []


def test_success_without_forget_keeps_the_back_off(q: RateLimitingQueue[str]) -> None:
    q.add_rate_limited("ns/a")
    q.add("ns/a")
    assert process_next_work_item(q, lambda key: None, 15, False)
    assert q.num_requeues("ns/a") == 1


def test_errors_requeue_rate_limited_until_max_retries_then_drop(
    q: RateLimitingQueue[str], clock: FakeClock, reported: Reported
) -> None:
    calls: list[str] = []
    reconcile = failing(calls)
    q.add("ns/m")
    assert process_next_work_item(q, reconcile, 2, True, name="machine")
    assert q.num_requeues("ns/m") == 1
    assert q.len() == 0 and q.waiting_len() == 1

    deliver(q, clock, 1.0)  # first retry after base = 1 s
    assert process_next_work_item(q, reconcile, 2, True, name="machine")
    assert q.num_requeues("ns/m") == 2

    deliver(q, clock, 2.0)  # second retry after 2 s
    assert process_next_work_item(q, reconcile, 2, True, name="machine")
    assert q.num_requeues("ns/m") == 0  # dropped and forgotten
    assert q.len() == 0 and q.waiting_len() == 0

    assert calls == ["ns/m"] * 3
    assert reported.outcomes() == ["requeued", "requeued", "dropped"]
    err, context = reported.calls[-1]
    assert str(err) == "cannot sync ns/m"
    assert context["worker"] == "machine"
    assert context["key"] == "ns/m"


def test_non_string_key_is_forgotten_and_reported(clock: FakeClock, reported: Reported) -> None:
    q: RateLimitingQueue[object] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock
    )
    q.add_rate_limited(42)
    q.add(42)
    seen: list[str] = []
    assert process_next_work_item(q, seen.append)
    assert seen == []
    assert q.num_requeues(42) == 0
    assert isinstance(reported.calls[0][0], TypeError)
    q.add(42)
    assert q.len() == 1  # done was called
    q.shut_down()


def test_shutdown_returns_false(q: RateLimitingQueue[str]) -> None:
    q.add("ns/last")
    q.shut_down()
    seen: list[str] = []
    assert process_next_work_item(q, seen.append)
    assert not process_next_work_item(q, seen.append)
    assert seen == ["ns/last"]


def test_done_is_called_even_when_a_base_exception_escapes(q: RateLimitingQueue[str]) -> None:
    class Abort(BaseException):
        pass

    def abort(key: str) -> None:
        raise Abort

    q.add("ns/a")
    with pytest.raises(Abort):
        process_next_work_item(q, abort)
    q.add("ns/a")
    assert q.len() == 1


def test_workers_survive_reconcile_exceptions_and_never_share_a_key(reported: Reported) -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0, 0.0))
    stop = threading.Event()
    active: set[str] = set()
    overlaps: list[str] = []
    done_keys: list[str] = []
    lock = threading.Lock()

    def reconcile(key: str) -> None:
        with lock:
            if key in active:
                overlaps.append(key)
            active.add(key)
        try:
            time.sleep(0)
            if key.startswith("bad"):
                raise ValueError(key)
        finally:
            with lock:
                active.discard(key)
                done_keys.append(key)

    threads = start_workers(q, "test", 4, reconcile, 3, stop)
    for i in range(50):
        q.add(f"bad/{i % 5}")
        q.add(f"good/{i}")
    eventually(lambda: sum(k.startswith("good") for k in done_keys) >= 50)
    eventually(lambda: q.len() == 0 and q.waiting_len() == 0 and not active)
    assert all(t.is_alive() for t in threads)  # exceptions never ended a worker
    stop.set()
    q.shut_down()
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    assert overlaps == []
    assert "dropped" in reported.outcomes()
    assert {k for k in done_keys if k.startswith("good")} == {f"good/{i}" for i in range(50)}


def test_result_requeue_after_forgets_then_adds_after(q: RateLimitingQueue[str], clock: FakeClock) -> None:
    q.add_rate_limited("ns/a")
    q.add("ns/a")
    assert process_next_work_item(q, lambda key: Result.after(5.0))
    assert q.num_requeues("ns/a") == 0  # forgotten before the delayed add
    assert q.len() == 0 and q.waiting_len() == 1
    clock.block_until_waiters()
    clock.step(4.9)
    assert q.len() == 0
    clock.step(0.1)
    eventually(lambda: q.len() == 1)


def test_result_done_and_none_do_not_requeue(q: RateLimitingQueue[str]) -> None:
    q.add("ns/a")
    assert process_next_work_item(q, lambda key: DONE)
    q.add("ns/b")
    assert process_next_work_item(q, lambda key: None)
    assert q.len() == 0 and q.waiting_len() == 0


def test_result_zero_delay_requeues_at_once(q: RateLimitingQueue[str]) -> None:
    q.add("ns/a")
    assert process_next_work_item(q, lambda key: Result.after(0))
    assert q.len() == 1


def test_exception_is_logged_with_traceback_when_not_really_crashing(
    q: RateLimitingQueue[str], reported: Reported, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)
    q.add("ns/a")
    assert process_next_work_item(q, failing([]))
    _, context = reported.calls[0]
    assert "RuntimeError: cannot sync ns/a" in str(context["traceback"])
    assert "test_worker.py" in str(context["traceback"])
    assert q.num_requeues("ns/a") == 1


def test_panic_propagated_when_really_crashing(
    q: RateLimitingQueue[str], reported: Reported, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go TestPanicPropagated: an exception escaping a reconcile ends the process."""
    fatal: list[BaseException] = []
    panics: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    monkeypatch.setattr(errors, "PANIC_HANDLERS", [panics.append])
    q.add("ns/a")
    with pytest.raises(RuntimeError, match="cannot sync ns/a"):
        process_next_work_item(q, failing([]))
    assert [str(e) for e in fatal] == ["cannot sync ns/a"]
    assert panics == fatal
    assert reported.calls == []  # not handled as an ordinary error
    q.add("ns/a")
    assert q.len() == 1  # done was still called


# --- errors and bugs (issue 23): a TransientError is retried, never a crash, never dropped -------


def transient(calls: list[str], error: Exception) -> Callable[[str], None]:
    def reconcile(key: str) -> None:
        calls.append(key)
        raise error

    return reconcile


@pytest.mark.parametrize(
    "error",
    [
        client_errors.ConnectionFailed("PUT /apis/...: ProtocolError: Connection reset by peer"),
        client_errors.Conflict({"message": "the object has been modified", "code": 409}),
        MachineError(Code.Unavailable, "cloud busy"),
    ],
    ids=["reset", "409", "driver"],
)
def test_a_transient_error_under_really_crash_is_requeued_not_fatal(
    q: RateLimitingQueue[str], reported: Reported, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """The issue's crash: a ConnectionFailed escaping a reconcile ended the process."""
    fatal: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    q.add("ns/a")
    assert process_next_work_item(q, transient([], error), 15, name="machine")
    assert fatal == []
    assert q.num_requeues("ns/a") == 1 and q.waiting_len() == 1
    err, context = reported.calls[0]
    assert err is error
    assert context == {"worker": "machine", "key": "ns/a", "requeues": 0, "outcome": "requeued"}


def test_a_transient_error_is_retried_with_growing_back_off_past_max_retries(
    q: RateLimitingQueue[str], clock: FakeClock, reported: Reported
) -> None:
    calls: list[str] = []
    reconcile = transient(calls, client_errors.ConnectionFailed("connection refused", refused=True))
    q.add("ns/m")
    for delay in (1.0, 2.0, 4.0, 8.0):  # the limiter's per-item exponential back-off
        assert process_next_work_item(q, reconcile, 2, True)
        deliver(q, clock, delay)
    assert len(calls) == 4  # past max_retries=2: still there
    assert reported.outcomes() == ["requeued"] * 4
    assert q.num_requeues("ns/m") == 4


def test_a_programming_error_still_ends_the_process_under_really_crash(
    q: RateLimitingQueue[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fatal: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    monkeypatch.setattr(errors, "PANIC_HANDLERS", [])
    q.add("ns/a")
    with pytest.raises(KeyError):
        process_next_work_item(q, transient([], KeyError("status")))
    assert len(fatal) == 1


def test_workers_start_as_the_work_needs_them_up_to_count() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0, 0.0))
    stop = threading.Event()
    release = threading.Event()
    running: set[str] = set()
    lock = threading.Lock()

    def reconcile(key: str) -> None:
        with lock:
            running.add(key)
        release.wait(TIMEOUT)

    threads = start_workers(q, "lazy", 3, reconcile, 3, stop)
    assert len(threads) == 1  # a quiet queue costs one thread
    try:
        q.add("ns/a")
        eventually(lambda: running == {"ns/a"})
        eventually(lambda: len(threads) == 2)  # an idle worker waits in reserve
        q.add("ns/b")
        q.add("ns/c")
        eventually(lambda: running == {"ns/a", "ns/b", "ns/c"})  # none waited for a busy worker
        q.add("ns/d")
        assert len(threads) == 3  # never more than count
        assert "ns/d" not in running
    finally:
        release.set()
    eventually(lambda: "ns/d" in running)
    stop.set()
    q.shut_down()
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()


class Blocking:
    """A reconcile that holds each key until released, recording which keys run."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.done: list[str] = []
        self.release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, key: str) -> None:
        with self.lock:
            self.running.add(key)
        self.release.wait(TIMEOUT)
        with self.lock:
            self.running.discard(key)
            self.done.append(key)


def test_idle_workers_end_after_the_idle_timeout_down_to_one() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0, 0.0), clock=clock)
    stop = threading.Event()
    reconcile = Blocking()
    threads = start_workers(q, "shed", 4, reconcile, 3, stop, clock=clock, idle_timeout=30.0)
    for key in ("ns/a", "ns/b", "ns/c"):
        q.add(key)
    eventually(lambda: reconcile.running == {"ns/a", "ns/b", "ns/c"})
    eventually(lambda: len(threads) == 4)  # a burst: three busy, one idle in reserve
    started = list(threads)
    reconcile.release.set()
    eventually(lambda: len(reconcile.done) == 3)
    clock.block_until_waiters(3)  # all four idle; the three that worked wait on the clock
    clock.step(29.0)
    assert len(threads) == 4  # not idle long enough yet
    clock.step(1.0)
    eventually(lambda: len(threads) == 1)  # back to one idle worker, as before the burst
    for thread in started:
        if thread not in threads:
            thread.join(TIMEOUT)
            assert not thread.is_alive()
    clock.step(300.0)
    assert len(threads) == 1  # the last idle worker stays
    q.add("ns/d")
    eventually(lambda: "ns/d" in reconcile.done)  # and still serves the queue
    stop.set()
    q.shut_down()
    join_workers(threads, TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)


def test_workers_that_keep_getting_items_still_end_when_the_queue_has_spares() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0, 0.0), clock=clock)
    stop = threading.Event()
    reconcile = Blocking()
    threads = start_workers(q, "trickle", 4, reconcile, 3, stop, clock=clock, idle_timeout=30.0)
    for key in ("ns/a", "ns/b", "ns/c"):
        q.add(key)
    eventually(lambda: len(threads) == 4)
    reconcile.release.set()
    eventually(lambda: len(reconcile.done) == 3)
    for second in range(1, 61):  # an item every second: no thread is idle for 30 s on its own
        clock.step(1.0)
        q.add(f"ns/t{second}")
        eventually(lambda s=second: f"ns/t{s}" in reconcile.done)  # type: ignore[misc]
    eventually(lambda: len(threads) <= 2)  # one to work, at most one in reserve
    stop.set()
    q.shut_down()
    join_workers(threads, TIMEOUT)


def test_no_worker_ends_once_stop_is_set_so_joining_waits_for_all() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0, 0.0), clock=clock)
    stop = threading.Event()
    reconcile = Blocking()
    threads = start_workers(q, "stopping", 3, reconcile, 3, stop, clock=clock, idle_timeout=30.0)
    q.add("ns/a")
    q.add("ns/b")
    eventually(lambda: len(threads) == 3)
    reconcile.release.set()
    eventually(lambda: len(reconcile.done) == 2)
    stop.set()
    clock.block_until_waiters(2)  # the two that worked wait on the clock
    clock.step(100.0)
    assert len(threads) == 3
    q.shut_down()
    join_workers(threads, TIMEOUT)
    assert len(threads) == 3
    assert not any(thread.is_alive() for thread in threads)


class Stuck:
    """A reconcile that holds ``ns/stuck`` until released and hands out its worker's slot."""

    def __init__(self) -> None:
        self.slots: list[WorkerSlot | None] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done: list[str] = []
        self.concurrent = 0
        self.max_concurrent = 0
        self.lock = threading.Lock()

    def __call__(self, key: str) -> None:
        if key != "ns/stuck":
            with self.lock:
                self.done.append(key)
            return
        with self.lock:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
            self.slots.append(current_worker())
        self.entered.set()
        self.release.wait(TIMEOUT)
        with self.lock:
            self.concurrent -= 1
            self.done.append(key)


def test_a_replaced_worker_gives_its_place_away_and_keeps_its_key_until_it_returns() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0, 0.0))
    stop = threading.Event()
    reconcile = Stuck()
    threads = start_workers(q, "replace", 1, reconcile, 3, stop)
    q.add("ns/stuck")
    assert reconcile.entered.wait(TIMEOUT)
    stuck = threads[0]
    q.add("ns/other")
    assert q.len() == 1 and len(threads) == 1  # the pool's only worker is stuck
    slot = reconcile.slots[0]
    assert slot is not None
    replacer = threading.Thread(target=slot.replace)  # from another thread, as a watchdog does
    replacer.start()
    replacer.join(TIMEOUT)
    eventually(lambda: reconcile.done == ["ns/other"])  # its replacement serves the queue
    assert stuck not in threads and len(threads) == 1  # the pool keeps its size
    assert not slot.replace()  # once only
    q.add("ns/stuck")  # while the stuck worker holds it: kept back, never processed twice at once
    assert q.len() == 0 and reconcile.done == ["ns/other"]
    reconcile.release.set()
    eventually(lambda: reconcile.done.count("ns/stuck") == 2)  # once returned, the key is served again
    assert reconcile.max_concurrent == 1
    stuck.join(TIMEOUT)
    assert not stuck.is_alive()  # the replaced worker ended after its item
    assert len(threads) == 1
    stop.set()
    q.shut_down()
    join_workers(threads, TIMEOUT)


def test_only_a_pool_worker_has_a_slot() -> None:
    assert current_worker() is None

"""Cases of client-go's tools/record event_test.go not covered elsewhere in tests/runtime/record.

``TestEventf`` (create/patch sequences with counts, through recorder, broadcaster, correlator and
sink), ``TestMultiSinkCache`` (each sink correlates on its own), ``TestLotsOfEvents`` (1000 events
failing four times each: none dropped, each tried five times) and ``TestNonRacyShutdown``.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from mcm.runtime.clock import FakeClock
from mcm.runtime.record import MAX_QUEUED_EVENTS, EventBroadcaster
from tests.runtime.record.test_sink import FakeSink

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
WAIT = 5.0

POD = {"kind": "Pod", "apiVersion": "v1", "name": "foo", "namespace": "baz", "uid": "bar"}
CONTAINER = {**POD, "fieldPath": "spec.containers[2]"}
OTHER_POD = {**POD, "uid": "differentUid"}
NODE = {"kind": "Node", "apiVersion": "v1", "name": "foo", "uid": "quux"}

# (reference, reason, message) -> (verb the sink sees, count, namespace of the event)
EVENTF_TABLE: list[tuple[dict[str, str], str, str, str, int, str]] = [
    (POD, "Started", "some verbose message: 1", "create", 1, "baz"),
    (CONTAINER, "Started", "some verbose message: 1", "create", 1, "baz"),
    (POD, "Started", "some verbose message: 1", "patch", 2, "baz"),
    (OTHER_POD, "Killed", "some other verbose message: 1", "create", 1, "baz"),
    (CONTAINER, "Started", "some verbose message: 1", "patch", 2, "baz"),
    (OTHER_POD, "Stopped", "some other verbose message: 1", "create", 1, "baz"),
    (OTHER_POD, "Stopped", "some other verbose message: 1", "patch", 2, "baz"),
    (NODE, "Started", "some verbose message: 1", "create", 1, "default"),
]


class CountingSink(FakeSink):
    """A FakeSink that signals every call and stores events per namespace/name."""

    def __init__(self) -> None:
        super().__init__()
        self.cond = threading.Condition()

    def _save(self, event: dict[str, Any]) -> dict[str, Any]:
        saved = super()._save(event)
        with self.cond:
            self.cond.notify_all()
        return saved

    def wait_for_calls(self, count: int) -> list[tuple[str, Any]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.calls) >= count, WAIT), self.calls
            return list(self.calls)


def replay_table(sinks: list[CountingSink]) -> None:
    broadcaster = EventBroadcaster(clock=FakeClock(T0))
    for sink in sinks:
        broadcaster.start_recording_to_sink(sink)
    recorder = broadcaster.new_recorder("eventTest")
    try:
        for n, (ref, reason, message, verb, count, namespace) in enumerate(EVENTF_TABLE, start=1):
            recorder.eventf(ref, "Normal", reason, "%s", message)
            for sink in sinks:
                call_verb, body = sink.wait_for_calls(n)[-1]
                assert call_verb == verb, (n, sink.calls)
                if verb == "patch":
                    assert body["count"] == count
                    assert body["message"] == message
                else:
                    assert body["count"] == count
                    assert body["metadata"]["namespace"] == namespace
                    assert body["involvedObject"]["uid"] == ref["uid"]
                    assert body["involvedObject"].get("fieldPath", "") == ref.get("fieldPath", "")
                    assert body["source"] == {"component": "eventTest"}
    finally:
        broadcaster.shutdown()


def test_eventf_creates_then_patches_with_counts() -> None:
    replay_table([CountingSink()])


def test_each_sink_correlates_on_its_own() -> None:
    first, second = CountingSink(), CountingSink()
    replay_table([first, second])
    assert [verb for verb, _ in first.calls] == [verb for verb, _ in second.calls]


def test_lots_of_events_none_dropped_each_tried_five_times() -> None:
    attempts: dict[str, int] = {}
    attempts_lock = threading.Lock()
    written = threading.Semaphore(0)

    class FlakySink(FakeSink):
        def create(self, event: dict[str, Any]) -> dict[str, Any]:
            with attempts_lock:
                attempts[event["message"]] = attempts.get(event["message"], 0) + 1
                if attempts[event["message"]] < 5:
                    raise ConnectionError("fake error")
            written.release()
            return event

    logged = threading.Semaphore(0)
    broadcaster = EventBroadcaster(clock=FakeClock(T0), sleep_duration=0.0)
    broadcaster.start_recording_to_sink(FlakySink())
    broadcaster.start_logging(lambda line: logged.release())
    recorder = broadcaster.new_recorder("eventTest")

    def record(numbers: range) -> None:
        for i in numbers:  # a distinct object (spam filter) and reason (aggregation) each
            ref = {**POD, "name": f"foo-{i}"}
            recorder.eventf(ref, "Normal", f"Reason-{i}", "%d", i)

    producers = [threading.Thread(target=record, args=(range(k, MAX_QUEUED_EVENTS, 4),)) for k in range(4)]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(WAIT)
    try:
        for _ in range(MAX_QUEUED_EVENTS):
            assert written.acquire(timeout=WAIT)
            assert logged.acquire(timeout=WAIT)
        assert sorted(attempts) == sorted(str(i) for i in range(MAX_QUEUED_EVENTS))
        assert set(attempts.values()) == {5}
    finally:
        broadcaster.shutdown()


def test_recording_from_many_threads_then_shutting_down_is_safe() -> None:
    broadcaster = EventBroadcaster(clock=FakeClock(T0), sleep_duration=0.0)
    sink = CountingSink()
    watcher = broadcaster.start_recording_to_sink(sink)
    recorder = broadcaster.new_recorder("eventTest")
    failures: list[BaseException] = []

    def record() -> None:
        try:
            recorder.eventf(POD, "Normal", "Started", "blah")
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=record) for _ in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    broadcaster.shutdown()
    assert watcher.join(WAIT)
    assert failures == []
    (stored,) = sink.stored.values()  # one Event, patched for every repeat the spam filter let through
    assert len(sink.calls) == 25
    assert stored["count"] == 25


def test_a_stalled_watcher_drops_what_its_queues_cannot_hold_and_callers_never_wait() -> None:
    broadcaster = EventBroadcaster(clock=FakeClock(T0))
    entered, release = threading.Event(), threading.Event()
    handled: list[str] = []

    def stalled(event: dict[str, Any]) -> None:
        entered.set()
        release.wait(120)  # far longer than recording takes on a loaded machine
        handled.append(event["message"])

    watcher = broadcaster.start_event_watcher(stalled)
    recorder = broadcaster.new_recorder("eventTest")
    recorder.event(POD, "Normal", "First", "first")
    assert entered.wait(WAIT)

    def record_many() -> None:  # returns at once although nothing is consumed
        for n in range(3 * MAX_QUEUED_EVENTS):
            recorder.event(POD, "Normal", "Many", f"event {n}")

    recording = threading.Thread(target=record_many, daemon=True)
    recording.start()
    recording.join(30)
    assert not recording.is_alive(), "a blocking caller waits for the release"
    release.set()
    broadcaster.shutdown()
    assert watcher.join(WAIT)
    # the watcher's queue holds 1000, the broadcaster's incoming queue at most 1000 more that the
    # distributor had not handed on when the watcher woke up; everything beyond was dropped
    assert 1 + MAX_QUEUED_EVENTS <= len(handled) <= 1 + 2 * MAX_QUEUED_EVENTS
    assert handled[:3] == ["first", "event 0", "event 1"]  # the oldest are kept, later ones dropped

"""Recorder and broadcaster: event fields, validation, non-blocking queues, logging, shutdown."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from structlog.testing import capture_logs

from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import clone
from mcm.runtime.record import MAX_QUEUED_EVENTS, EventBroadcaster, object_reference
from tests.runtime.record.test_sink import FakeSink

T0 = dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=dt.UTC)
WAIT = 5.0
HELD = 120.0
"""Seconds a stalled consumer holds its event: far beyond what recording takes on a loaded
machine, so a caller that waited for it cannot finish within :data:`RETURNS_WITHIN`."""
RETURNS_WITHIN = 30.0


def returns_within(seconds: float, calls: Any) -> bool:
    """True when ``calls()`` returns within ``seconds`` (it runs on a thread of its own)."""
    thread = threading.Thread(target=calls, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


MACHINE = {
    "apiVersion": "machine.sapcloud.io/v1alpha1",
    "kind": "Machine",
    "metadata": {"name": "m1", "namespace": "shoot", "uid": "u-1", "resourceVersion": "42"},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-2", "resourceVersion": "3"}}


class Collector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.got = threading.Condition()

    def __call__(self, event: dict[str, Any]) -> None:
        with self.got:
            self.events.append(event)
            self.got.notify_all()

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        with self.got:
            assert self.got.wait_for(lambda: len(self.events) >= count, WAIT)
            return list(self.events)


@pytest.fixture
def broadcaster() -> Any:
    b = EventBroadcaster(clock=FakeClock(T0))
    yield b
    b.shutdown()


def test_an_event_references_its_object_and_names_its_source(broadcaster: EventBroadcaster) -> None:
    got = Collector()
    broadcaster.start_event_watcher(got)
    recorder = broadcaster.new_recorder("machine-controller", "host-1")
    recorder.eventf(MACHINE, "Normal", "Created", "created VM %s in %d s", "vm-7", 3)
    (event,) = got.wait_for(1)
    name, _, nanos = event["metadata"]["name"].partition(".")
    assert name == "m1"
    assert int(nanos, 16) >= int(T0.timestamp()) * 10**9 + 123456000  # UnixNano, kept unique
    assert event == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event["metadata"]["name"], "namespace": "shoot"},
        "involvedObject": {
            "kind": "Machine",
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "name": "m1",
            "namespace": "shoot",
            "uid": "u-1",
            "resourceVersion": "42",
        },
        "reason": "Created",
        "message": "created VM vm-7 in 3 s",
        "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
        "source": {"component": "machine-controller", "host": "host-1"},
        "reportingComponent": "machine-controller",
        "reportingInstance": "host-1",
    }


def test_cluster_scoped_objects_get_events_in_default(broadcaster: EventBroadcaster) -> None:
    got = Collector()
    broadcaster.start_event_watcher(got)
    recorder = broadcaster.new_recorder("machine-controller")
    recorder.annotated_eventf(NODE, {"a": "b"}, "Warning", "NotReady", "node %s is not ready", "n1")
    (event,) = got.wait_for(1)
    assert event["metadata"]["namespace"] == "default"
    assert event["metadata"]["annotations"] == {"a": "b"}
    assert "namespace" not in event["involvedObject"]
    assert event["source"] == {"component": "machine-controller"}
    assert event["reportingComponent"] == "machine-controller"
    assert "reportingInstance" not in event


def test_bad_type_or_unreferenceable_object_is_dropped_with_a_log(broadcaster: EventBroadcaster) -> None:
    got = Collector()
    broadcaster.start_event_watcher(got)
    recorder = broadcaster.new_recorder("c")
    with capture_logs() as logs:
        recorder.event(MACHINE, "Info", "X", "y")
        recorder.event({"metadata": {"name": "no-kind"}}, "Normal", "X", "y")
        recorder.event(None, "Normal", "X", "y")  # type: ignore[arg-type]
        recorder.event(MACHINE, "Normal", "Ok", "fine")
    assert [e["reason"] for e in got.wait_for(1)] == ["Ok"]
    names = [entry["event"] for entry in logs]
    assert "unsupported_event_type" in names
    assert "could_not_construct_reference" in names


def test_object_reference_accepts_a_reference_and_list_items() -> None:
    ref = {
        "kind": "Pod",
        "apiVersion": "v1",
        "name": "p",
        "namespace": "ns",
        "fieldPath": "spec.containers{a}",
    }
    assert object_reference(ref) == ref
    item = {"metadata": {"name": "m", "namespace": "ns", "uid": "u"}}
    assert object_reference(item, kind="Machine", api_version="machine.sapcloud.io/v1alpha1") == {
        "kind": "Machine",
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "name": "m",
        "namespace": "ns",
        "uid": "u",
    }


def test_a_blocked_sink_never_blocks_callers_and_overflow_is_dropped(broadcaster: EventBroadcaster) -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocked(_event: dict[str, Any]) -> None:
        entered.set()
        release.wait(HELD)

    broadcaster.start_event_watcher(blocked)
    fast = Collector()
    broadcaster.start_event_watcher(fast)
    recorder = broadcaster.new_recorder("c")
    recorder.event(MACHINE, "Normal", "First", "first")
    assert entered.wait(WAIT)
    total = 3 * MAX_QUEUED_EVENTS

    def record_many() -> None:
        for n in range(total):
            recorder.event(MACHINE, "Normal", "Many", f"event {n}")

    with capture_logs() as logs:
        assert returns_within(RETURNS_WITHIN, record_many), "recording waited for the stalled watcher"
    release.set()
    assert len(fast.wait_for(MAX_QUEUED_EVENTS)) >= MAX_QUEUED_EVENTS
    dropped = [e for e in logs if e["event"] == "unable_to_record_event"]
    assert all(e["reason"] == "too many queued events, dropped event" for e in dropped)


def test_watchers_share_one_event_and_the_sink_leaves_it_as_it_was() -> None:
    """client-go hands every watcher the same event; the sink's correlator changes only its copy
    (name, count, firstTimestamp of a repeat), so the other watchers see each event as recorded."""
    broadcaster = EventBroadcaster(clock=FakeClock(T0))
    sink = FakeSink()
    sink_watcher = broadcaster.start_recording_to_sink(sink)  # type: ignore[arg-type]
    seen = Collector()
    broadcaster.start_event_watcher(seen)
    recorder = broadcaster.new_recorder("c")
    for _ in range(2):
        recorder.event(MACHINE, "Normal", "Same", "same message")
    recorded = [clone(e) for e in seen.wait_for(2)]
    broadcaster.shutdown()
    assert sink_watcher.join(WAIT)
    assert [kind for kind, _ in sink.calls] == ["create", "patch"]  # the repeat was correlated
    assert seen.events == recorded  # nothing the sink did shows in what the others got
    assert all("count" not in e or e["count"] == 1 for e in seen.events)
    assert seen.events[1]["metadata"]["name"] != seen.events[0]["metadata"]["name"]


def test_a_failing_sink_does_not_block_the_recorder() -> None:
    clock = FakeClock(T0)
    broadcaster = EventBroadcaster(clock=clock)
    sink = FakeSink([ConnectionError("down")] * 100)
    watcher = broadcaster.start_recording_to_sink(sink)  # type: ignore[arg-type]
    recorder = broadcaster.new_recorder("c")

    def record_50() -> None:
        for n in range(50):
            recorder.event(MACHINE, "Normal", "R", f"m{n}")

    # The sink writer retries on the fake clock, which nobody steps: a recorder that waited for
    # it would never return.
    assert returns_within(RETURNS_WITHIN, record_50)
    clock.block_until_waiters(1, timeout=WAIT)  # the sink writer sleeps before its retry
    assert len(sink.calls) == 1
    broadcaster.shutdown()  # cancels the sleep; the remaining events are tried once each
    assert watcher.join(WAIT)
    assert len(sink.calls) == 25  # the spam filter skipped the other 25


def test_structured_logging_logs_each_event(broadcaster: EventBroadcaster) -> None:
    with capture_logs() as logs:
        broadcaster.start_structured_logging()
        broadcaster.new_recorder("c").event(MACHINE, "Warning", "Failed", "boom")
        deadline = time.monotonic() + WAIT  # the logging watcher runs on its own thread
        while not any(e["event"] == "event_occurred" for e in logs) and time.monotonic() < deadline:
            time.sleep(0.005)
        broadcaster.shutdown()
    (entry,) = [e for e in logs if e["event"] == "event_occurred"]
    assert entry["object"] == "shoot/m1"
    assert (entry["kind"], entry["type"], entry["reason"], entry["message"]) == (
        "Machine",
        "Warning",
        "Failed",
        "boom",
    )


def test_start_logging_passes_one_line(broadcaster: EventBroadcaster) -> None:
    lines: list[str] = []
    done = threading.Event()

    def logf(line: str) -> None:
        lines.append(line)
        done.set()

    broadcaster.start_logging(logf)
    broadcaster.new_recorder("c").event(MACHINE, "Normal", "Created", "made it")
    assert done.wait(WAIT)
    assert lines == [
        'Event(v1.ObjectReference{Kind:"Machine", Namespace:"shoot", Name:"m1", UID:"u-1", '
        'APIVersion:"machine.sapcloud.io/v1alpha1", ResourceVersion:"42", FieldPath:""}): '
        "type: 'Normal' reason: 'Created' made it"
    ]


_TEST_REF = {
    "kind": "Pod",
    "apiVersion": "v1",
    "name": "foo",
    "namespace": "baz",
    "uid": "bar",
    "fieldPath": "spec.containers[2]",
}
_TEST_POD = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "foo", "namespace": "baz", "uid": "bar"}}
_TEST_REF2 = {**_TEST_REF, "uid": "differentUid", "fieldPath": "spec.containers[3]"}


@pytest.mark.parametrize(
    ("obj", "reason", "message", "expected"),
    [
        (
            _TEST_REF,
            "Started",
            "some verbose message: 1",
            'Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", '
            "ResourceVersion:\"\", FieldPath:\"spec.containers[2]\"}): type: 'Normal' reason: 'Started' "
            "some verbose message: 1",
        ),
        (
            _TEST_POD,
            "Killed",
            "some other verbose message: 1",
            'Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", '
            "ResourceVersion:\"\", FieldPath:\"\"}): type: 'Normal' reason: 'Killed' "
            "some other verbose message: 1",
        ),
        (
            _TEST_REF2,
            "Stopped",
            "some verbose message: 1",
            'Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"differentUid", '
            'APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[3]"}): '
            "type: 'Normal' reason: 'Stopped' some verbose message: 1",
        ),
    ],
    ids=["testRef", "testPod", "testRef2"],
)
def test_start_logging_writes_client_gos_line(
    broadcaster: EventBroadcaster, obj: dict[str, Any], reason: str, message: str, expected: str
) -> None:
    """client-go's TestEventf ``expectLog`` lines (issue 10: the line used to carry only Kind,
    Namespace and Name, with Python quoting)."""
    lines: list[str] = []
    done = threading.Event()

    def logf(line: str) -> None:
        lines.append(line)
        done.set()

    broadcaster.start_logging(logf)
    broadcaster.new_recorder("eventTest").eventf(obj, "Normal", reason, message)
    assert done.wait(WAIT)
    assert lines == [expected]


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ('say "hi"\\', '"say \\"hi\\"\\\\"'),
        ("tab\tnew\nline\x01\x7f", '"tab\\tnew\\nline\\x01\\x7f"'),
        ("é 😀", '"é 😀"'),
        ("zero\u200bwidth\u00a0nbsp", '"zero\\u200bwidth\\u00a0nbsp"'),
    ],
)
def test_go_quote_is_strconv_quote(value: str, quoted: str) -> None:
    from mcm.runtime.record.broadcaster import go_quote

    assert go_quote(value) == quoted


def test_after_shutdown_events_are_dropped_and_watchers_end() -> None:
    broadcaster = EventBroadcaster(clock=FakeClock(T0))
    got = Collector()
    watcher = broadcaster.start_event_watcher(got)
    recorder = broadcaster.new_recorder("c")
    recorder.event(MACHINE, "Normal", "Before", "x")
    broadcaster.shutdown()
    assert watcher.join(WAIT)
    assert [e["reason"] for e in got.events] == ["Before"]
    with capture_logs() as logs:
        recorder.event(MACHINE, "Normal", "After", "x")
    assert [e["event"] for e in logs] == ["unable_to_record_event"]


def test_a_stopped_watcher_gets_no_more_events(broadcaster: EventBroadcaster) -> None:
    first, second = Collector(), Collector()
    watcher = broadcaster.start_event_watcher(first)
    broadcaster.start_event_watcher(second)
    recorder = broadcaster.new_recorder("c")
    recorder.event(MACHINE, "Normal", "One", "x")
    first.wait_for(1)
    second.wait_for(1)
    watcher.stop()
    assert watcher.join(WAIT)
    recorder.event(MACHINE, "Normal", "Two", "x")
    assert [e["reason"] for e in second.wait_for(2)] == ["One", "Two"]
    assert [e["reason"] for e in first.events] == ["One"]


def test_an_event_after_shutdown_is_dropped_as_stopped_not_as_queue_overflow() -> None:
    broadcaster = EventBroadcaster()
    recorder = broadcaster.new_recorder("c")
    broadcaster.shutdown()
    with capture_logs() as logs:
        recorder.event(MACHINE, "Normal", "Late", "after shutdown")
    dropped = [e for e in logs if e["event"] == "unable_to_record_event"]
    assert [e["reason"] for e in dropped] == ["broadcaster already stopped (will not retry!)"]

"""SinkWriter: create vs patch, 404 -> create, which errors are retried and how (TestWriteEventError)."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from mcm.runtime.client.errors import AlreadyExists, ConnectionFailed, Forbidden, NotFound, ServiceUnavailable
from mcm.runtime.clock import FakeClock
from mcm.runtime.record import EventCorrelator, SinkWriter
from mcm.runtime.record.sink import EventSinkImpl
from tests.runtime.record.test_correlator import make_event

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
WAIT = 5.0


class FakeSink:
    """Stores events by name; ``errors`` are raised by the next calls, in order."""

    def __init__(self, errors: list[Exception] | None = None) -> None:
        self.errors = list(errors or [])
        self.calls: list[tuple[str, Any]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.rv = 0

    def _maybe_fail(self) -> None:
        if self.errors:
            raise self.errors.pop(0)

    def _save(self, event: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        saved = dict(event, metadata=dict(event["metadata"], resourceVersion=str(self.rv)))
        self.stored[saved["metadata"]["name"]] = saved
        return saved

    def create(self, event: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", event))
        self._maybe_fail()
        assert "resourceVersion" not in event["metadata"]
        return self._save(event)

    def update(self, event: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("events are never updated with PUT")

    def patch(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", patch))
        self._maybe_fail()
        name = event["metadata"]["name"]
        if name not in self.stored:
            raise NotFound()
        return self._save({**self.stored[name], **patch})


def writer_for(sink: FakeSink, clock: FakeClock, cancel: threading.Event | None = None) -> SinkWriter:
    return SinkWriter(
        sink, EventCorrelator(clock=clock), cancel or threading.Event(), clock=clock, rand=lambda: 0.5
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_first_event_is_created_and_repeats_are_patched(clock: FakeClock) -> None:
    sink = FakeSink()
    writer = writer_for(sink, clock)
    for _ in range(3):
        writer.record(make_event())
    assert [kind for kind, _ in sink.calls] == ["create", "patch", "patch"]
    assert sink.calls[2][1] == {"count": 3, "lastTimestamp": "2024-01-01T00:00:00Z", "message": "created VM"}
    (event,) = sink.stored.values()
    assert event["count"] == 3


def test_a_patch_of_a_vanished_event_creates_it_again(clock: FakeClock) -> None:
    sink = FakeSink()
    writer = writer_for(sink, clock)
    writer.record(make_event())
    sink.stored.clear()  # expired on the server
    writer.record(make_event())
    assert [kind for kind, _ in sink.calls] == ["create", "patch", "create"]
    (event,) = sink.stored.values()
    assert event["count"] == 2


@pytest.mark.parametrize(
    "error", [ServiceUnavailable(), Forbidden(), AlreadyExists(), ValueError("bad request")], ids=type
)
def test_status_errors_are_not_retried(clock: FakeClock, error: Exception) -> None:
    sink = FakeSink([error])
    writer_for(sink, clock).record(make_event())
    assert len(sink.calls) == 1


def run_in_thread(writer: SinkWriter) -> threading.Thread:
    thread = threading.Thread(target=writer.record, args=(make_event(),), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "error",
    [
        ConnectionFailed("connection refused", refused=True),
        RuntimeError("can't create an event with namespace 'a' in namespace 'b'"),
    ],
    ids=["transport", "plain-error"],
)
def test_transport_errors_are_retried_12_times_with_sleeps(clock: FakeClock, error: Exception) -> None:
    sink = FakeSink([error] * 20)
    thread = run_in_thread(writer_for(sink, clock))
    clock.block_until_waiters(1, timeout=WAIT)
    clock.step(4.99)  # first sleep: rand (0.5) x 10 s
    assert len(sink.calls) == 1
    clock.step(0.01)
    for attempt in range(2, 12):
        clock.block_until_waiters(1, timeout=WAIT)
        assert len(sink.calls) == attempt
        clock.step(9.99)
        assert len(sink.calls) == attempt
        clock.step(0.01)
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(sink.calls) == 12


def test_a_transient_error_then_success_writes_once(clock: FakeClock) -> None:
    sink = FakeSink([ConnectionFailed("reset")])
    thread = run_in_thread(writer_for(sink, clock))
    clock.block_until_waiters(1, timeout=WAIT)
    clock.step(5.0)
    thread.join(WAIT)
    assert len(sink.calls) == 2
    assert len(sink.stored) == 1


def test_cancel_ends_the_retry_sleep(clock: FakeClock) -> None:
    sink = FakeSink([ConnectionFailed("refused")] * 20)
    cancel = threading.Event()
    thread = run_in_thread(writer_for(sink, clock, cancel))
    clock.block_until_waiters(1, timeout=WAIT)
    cancel.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(sink.calls) == 1


class RecordingREST:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    def create(self, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("create", body, kwargs))
        return body

    def patch(self, name: str, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("patch", name, kwargs))
        return {}


def test_sink_impl_uses_the_event_namespace_and_strategic_merge() -> None:
    rest = RecordingREST()
    sink = EventSinkImpl(rest)  # type: ignore[arg-type]
    sink.create(make_event())
    sink.patch(make_event(), {"count": 2})
    assert rest.calls[0][2] == {"namespace": "shoot"}
    assert rest.calls[1] == ("patch", "m1.17", {"kind": "strategic", "namespace": "shoot"})


def test_sink_impl_for_one_namespace_refuses_others() -> None:
    sink = EventSinkImpl(RecordingREST(), namespace="other")  # type: ignore[arg-type]
    with pytest.raises(
        RuntimeError, match="can't create an event with namespace 'shoot' in namespace 'other'"
    ):
        sink.create(make_event())

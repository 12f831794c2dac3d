"""The event pipeline against the emulator: counts, aggregation, spam filter, errors and outages.

The broadcaster runs on a FakeClock so that the spam filter's 5-minute refill and the sink's
10 s retry sleeps are stepped, not waited for. Requests are real HTTP.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.config import load_config
from mcm.runtime.client.resources import CONFIG_MAPS
from mcm.runtime.clock import FakeClock
from mcm.runtime.record import COMBINED_PREFIX, EventBroadcaster, EventSinkImpl

if TYPE_CHECKING:
    from mcm.emulator import Emulator

WAIT = 10.0


class CountingSink:
    """Wraps the real sink and counts finished write attempts (successful or not)."""

    def __init__(self, inner: EventSinkImpl) -> None:
        self.inner = inner
        self.done = 0
        self.changed = threading.Condition()

    def _count(self, call: Any, *args: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = call(*args)
            return result
        finally:
            with self.changed:
                self.done += 1
                self.changed.notify_all()

    def create(self, event: dict[str, Any]) -> dict[str, Any]:
        return self._count(self.inner.create, event)

    def update(self, event: dict[str, Any]) -> dict[str, Any]:
        return self._count(self.inner.update, event)

    def patch(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        return self._count(self.inner.patch, event, patch)

    def wait_for(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.done >= count, WAIT), f"{self.done} < {count} writes"


class Pipeline:
    def __init__(self, client: ClusterClient) -> None:
        self.clock = FakeClock(dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
        self.broadcaster = EventBroadcaster(clock=self.clock, rand=lambda: 0.5)
        self.sink = CountingSink(EventSinkImpl(client))
        self.broadcaster.start_recording_to_sink(self.sink)
        self.recorder = self.broadcaster.new_recorder("machine-controller", "host-1")


@pytest.fixture
def client(kubeconfig: str) -> ClusterClient:
    return load_config(kubeconfig, qps=-1, timeout=2.0)


@pytest.fixture
def pipeline(client: ClusterClient) -> Iterator[Pipeline]:
    p = Pipeline(client)
    yield p
    p.broadcaster.shutdown()


def config_map(client: ClusterClient, name: str) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    created: dict[str, Any] = client.resource(CONFIG_MAPS).create(body)
    created.setdefault("apiVersion", "v1")
    created.setdefault("kind", "ConfigMap")
    return created


def events_about(emulator: Emulator, name: str) -> list[dict[str, Any]]:
    return [e for e in emulator.list("events", "default") if e["involvedObject"]["name"] == name]


def test_30_identical_events_become_one_event_with_count_30(
    emulator: Emulator, client: ClusterClient, pipeline: Pipeline
) -> None:
    obj = config_map(client, "subject")
    probe = config_map(client, "probe")
    for _ in range(29):
        pipeline.recorder.event(obj, "Warning", "FailedCreate", "quota exceeded")
    pipeline.recorder.event(probe, "Normal", "Probe", "barrier")
    pipeline.sink.wait_for(26)  # 25 writes pass the spam filter, 4 are skipped, then the probe
    (event,) = events_about(emulator, "subject")
    assert event["count"] == 25

    pipeline.clock.step(300)  # the spam filter grants one more token
    pipeline.recorder.event(obj, "Warning", "FailedCreate", "quota exceeded")
    pipeline.sink.wait_for(27)
    (event,) = events_about(emulator, "subject")
    assert event["count"] == 30  # the skipped ones were counted
    assert event["message"] == "quota exceeded"
    assert event["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert event["involvedObject"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert event["source"] == {"component": "machine-controller", "host": "host-1"}
    assert event["reportingComponent"] == "machine-controller"
    assert event["firstTimestamp"] == "2024-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2024-01-01T00:05:00Z"


def test_similar_events_are_combined_after_ten_messages(
    emulator: Emulator, client: ClusterClient, pipeline: Pipeline
) -> None:
    obj = config_map(client, "flaky")
    for n in range(12):
        pipeline.recorder.eventf(obj, "Warning", "FailedDrain", "pod %d not evicted", n)
    pipeline.sink.wait_for(12)
    events = events_about(emulator, "flaky")
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(events) == 10
    (agg,) = combined
    assert agg["count"] == 3
    assert agg["message"] == COMBINED_PREFIX + "pod 11 not evicted"
    assert sorted(e["message"] for e in events if e is not agg) == sorted(
        f"pod {n} not evicted" for n in range(9)
    )


def test_a_status_error_is_not_retried(emulator: Emulator, client: ClusterClient, pipeline: Pipeline) -> None:
    rule = emulator.faults.add(code=403, times=None, verb="create", resource="events")
    obj = config_map(client, "forbidden")
    pipeline.recorder.event(obj, "Normal", "Tried", "once")
    pipeline.sink.wait_for(1)
    emulator.faults.remove(rule)
    pipeline.recorder.event(obj, "Normal", "Next", "goes through")
    pipeline.sink.wait_for(2)
    assert rule.hits == 1
    assert [e["reason"] for e in events_about(emulator, "forbidden")] == ["Next"]


def test_an_outage_neither_blocks_callers_nor_loses_the_event_being_retried(
    emulator: Emulator, client: ClusterClient, pipeline: Pipeline
) -> None:
    obj = config_map(client, "outage")
    emulator.pause("refuse")
    try:
        pipeline.recorder.event(obj, "Normal", "During", "outage")
        pipeline.sink.wait_for(1)  # refused; the writer now sleeps before retrying (fake clock)

        def flood() -> None:
            for n in range(2500):
                pipeline.recorder.eventf(obj, "Normal", "Flood", "event %d", n)

        # Nobody steps the fake clock meanwhile: a caller that waited for the writer would
        # never return, while 2500 events take well under a second on an idle machine.
        flooding = threading.Thread(target=flood, daemon=True)
        flooding.start()
        flooding.join(60)
        assert not flooding.is_alive(), "recording waited for the writer's retry"
    finally:
        emulator.resume()
    pipeline.clock.step(5.0)  # first retry sleep: 0.5 x 10 s
    assert emulator.wait_for(
        lambda: any(e["reason"] == "During" for e in events_about(emulator, "outage")), WAIT
    )

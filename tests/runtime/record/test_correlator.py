"""EventCorrelator on a FakeClock: de-duplication, aggregation, spam filter (events_cache_test)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from mcm.runtime.clock import FakeClock
from mcm.runtime.record import COMBINED_PREFIX, EventCorrelator
from mcm.runtime.record.correlator import CorrelatorOptions, aggregate_key, event_key, spam_key

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def make_event(
    message: str = "created VM", reason: str = "Created", rv: str = "7", **extra: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "m1.17", "namespace": "shoot"},
        "involvedObject": {
            "kind": "Machine",
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "namespace": "shoot",
            "name": "m1",
            "uid": "u-1",
            "resourceVersion": rv,
        },
        "reason": reason,
        "message": message,
        "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
        "source": {"component": "machine-controller", "host": "h"},
        "reportingComponent": "machine-controller",
        "reportingInstance": "h",
    }
    event.update(extra)
    return event


def stored(event: dict[str, Any], rv: str) -> dict[str, Any]:
    """What the server would answer after a write."""
    out = dict(event, metadata=dict(event["metadata"], resourceVersion=rv))
    return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_keys_concatenate_fields_without_separator() -> None:
    event = make_event()
    prefix = "machine-controllerhMachineshootm1"
    assert event_key(event) == prefix + "u-1machine.sapcloud.io/v1alpha1NormalCreatedcreated VM"
    assert spam_key(event) == prefix + "u-1machine.sapcloud.io/v1alpha1"
    assert aggregate_key(event) == (
        prefix + "u-1machine.sapcloud.io/v1alpha1NormalCreatedmachine-controllerh",
        "created VM",
    )


def test_a_repeat_becomes_a_patch_of_count_timestamp_and_message(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    first = correlator.correlate(make_event())
    assert first.event is not None and not first.skip
    assert first.event["count"] == 1
    assert first.patch is None
    correlator.update_state(stored(first.event, "100"))

    clock.step(5)
    second = correlator.correlate(make_event(rv="8", lastTimestamp="2024-01-01T00:00:05Z"))
    assert second.event is not None
    assert second.event["count"] == 2
    assert second.event["metadata"]["name"] == "m1.17"
    assert second.event["metadata"]["resourceVersion"] == "100"
    assert second.event["firstTimestamp"] == "2024-01-01T00:00:00Z"
    assert second.patch == {"count": 2, "lastTimestamp": "2024-01-01T00:00:05Z", "message": "created VM"}


def test_different_messages_are_not_merged_below_the_threshold(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    for n in range(9):
        result = correlator.correlate(make_event(message=f"attempt {n}"))
        assert result.event is not None
        assert result.event["message"] == f"attempt {n}"
        assert result.event["count"] == 1
        assert result.patch is None


def test_the_tenth_distinct_message_is_combined(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    for n in range(9):
        correlator.correlate(make_event(message=f"attempt {n}"))
    tenth = correlator.correlate(make_event(message="attempt 9"))
    assert tenth.event is not None
    assert tenth.event["message"] == COMBINED_PREFIX + "attempt 9"
    assert tenth.event["count"] == 1
    assert tenth.event["involvedObject"]["uid"] == "u-1"
    assert tenth.event["source"] == {"component": "machine-controller", "host": "h"}
    assert tenth.event["metadata"]["name"].startswith("m1.")
    assert tenth.patch is None

    eleventh = correlator.correlate(make_event(message="attempt 10"))
    assert eleventh.event is not None
    assert eleventh.event["count"] == 2
    assert eleventh.event["metadata"]["name"] == tenth.event["metadata"]["name"]
    assert eleventh.patch == {
        "count": 2,
        "lastTimestamp": "2024-01-01T00:00:00Z",
        "message": COMBINED_PREFIX + "attempt 10",
    }


def test_aggregation_starts_afresh_after_the_window(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    for n in range(9):
        correlator.correlate(make_event(message=f"attempt {n}"))
    clock.step(601)
    result = correlator.correlate(make_event(message="attempt 9"))
    assert result.event is not None
    assert result.event["message"] == "attempt 9"


def test_changing_resource_version_of_the_object_still_merges(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    correlator.correlate(make_event(rv="1"))
    again = correlator.correlate(make_event(rv="2"))
    assert again.event is not None
    assert again.event["count"] == 2


@pytest.mark.parametrize(
    "options",
    [None, CorrelatorOptions(lru_cache_size=0, max_events=0, spam_burst=0, spam_qps=0.0)],
    ids=["defaults", "zero-means-default"],
)
def test_spam_filter_passes_25_then_one_per_five_minutes(
    clock: FakeClock, options: CorrelatorOptions | None
) -> None:
    correlator = EventCorrelator(options, clock=clock)
    results = [correlator.correlate(make_event()) for _ in range(30)]
    assert [r.skip for r in results] == [False] * 25 + [True] * 5
    clock.step(299)
    assert correlator.correlate(make_event()).skip
    clock.step(1)
    passed = correlator.correlate(make_event())
    assert not passed.skip
    assert passed.event is not None
    assert passed.event["count"] == 32  # the skipped ones were counted
    assert correlator.correlate(make_event()).skip


def test_spam_filter_is_per_object(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    for _ in range(25):
        correlator.correlate(make_event())
    other = make_event()
    other["involvedObject"] = dict(other["involvedObject"], name="m2", uid="u-2")
    assert not correlator.correlate(other).skip
    assert correlator.correlate(make_event()).skip


def test_the_input_event_is_not_modified(clock: FakeClock) -> None:
    correlator = EventCorrelator(clock=clock)
    correlator.correlate(make_event())
    event = make_event()
    correlator.correlate(event)
    assert event == make_event()


def test_event_names_are_unique_even_when_the_clock_stands_still() -> None:
    from mcm.runtime.record.correlator import event_name

    names = {event_name("m1", T0) for _ in range(100)}
    assert len(names) == 100
    assert all(n.startswith("m1.") for n in names)

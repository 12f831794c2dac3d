"""MicroTime formatting and the Lease spec <-> record mapping."""

from __future__ import annotations

import datetime as dt

import pytest

from mcm.runtime.leaderelection.record import (
    LeaderElectionRecord,
    format_micro_time,
    lease_spec_to_record,
    parse_micro_time,
    raw_record,
    record_to_lease_spec,
)


def test_micro_time_always_has_six_fractional_digits_and_z() -> None:
    assert format_micro_time(dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)) == "2024-05-06T07:08:09.000000Z"
    assert (
        format_micro_time(dt.datetime(2024, 5, 6, 7, 8, 9, 120, tzinfo=dt.UTC))
        == "2024-05-06T07:08:09.000120Z"
    )
    plus_two = dt.timezone(dt.timedelta(hours=2))
    assert (
        format_micro_time(dt.datetime(2024, 5, 6, 9, 8, 9, 5, tzinfo=plus_two))
        == "2024-05-06T07:08:09.000005Z"
    )


def test_parse_accepts_rfc3339_variants_and_ignores_garbage() -> None:
    expected = dt.datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=dt.UTC)
    assert parse_micro_time("2024-05-06T07:08:09.500000Z") == expected
    assert parse_micro_time("2024-05-06T07:08:09.5Z") == expected
    assert parse_micro_time("2024-05-06T09:08:09.5+02:00") == expected
    assert parse_micro_time("2024-05-06T07:08:09Z") == expected.replace(microsecond=0)
    assert parse_micro_time("yesterday") is None
    assert parse_micro_time(None) is None
    assert parse_micro_time(17) is None


def test_round_trip_through_a_lease_spec() -> None:
    when = dt.datetime(2024, 1, 1, 0, 0, 1, 250, tzinfo=dt.UTC)
    record = LeaderElectionRecord("me", 15, when, when, 3)
    spec = record_to_lease_spec(record)
    assert spec == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2024-01-01T00:00:01.000250Z",
        "renewTime": "2024-01-01T00:00:01.000250Z",
        "leaseTransitions": 3,
    }
    assert lease_spec_to_record(spec) == record


def test_a_released_record_writes_an_empty_holder() -> None:
    spec = record_to_lease_spec(LeaderElectionRecord("", 1, None, None, 2))
    assert spec["holderIdentity"] == ""
    assert spec["acquireTime"] is None


def test_malformed_spec_fields_read_as_unset() -> None:
    record = lease_spec_to_record(
        {"holderIdentity": 5, "leaseDurationSeconds": "15", "leaseTransitions": True}
    )
    assert record == LeaderElectionRecord()


def test_raw_record_changes_with_every_renewal_even_within_one_second() -> None:
    spec = record_to_lease_spec(
        LeaderElectionRecord("me", 1, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), 0)
    )
    later = dict(spec, renewTime="2024-01-01T00:00:00.100000Z")
    assert raw_record(spec) != raw_record(later)
    assert raw_record(spec) == raw_record(dict(spec))
    assert raw_record({**spec, "preferredHolder": "x"}) == raw_record(spec)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("2024-01-01T00:00:00", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),  # no zone: UTC
        ("2024-01-01T02:00:00.25+02:00", dt.datetime(2024, 1, 1, 0, 0, 0, 250000, tzinfo=dt.UTC)),
        ("2024-01-01T00:00:00.123456789Z", dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=dt.UTC)),
        ("", None),
        (None, None),
        (1704067200, None),
    ],
)
def test_parsed_times_are_utc(value: object, parsed: dt.datetime | None) -> None:
    result = parse_micro_time(value)
    assert result == parsed
    assert result is None or result.utcoffset() == dt.timedelta(0)


def test_a_record_is_immutable() -> None:
    import dataclasses

    record = LeaderElectionRecord("a", 15)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.holder_identity = "b"  # type: ignore[misc]
    assert record.with_changes(holder_identity="b").holder_identity == "b"
    assert record.holder_identity == "a"

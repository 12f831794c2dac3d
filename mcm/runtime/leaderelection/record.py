"""The leader election record and its mapping onto a ``coordination.k8s.io/v1`` Lease spec.

Guarantees:

- :func:`format_micro_time` always writes UTC with exactly six fractional digits and ``Z``
  (``2006-01-02T15:04:05.000000Z``), also when the microseconds are 0.
- :func:`raw_record` is the byte form candidates compare to notice a change of the record. It
  keeps the times exactly as the server sent them (microsecond precision), so every renewal is
  seen as a change. client-go compares at second precision, which misses renewals that happen
  less than a second apart; with sub-second retry periods that would let a candidate take over
  from a healthy leader. Seeing more changes only ever delays a takeover.
- Parsing never raises on a malformed field: it reads as unset.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "LeaderElectionRecord",
    "format_micro_time",
    "lease_spec_to_record",
    "parse_micro_time",
    "raw_record",
    "record_to_lease_spec",
]


@dataclass(frozen=True)
class LeaderElectionRecord:
    """Who holds the lock, since when, and for how long (``resourcelock.LeaderElectionRecord``).

    An empty ``holder_identity`` means the lock is free: anyone may take it at once.
    """

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: _dt.datetime | None = None
    renew_time: _dt.datetime | None = None
    leader_transitions: int = 0

    def with_changes(self, **changes: Any) -> LeaderElectionRecord:
        """A copy with the given fields replaced."""
        return replace(self, **changes)


def format_micro_time(when: _dt.datetime) -> str:
    """A ``metav1.MicroTime`` string: UTC, six fractional digits, ``Z``."""
    if when.tzinfo is None:
        raise ValueError("MicroTime needs a timezone-aware datetime")
    return when.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: object) -> _dt.datetime | None:
    """Parse an RFC 3339 time (any number of fractional digits); None if unset or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=_dt.UTC)
    return parsed.astimezone(_dt.UTC)


def _int_field(spec: dict[str, Any], key: str) -> int:
    value = spec.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def lease_spec_to_record(spec: dict[str, Any]) -> LeaderElectionRecord:
    """Read a Lease ``spec`` dict into a record (``LeaseSpecToLeaderElectionRecord``)."""
    holder = spec.get("holderIdentity")
    return LeaderElectionRecord(
        holder_identity=holder if isinstance(holder, str) else "",
        lease_duration_seconds=_int_field(spec, "leaseDurationSeconds"),
        acquire_time=parse_micro_time(spec.get("acquireTime")),
        renew_time=parse_micro_time(spec.get("renewTime")),
        leader_transitions=_int_field(spec, "leaseTransitions"),
    )


def _micro_or_none(when: _dt.datetime | None) -> str | None:
    return None if when is None else format_micro_time(when)


def record_to_lease_spec(record: LeaderElectionRecord) -> dict[str, Any]:
    """The Lease ``spec`` dict for a record (``LeaderElectionRecordToLeaseSpec``).

    Every field is written, the holder too when it is empty (that is how a release looks).
    """
    return {
        "holderIdentity": record.holder_identity,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "acquireTime": _micro_or_none(record.acquire_time),
        "renewTime": _micro_or_none(record.renew_time),
        "leaseTransitions": record.leader_transitions,
    }


def raw_record(spec: dict[str, Any]) -> bytes:
    """The comparable bytes of the record held in a Lease ``spec`` (times as sent by the server)."""
    fields = {
        "holderIdentity": spec.get("holderIdentity"),
        "leaseDurationSeconds": spec.get("leaseDurationSeconds"),
        "acquireTime": spec.get("acquireTime"),
        "renewTime": spec.get("renewTime"),
        "leaderTransitions": spec.get("leaseTransitions"),
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

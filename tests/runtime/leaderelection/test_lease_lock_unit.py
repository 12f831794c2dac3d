"""The Lease lock over a fake REST client: what it writes, when it refuses, its events."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from mcm.runtime.leaderelection.interface import LockNotInitialized
from mcm.runtime.leaderelection.lease_lock import LeaseLock, lease_request_timeout
from mcm.runtime.leaderelection.record import LeaderElectionRecord

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
RECORD = LeaderElectionRecord("a", 15, T0, T0, 2)


class FakeLeases:
    """The REST client for Leases: answers from ``lease`` and records the writes."""

    def __init__(self, lease: dict[str, Any]) -> None:
        self.lease = lease
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def get(self, name: str, *, namespace: str) -> dict[str, Any]:
        return copy.deepcopy(self.lease)

    def create(self, body: dict[str, Any], *, namespace: str) -> dict[str, Any]:
        self.writes.append(("create", copy.deepcopy(body)))
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}

    def update(self, body: dict[str, Any], *, namespace: str) -> dict[str, Any]:
        self.writes.append(("update", copy.deepcopy(body)))
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "2"}}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[dict[str, Any], str, str, str]] = []

    def eventf(self, obj: dict[str, Any], event_type: str, reason: str, fmt: str, *args: object) -> None:
        self.events.append((obj, event_type, reason, fmt % args))


def lock(lease: dict[str, Any], recorder: Recorder | None = None) -> tuple[LeaseLock, FakeLeases]:
    leases = FakeLeases(lease)
    return LeaseLock(leases, "ns", "mcm", "a", event_recorder=recorder), leases  # type: ignore[arg-type]


@pytest.mark.parametrize(("renew_deadline", "timeout"), [(10.0, 5.0), (2.0, 1.0), (1.5, 1.0), (0.5, 1.0)])
def test_a_lock_request_gets_half_the_renew_deadline_but_at_least_a_second(
    renew_deadline: float, timeout: float
) -> None:
    assert lease_request_timeout(renew_deadline) == timeout


def test_update_before_any_read_or_create_is_refused() -> None:
    subject, leases = lock({})
    with pytest.raises(LockNotInitialized):
        subject.update(RECORD)
    assert leases.writes == []


def test_update_writes_the_lease_last_seen_with_the_new_spec() -> None:
    lease = {"metadata": {"name": "mcm", "resourceVersion": "7", "labels": {"x": "y"}}, "spec": {}}
    subject, leases = lock(lease)
    subject.get()
    subject.update(RECORD)
    kind, body = leases.writes[0]
    assert kind == "update"
    assert body["metadata"] == lease["metadata"]
    assert body["spec"]["holderIdentity"] == "a"
    assert body["spec"]["renewTime"] == "2024-01-01T00:00:00.000000Z"
    subject.update(RECORD.with_changes(holder_identity="b"))
    assert leases.writes[1][1]["metadata"]["resourceVersion"] == "2"  # the answer to the last write


@pytest.mark.parametrize("spec", [None, "junk", {}])
def test_a_lease_without_a_usable_spec_reads_as_a_free_lock(spec: object) -> None:
    subject, _ = lock({"metadata": {"name": "mcm"}, "spec": spec})
    record, raw = subject.get()
    assert record == LeaderElectionRecord()
    assert raw


def test_events_need_a_recorder_and_a_lease_seen() -> None:
    recorder = Recorder()
    subject, _ = lock({"metadata": {"name": "mcm", "namespace": "ns", "uid": "u1"}, "spec": {}}, recorder)
    subject.record_event("became leader")  # nothing read or written yet: no subject
    assert recorder.events == []
    subject.get()
    subject.record_event("became leader")
    assert recorder.events == [
        (
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "mcm", "namespace": "ns", "uid": "u1"},
            },
            "Normal",
            "LeaderElection",
            "a became leader",
        )
    ]
    unrecorded, _ = lock({"metadata": {"name": "mcm"}})
    unrecorded.get()
    unrecorded.record_event("became leader")  # no recorder: nothing, no error


def test_an_event_about_a_lease_without_metadata_has_empty_metadata() -> None:
    recorder = Recorder()
    subject, _ = lock({"metadata": "junk"}, recorder)
    subject.get()
    subject.record_event("stopped leading")
    assert recorder.events[0][0]["metadata"] == {}


def test_create_writes_a_lease_with_the_record() -> None:
    subject, leases = lock({})
    subject.create(RECORD)
    assert leases.writes == [
        (
            "create",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "mcm", "namespace": "ns"},
                "spec": {
                    "holderIdentity": "a",
                    "leaseDurationSeconds": 15,
                    "acquireTime": "2024-01-01T00:00:00.000000Z",
                    "renewTime": "2024-01-01T00:00:00.000000Z",
                    "leaseTransitions": 2,
                },
            },
        )
    ]
    assert (subject.identity(), subject.describe()) == ("a", "ns/mcm")

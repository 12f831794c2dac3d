"""LeaseLock against the emulator: NotFound, create, optimistic concurrency, MicroTime, events."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pytest

from mcm.runtime.client.config import load_config
from mcm.runtime.client.errors import AlreadyExists, Conflict, NotFound
from mcm.runtime.client.resources import LEASES
from mcm.runtime.leaderelection import LeaderElectionRecord, LeaseLock, LockNotInitialized
from mcm.runtime.record import EventBroadcaster

if TYPE_CHECKING:
    from mcm.emulator import Emulator

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def eventf(self, obj: dict[str, Any], event_type: str, reason: str, fmt: str, *args: object) -> None:
        self.calls.append((obj, event_type, reason, fmt % args))


def test_lease_lock_round_trip(kubeconfig: str) -> None:
    client = load_config(kubeconfig, qps=-1)
    recorder = Recorder()
    lock = LeaseLock(client, "default", "mcm", "me", event_recorder=recorder)
    assert lock.describe() == "default/mcm"
    assert lock.identity() == "me"
    with pytest.raises(NotFound):
        lock.get()
    with pytest.raises(LockNotInitialized, match="lease not initialized, call get or create first"):
        lock.update(LeaderElectionRecord("me", 15, T0, T0, 0))

    lock.create(LeaderElectionRecord("me", 15, T0, T0, 0))
    stored = client.resource(LEASES).get("mcm", namespace="default")
    assert stored["spec"] == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2024-01-01T00:00:00.000000Z",
        "renewTime": "2024-01-01T00:00:00.000000Z",
        "leaseTransitions": 0,
    }
    record, raw = lock.get()
    assert record == LeaderElectionRecord("me", 15, T0, T0, 0)

    later = T0 + dt.timedelta(microseconds=250)
    lock.update(LeaderElectionRecord("me", 15, T0, later, 0))
    record2, raw2 = lock.get()
    assert record2.renew_time == later
    assert raw2 != raw

    lock.record_event("became leader")
    (subject, event_type, reason, message), *_ = recorder.calls
    assert (subject["kind"], subject["apiVersion"]) == ("Lease", "coordination.k8s.io/v1")
    assert subject["metadata"]["name"] == "mcm"
    assert (event_type, reason, message) == ("Normal", "LeaderElection", "me became leader")


def test_a_concurrent_writer_makes_update_conflict(kubeconfig: str) -> None:
    client = load_config(kubeconfig, qps=-1)
    mine = LeaseLock(client, "default", "mcm", "a")
    theirs = LeaseLock(client, "default", "mcm", "b")
    mine.create(LeaderElectionRecord("a", 15, T0, T0, 0))
    with pytest.raises(AlreadyExists):
        theirs.create(LeaderElectionRecord("b", 15, T0, T0, 0))
    theirs.get()
    theirs.update(LeaderElectionRecord("b", 15, T0, T0, 1))
    with pytest.raises(Conflict):
        mine.update(LeaderElectionRecord("a", 15, T0, T0, 0))
    record, _ = mine.get()
    assert record.holder_identity == "b"


def test_leader_election_events_land_on_the_lease(kubeconfig: str, emulator: Emulator) -> None:
    client = load_config(kubeconfig, qps=-1)
    broadcaster = EventBroadcaster()
    broadcaster.start_recording_to_sink(client)
    recorder = broadcaster.new_recorder("machine-controller", "host-1")
    lock = LeaseLock(client, "default", "mcm", "me", event_recorder=recorder)
    lock.create(LeaderElectionRecord("me", 15, T0, T0, 0))
    lock.record_event("became leader")

    def leader_event() -> bool:
        return any(e.get("reason") == "LeaderElection" for e in emulator.list("events", "default"))

    assert emulator.wait_for(leader_event, 10.0)
    broadcaster.shutdown()
    (event,) = [e for e in emulator.list("events", "default") if e.get("reason") == "LeaderElection"]
    assert event["message"] == "me became leader"
    assert event["type"] == "Normal"
    assert event["involvedObject"]["kind"] == "Lease"
    assert event["involvedObject"]["apiVersion"] == "coordination.k8s.io/v1"
    assert event["involvedObject"]["name"] == "mcm"
    assert event["involvedObject"]["uid"]

"""Cases of client-go's leaderelection_test.go not covered by test_elector.py.

``TestTryAcquireOrRenew``'s "led object with its own leaseDurationSeconds" and "object without a
record" rows, and ``TestReleaseOnCancellation``: cancelling while a renewal request hangs still
releases the lock once the request returns.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING

from mcm.runtime.client.config import load_config
from mcm.runtime.client.resources import LEASES
from mcm.runtime.clock import FakeClock
from mcm.runtime.leaderelection import LeaderCallbacks, LeaderElectionConfig, LeaderElectionRecord, LeaseLock
from mcm.runtime.leaderelection.elector import LeaderElector
from tests.runtime.leaderelection.fakes import LockStore
from tests.runtime.leaderelection.test_elector import WAIT, Candidate, advance

if TYPE_CHECKING:
    from mcm.emulator import Emulator

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def test_the_records_own_lease_duration_decides_when_a_led_lock_expires() -> None:
    clock, store = FakeClock(T0), LockStore()
    store.put(LeaderElectionRecord("other", 3, T0, T0, 2))  # shorter than our 15 s
    cand = Candidate(store, "b", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    advance(clock, 2.0, 1)  # t = 2: observed at t = 0, 3 s not over
    assert not cand.started.is_set()
    clock.step(2.0)  # t = 4 > 0 + 3
    assert cand.started.wait(WAIT)
    assert store.record is not None
    assert (store.record.holder_identity, store.record.lease_duration_seconds) == ("b", 15)
    assert store.record.leader_transitions == 3
    cand.shutdown()


def test_a_fresh_led_lock_is_not_taken_even_with_a_longer_own_lease() -> None:
    clock, store = FakeClock(T0), LockStore()
    store.put(LeaderElectionRecord("other", 60, T0, T0, 0))  # longer than our 15 s
    cand = Candidate(store, "b", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    for _ in range(10):  # t = 2 .. 20: beyond our lease duration, within the record's
        advance(clock, 2.0, 1)
        assert not cand.started.is_set()
    cand.shutdown()
    assert store.record is not None
    assert store.record.holder_identity == "other"


def test_cancel_while_a_renewal_hangs_still_releases_the_lock() -> None:
    clock, store = FakeClock(T0), LockStore()
    cand = Candidate(store, "a", clock, release_on_cancel=True).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    store.hang = threading.Event()
    clock.step(2.0)  # the next renewal blocks in its request
    assert store.hanging.wait(WAIT)
    cand.stop.set()
    assert cand.lead_stop is not None and cand.lead_stop.wait(WAIT)
    store.hang.set()  # the request comes back
    cand.thread.join(WAIT)
    assert not cand.thread.is_alive()
    assert cand.stopped.is_set()
    assert store.record is not None
    assert store.record.holder_identity == ""
    assert store.record.lease_duration_seconds == 1


def test_a_lease_without_a_record_is_acquired(kubeconfig: str, emulator: Emulator) -> None:
    client = load_config(kubeconfig, qps=-1)
    leases = client.resource(LEASES)
    leases.create(
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "bare"}},
        namespace="default",
    )
    started, stop = threading.Event(), threading.Event()
    config = LeaderElectionConfig(
        lock=LeaseLock(client, "default", "bare", "me"),
        callbacks=LeaderCallbacks(lambda lead_stop: started.set(), lambda: None),
        name="bare",
    )
    elector = LeaderElector(config, clock=FakeClock(T0))
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert started.wait(WAIT)  # no clock step: an empty holder is free at once
        spec = leases.get("bare", namespace="default")["spec"]
        assert spec["holderIdentity"] == "me"
        assert spec["leaseTransitions"] == 1
        assert spec["acquireTime"] == "2024-01-01T00:00:00.000000Z"
    finally:
        stop.set()
        thread.join(WAIT)
    assert not thread.is_alive()

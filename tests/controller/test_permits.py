"""PermitGiver (upstream v0.47.0 ``pkg/util/permits/permits.go``; mcm: one holder per key, always)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from mcm.controller.permits import PermitGiver
from mcm.runtime.clock import FakeClock


@pytest.fixture
def giver() -> Iterator[PermitGiver]:
    permits = PermitGiver(stale_after=60.0, janitor_period=3600.0)
    try:
        yield permits
    finally:
        permits.close()


def test_one_holder_per_key_under_contention(giver: PermitGiver) -> None:
    giver.register_permits("md-a", 1)
    lock = threading.Lock()
    holders, most, granted = 0, 0, 0

    def worker() -> None:
        nonlocal holders, most, granted
        for _ in range(200):
            assert giver.try_permit("md-a", 30.0)
            with lock:
                holders += 1
                granted += 1
                most = max(most, holders)
            with lock:
                holders -= 1
            giver.release_permit("md-a")

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert (most, granted) == (1, 1200)
    assert not giver.is_held("md-a")


def test_a_held_key_refuses_then_a_release_wakes_the_waiter(giver: PermitGiver) -> None:
    giver.register_permits("md-a", 1)
    assert giver.try_permit("md-a", 0.0)
    assert not giver.try_permit("md-a", 0.0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(giver.try_permit("md-a", 30.0)))
    waiter.start()
    giver.release_permit("md-a")
    waiter.join(30)
    assert got == [True]
    assert giver.is_held("md-a")


def test_unregistered_key_and_closed_giver_refuse(giver: PermitGiver) -> None:
    assert not giver.try_permit("unknown", 0.0)
    giver.release_permit("unknown")  # no-op, no crash
    giver.register_permits("md-a", 1)
    assert giver.try_permit("md-a", 0.0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(giver.try_permit("md-a", 30.0)))
    waiter.start()
    giver.close()
    waiter.join(30)
    assert got == [False]
    assert not giver.try_permit("md-a", 0.0)


def test_cleanup_drops_only_idle_stale_entries() -> None:
    clock = FakeClock()
    giver = PermitGiver(stale_after=60.0, janitor_period=3600.0, clock=clock)
    try:
        giver.register_permits("held", 1)
        giver.register_permits("idle", 1)
        assert giver.try_permit("held", 0.0)
        clock.step(61.0)
        giver.cleanup_stale()
        assert giver.is_held("held")
        assert not giver.try_permit("idle", 0.0)  # dropped: unregistered now
        giver.register_permits("idle", 1)
        assert giver.try_permit("idle", 0.0)
    finally:
        giver.close()


# --- CreationTracker: one flow per Machine, nobody waits (issue 23) ---------------------------


def test_the_creation_tracker_gives_a_machine_to_one_flow_at_a_time() -> None:
    from mcm.controller.context import CREATING, DELETING, ORPHAN_CHECK, CreationTracker

    tracker = CreationTracker()
    with tracker.deleting("ns/m") as deleting:
        assert deleting and tracker.holder("ns/m") == DELETING and "ns/m" not in tracker
        with tracker.creating("ns/m") as creating, tracker.hold_off("ns/m") as orphan:
            assert (creating, orphan) == (False, False)
        with tracker.creating("ns/other") as other:
            assert other
    with tracker.hold_off("ns/m") as orphan:
        assert orphan and tracker.holder("ns/m") == ORPHAN_CHECK
    with tracker.creating("ns/m") as creating:
        assert creating and tracker.holder("ns/m") == CREATING and "ns/m" in tracker
    assert tracker.holder("ns/m") is None


def test_an_abandoned_create_keeps_its_machine_in_creation_until_released_once() -> None:
    from mcm.controller.context import CreationTracker

    tracker = CreationTracker()
    with tracker.creating("ns/m") as creating:
        assert creating
        first = tracker.abandoned("ns/m")
        second = tracker.abandoned("ns/m")
    assert "ns/m" in tracker
    with tracker.deleting("ns/m") as deleting:
        assert not deleting
    first()
    first()  # a second call of the same release changes nothing
    assert "ns/m" in tracker
    second()
    assert "ns/m" not in tracker
    with tracker.deleting("ns/m") as deleting:
        assert deleting

"""The election algorithm on a FakeClock over an in-memory lock (client-go's leaderelection_test)."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from prometheus_client import CollectorRegistry

from mcm.runtime.clock import FakeClock
from mcm.runtime.leaderelection import (
    HealthzAdaptor,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    PrometheusLeaderMetrics,
)
from tests.runtime.leaderelection.fakes import FakeLock, LockStore

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
WAIT = 5.0  # real seconds a test waits for a thread that should react at once


class Candidate:
    """One elector in a thread, recording what its callbacks saw."""

    def __init__(self, store: LockStore, identity: str, clock: FakeClock, **settings: object) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.lead_stop: threading.Event | None = None
        self.leaders: list[str] = []
        self.leader_reported = threading.Event()
        self.stop = threading.Event()
        self.lock = FakeLock(store, identity)
        metrics = options_metrics(settings)
        options: dict[str, object] = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
        options.update(settings)
        config = LeaderElectionConfig(
            lock=self.lock,
            callbacks=LeaderCallbacks(self._on_started, self.stopped.set, self._on_new_leader),
            name="test",
            **options,  # type: ignore[arg-type]
        )
        self.elector = LeaderElector(config, clock=clock, metrics=metrics, rand=lambda: 0.0)
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)

    def _on_started(self, stop: threading.Event) -> None:
        self.lead_stop = stop
        self.started.set()

    def _on_new_leader(self, identity: str) -> None:
        self.leaders.append(identity)
        self.leader_reported.set()

    def start(self) -> Candidate:
        self.thread.start()
        return self

    def leading(self) -> bool:
        return self.started.is_set() and self.lead_stop is not None and not self.lead_stop.is_set()

    def shutdown(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


def options_metrics(settings: dict[str, object]) -> PrometheusLeaderMetrics | None:
    metrics = settings.pop("metrics", None)
    assert metrics is None or isinstance(metrics, PrometheusLeaderMetrics)
    return metrics


def held_by(identity: str, renew_time: dt.datetime = T0, transitions: int = 3) -> LeaderElectionRecord:
    return LeaderElectionRecord(identity, 15, renew_time, renew_time, transitions)


def advance(clock: FakeClock, seconds: float, waiters: int) -> None:
    """Step the clock, then wait (bounded, real time) until the electors are parked again."""
    clock.step(seconds)
    clock.block_until_waiters(waiters, timeout=WAIT)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store() -> LockStore:
    return LockStore()


def test_acquires_a_missing_lock_by_creating_it(clock: FakeClock, store: LockStore) -> None:
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    assert store.record == LeaderElectionRecord("a", 15, T0, T0, 0)
    assert cand.elector.is_leader()
    assert cand.elector.get_leader() == "a"
    cand.shutdown()
    assert cand.lead_stop is not None and cand.lead_stop.is_set()
    assert cand.stopped.is_set()
    assert store.events == ["a became leader", "a stopped leading"]


def test_an_empty_holder_is_taken_at_once(clock: FakeClock, store: LockStore) -> None:
    store.put(LeaderElectionRecord("", 1, T0, T0, 4))
    cand = Candidate(store, "b", clock).start()
    assert cand.started.wait(WAIT)
    assert store.record is not None
    assert store.record.holder_identity == "b"
    assert store.record.leader_transitions == 5
    cand.shutdown()


@pytest.mark.parametrize(
    "remote_renew_time",
    [dt.datetime(2000, 1, 1, tzinfo=dt.UTC), dt.datetime(2100, 1, 1, tzinfo=dt.UTC)],
    ids=["remote-clock-behind", "remote-clock-ahead"],
)
def test_takes_over_after_lease_duration_on_its_own_clock(
    clock: FakeClock, store: LockStore, remote_renew_time: dt.datetime
) -> None:
    store.put(held_by("other", remote_renew_time))
    cand = Candidate(store, "b", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    for _ in range(7):  # attempts at t = 2 .. 14: observed at t = 0, still within 15 s
        advance(clock, 2.0, 1)
        assert not cand.started.is_set()
    clock.step(2.0)  # t = 16
    assert cand.started.wait(WAIT)
    assert store.record is not None
    assert store.record.holder_identity == "b"
    assert store.record.leader_transitions == 4
    assert store.record.acquire_time == T0 + dt.timedelta(seconds=16)
    assert cand.leader_reported.wait(WAIT)
    assert cand.leaders[0] == "other"
    cand.shutdown()


def test_a_changed_record_restarts_the_wait(clock: FakeClock, store: LockStore) -> None:
    store.put(held_by("other"))
    cand = Candidate(store, "b", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    for _ in range(4):
        advance(clock, 2.0, 1)
    store.put(held_by("other", T0 + dt.timedelta(seconds=9)))  # the holder renews at t = 9
    for _ in range(8):  # seen at t = 10; attempts up to t = 24 must not take over
        advance(clock, 2.0, 1)
        assert not cand.started.is_set()
    clock.step(2.0)  # t = 26 > 10 + 15
    assert cand.started.wait(WAIT)
    cand.shutdown()


def test_renewals_keep_acquire_time_and_transitions(clock: FakeClock, store: LockStore) -> None:
    store.put(LeaderElectionRecord("", 1, T0, T0, 7))
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    for _ in range(3):
        advance(clock, 2.0, 2)
    first, *renewals = store.writes
    assert first.leader_transitions == 8
    assert len(renewals) == 4  # the first renewal round starts right after acquiring
    for n, record in enumerate(renewals):
        assert record.holder_identity == "a"
        assert record.acquire_time == first.acquire_time
        assert record.renew_time == T0 + dt.timedelta(seconds=2 * n)
        assert record.leader_transitions == 8
    cand.shutdown()


def test_a_restarted_leader_with_the_same_identity_renews_at_once(clock: FakeClock, store: LockStore) -> None:
    store.put(held_by("a"))
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    assert store.record is not None
    assert store.record.leader_transitions == 3
    assert store.record.acquire_time == T0
    cand.shutdown()


def test_stops_leading_at_the_renew_deadline_when_renewals_fail(clock: FakeClock, store: LockStore) -> None:
    registry = CollectorRegistry()
    cand = Candidate(store, "a", clock, metrics=PrometheusLeaderMetrics(registry)).start()
    assert cand.started.wait(WAIT)
    assert registry.get_sample_value("leader_election_master_status", {"name": "test"}) == 1
    clock.block_until_waiters(2, timeout=WAIT)
    store.fail = True
    before = store.requests
    for _ in range(5):  # the round starting at t = 2 has its deadline at t = 12
        advance(clock, 2.0, 2)
        assert cand.leading()
    clock.step(2.0)
    assert cand.stopped.wait(WAIT)
    assert store.requests - before == 5  # attempts at t = 2, 4, 6, 8, 10; none at the deadline
    assert cand.lead_stop is not None and cand.lead_stop.is_set()
    assert registry.get_sample_value("leader_election_master_status", {"name": "test"}) == 0
    assert cand.elector.is_leader()  # client-go's IsLeader: the last observed holder
    cand.thread.join(WAIT)


def test_a_hanging_request_does_not_delay_stepping_down(clock: FakeClock, store: LockStore) -> None:
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    store.hang = threading.Event()
    clock.step(2.0)  # the renewer now blocks in its request; only the deadline watchdog waits
    assert store.hanging.wait(WAIT)
    for _ in range(4):
        advance(clock, 2.0, 1)
    assert cand.leading()
    clock.step(2.0)  # t = 12
    assert cand.lead_stop is not None and cand.lead_stop.wait(WAIT)
    assert not cand.stopped.is_set()  # still waiting for the hanging renewer to return
    store.fail = True
    store.hang.set()
    assert cand.stopped.wait(WAIT)


def test_holds_lease_is_false_past_the_renew_deadline_before_the_watchdog_runs(
    clock: FakeClock, store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process paused (SIGSTOP) past its renew deadline wakes with its elector threads still
    parked: it is "leading" until the watchdog runs, but must not act as leader meanwhile."""
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    assert cand.elector.holds_lease()
    advance(clock, 2.0, 2)  # a renewal at t = 2: the deadline moves to t = 14
    assert cand.elector.holds_lease()
    resumed_at = clock.monotonic() + 12.5  # the pause: time passes, no thread of ours runs
    monkeypatch.setattr(clock, "monotonic", lambda: resumed_at)
    assert cand.leading()  # the watchdog has not run yet ...
    assert not cand.elector.holds_lease()  # ... but the elector already says no
    monkeypatch.undo()
    cand.shutdown()
    assert not cand.elector.holds_lease()


def test_a_renewal_round_that_starts_after_a_pause_does_not_reopen_the_fence(
    clock: FakeClock, store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 #1: a process paused past its renew deadline whose renewer wakes before the
    watchdog. The round it starts used to move the deadline to ``now + renew_deadline`` before
    any renewal succeeded, so ``holds_lease()`` was true again (for up to 10 s) while another
    process could hold the Lease. Now the round sees the deadline behind it and gives up."""
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    advance(clock, 2.0, 2)  # a renewal at t = 2: the deadline is t = 14, the next round at t = 4
    store.hang = threading.Event()  # a request sent now would hang (the buggy round's attempt)
    before = store.requests
    readings = clock.monotonic
    # The pause: 12.5 s pass that no thread of ours saw. The fake timers stay at t = 2, so the
    # next step wakes only the renewer (due at t = 4), not the watchdog (due at t = 14).
    monkeypatch.setattr(clock, "monotonic", lambda: readings() + 12.5)
    clock.step(2.0)  # the renewer wakes at t = 16.5 as the elector reads the clock
    assert cand.lead_stop is not None
    stepped_down = cand.lead_stop.wait(WAIT)
    try:
        assert not cand.elector.holds_lease(), "the renewal round reopened the fence"
        assert stepped_down, "the renewer did not give up at the passed deadline"
        assert store.requests == before, "no attempt once the deadline has passed"
    finally:
        store.hang.set()
        monkeypatch.undo()
        cand.shutdown()


def test_holds_lease_is_false_before_leading_and_after_stepping_down(
    clock: FakeClock, store: LockStore
) -> None:
    store.fail = True
    cand = Candidate(store, "a", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    assert not cand.elector.holds_lease()  # campaigning
    cand.shutdown()
    assert not cand.elector.holds_lease()


def test_release_on_cancel_frees_the_lock_for_the_next_candidate(clock: FakeClock, store: LockStore) -> None:
    first = Candidate(store, "a", clock, release_on_cancel=True).start()
    assert first.started.wait(WAIT)
    first.shutdown()
    assert store.record == LeaderElectionRecord("", 1, T0, T0, 0)
    assert not first.elector.is_leader()
    second = Candidate(store, "b", clock).start()
    assert second.started.wait(WAIT)  # no clock step: the first attempt takes it
    assert store.record is not None
    assert store.record.leader_transitions == 1
    second.shutdown()


def test_without_release_the_lock_stays_held(clock: FakeClock, store: LockStore) -> None:
    first = Candidate(store, "a", clock).start()
    assert first.started.wait(WAIT)
    first.shutdown()
    assert store.record is not None
    assert store.record.holder_identity == "a"


def test_on_stopped_leading_runs_when_never_leading(clock: FakeClock, store: LockStore) -> None:
    store.put(held_by("other"))
    cand = Candidate(store, "b", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    cand.shutdown()
    assert cand.stopped.is_set()
    assert not cand.started.is_set()


def test_two_racing_candidates_never_lead_together(clock: FakeClock, store: LockStore) -> None:
    cands = [Candidate(store, name, clock) for name in ("a", "b", "c")]
    for cand in cands:
        cand.start()
    clock.block_until_waiters(4, timeout=WAIT)  # one leader (2 waiters) + two candidates
    for _ in range(20):
        assert sum(c.leading() for c in cands) == 1
        advance(clock, 2.0, 4)
    leader = next(c for c in cands if c.leading())
    assert store.record is not None
    assert store.record.holder_identity == leader.lock.identity()
    assert store.record.leader_transitions == 0
    for cand in cands:
        cand.shutdown()


def test_health_check_fails_when_the_leader_stopped_renewing(clock: FakeClock, store: LockStore) -> None:
    adaptor = HealthzAdaptor(timeout=5.0)
    assert adaptor.check() is None
    cand = Candidate(store, "a", clock, watchdog=adaptor).start()
    assert cand.started.wait(WAIT)
    assert adaptor.name() == "leaderElection"
    assert adaptor.check() is None
    cand.shutdown()  # no release: we stay the observed holder without renewing
    clock.step(20.0)
    assert adaptor.check() is None
    clock.step(0.5)
    err = adaptor.check()
    assert err is not None
    assert str(err) == "failed election to renew leadership on lease test"


def test_when_the_leader_stops_the_other_takes_over_after_a_lease_duration(
    clock: FakeClock, store: LockStore
) -> None:
    first = Candidate(store, "a", clock).start()
    assert first.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    second = Candidate(store, "b", clock).start()
    clock.block_until_waiters(3, timeout=WAIT)
    for _ in range(5):  # the leader renews, the other keeps seeing changes
        advance(clock, 2.0, 3)
        assert first.leading() and not second.started.is_set()
    stopped_at = clock.monotonic()
    first.shutdown()  # no release: the other must wait for the lease to expire
    clock.block_until_waiters(1, timeout=WAIT)
    while not second.elector.is_leader():  # set before the elector parks on the clock again
        assert clock.monotonic() - stopped_at < 15.0 + 2 * 2.0, "no takeover in lease + retry period"
        advance(clock, 2.0, 1)
    assert second.started.wait(WAIT)
    assert clock.monotonic() - stopped_at > 15.0
    assert store.record is not None
    assert (store.record.holder_identity, store.record.leader_transitions) == ("b", 1)
    second.shutdown()


def test_run_or_die_refuses_an_invalid_config(store: LockStore) -> None:
    from mcm.runtime.leaderelection import LeaderElectionConfigError, run_or_die

    config = LeaderElectionConfig(
        lock=FakeLock(store, "a"),
        callbacks=LeaderCallbacks(lambda stop: None, lambda: None),
        retry_period=20.0,
    )
    with pytest.raises(LeaderElectionConfigError):
        run_or_die(config, threading.Event())
    assert store.record is None


def test_fast_path_renews_with_one_request_and_falls_back_on_conflict(
    clock: FakeClock, store: LockStore
) -> None:
    cand = Candidate(store, "a", clock, fast_path=True).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    before = store.requests
    for _ in range(3):
        advance(clock, 2.0, 2)
    assert store.requests - before == 3  # update only, no read
    assert store.record is not None
    store.put(store.record)  # someone else wrote: the cached resourceVersion is stale
    before = store.requests
    advance(clock, 2.0, 2)
    assert store.requests - before == 3  # failed update, then read and update
    assert cand.leading()
    assert store.record.holder_identity == "a"
    cand.shutdown()


def test_without_fast_path_every_renewal_reads_first(clock: FakeClock, store: LockStore) -> None:
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    before = store.requests
    for _ in range(3):
        advance(clock, 2.0, 2)
    assert store.requests - before == 6
    cand.shutdown()


def test_a_leader_that_created_the_lock_renews_from_its_own_record(
    clock: FakeClock, store: LockStore
) -> None:
    """The record it created is the one it holds: with the fast path its first renewal is one
    update, without reading the lock back (a missing lock read, created, then renewed)."""
    cand = Candidate(store, "a", clock, fast_path=True).start()
    assert cand.started.wait(WAIT)
    clock.block_until_waiters(2, timeout=WAIT)
    assert store.requests == 3  # get (not found), create, renewing update
    assert cand.elector.is_leader() and cand.elector.get_leader() == "a"
    cand.shutdown()


def test_an_attempt_that_raises_is_a_failed_attempt_not_leadership(
    clock: FakeClock, store: LockStore
) -> None:
    """A lock implementation with a bug (here its identity raises) does not end the campaign,
    and never makes the candidate a leader: each attempt fails and is retried."""
    cand = Candidate(store, "a", clock)

    def broken() -> str:
        raise RuntimeError("lock bug")

    cand.lock.identity = broken  # type: ignore[method-assign]
    cand.start()
    for _ in range(3):
        clock.block_until_waiters(1, timeout=WAIT)
        advance(clock, 2.0, 1)
    assert not cand.started.is_set()
    assert store.record is None
    cand.shutdown()


class ScriptedStore(LockStore):
    """A lock store whose ``hang_at``-th request hangs until ``release`` is set, and whose
    requests from the ``fail_from``-th on fail (both counted from 1)."""

    def __init__(self, hang_at: int = 0, fail_from: int = 0) -> None:
        super().__init__()
        self.hang_at, self.fail_from = hang_at, fail_from
        self.release = threading.Event()

    def _gate(self) -> None:
        self.requests += 1
        if self.requests == self.hang_at:
            self.hanging.set()
            self.release.wait(10)
        if self.fail_from and self.requests >= self.fail_from:
            raise ConnectionError("server unreachable")


def test_the_leader_that_took_over_is_the_observed_leader_before_any_renewal(clock: FakeClock) -> None:
    """Right after a takeover, before the first renewal has read the lock again, the elector
    reports itself as leader (IsLeader, GetLeader), from the record it wrote."""
    store = ScriptedStore(hang_at=4)  # get (held), get + update (takeover), the renewal's get
    store.put(held_by("other"))
    cand = Candidate(store, "b", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)
    clock.step(16.0)
    assert cand.started.wait(WAIT)
    try:
        assert store.hanging.wait(WAIT)  # the renewer is parked in its first request
        assert cand.elector.is_leader()
        assert cand.elector.get_leader() == "b"
    finally:
        store.release.set()
        cand.shutdown()


def test_the_leader_steps_down_at_its_deadline_not_before(clock: FakeClock) -> None:
    """The watchdog wakes at the deadline it last read (t = 10); a renewal at t = 0.25 moved
    it to t = 10.75 (0.25 + retry period 0.5 + renew deadline 10), so the leader leads on until
    then, and steps down at t = 10.75 when the renewals after it fail."""
    store = ScriptedStore(hang_at=3, fail_from=5)  # get + create, the renewal's get hangs
    cand = Candidate(store, "a", clock, retry_period=0.5).start()
    assert cand.started.wait(WAIT)
    assert store.hanging.wait(WAIT)
    clock.block_until_waiters(1, timeout=WAIT)  # the watchdog, due at t = 10
    clock.step(0.25)
    store.release.set()  # the renewal succeeds at t = 0.25; every later request fails
    clock.block_until_waiters(2, timeout=WAIT)
    for _ in range(20):  # to t = 10.25
        advance(clock, 0.5, 2)
    assert cand.leading(), "stepped down before the deadline"
    assert cand.elector.holds_lease()
    clock.step(0.5)  # t = 10.75
    assert cand.stopped.wait(WAIT)
    assert not cand.elector.holds_lease()


def test_a_renewal_answered_after_the_deadline_does_not_count(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renewal's request hangs; the process is paused past the deadline (no timer fires),
    then the request succeeds. The success comes too late: the deadline does not move and the
    leader steps down, even though the watchdog has not run."""
    store = ScriptedStore(hang_at=3)  # get + create, then the first renewal's get hangs
    cand = Candidate(store, "a", clock).start()
    assert cand.started.wait(WAIT)
    assert store.hanging.wait(WAIT)
    clock.block_until_waiters(1, timeout=WAIT)  # the watchdog, due at t = 10
    readings = clock.monotonic
    monkeypatch.setattr(clock, "monotonic", lambda: readings() + 12.0)
    try:
        store.release.set()  # the get and the update succeed at t = 12
        assert cand.lead_stop is not None
        assert cand.lead_stop.wait(WAIT), "a renewal after the deadline moved it"
        assert not cand.elector.holds_lease()
    finally:
        monkeypatch.undo()
        cand.shutdown()


def test_a_failed_create_is_not_leadership(clock: FakeClock) -> None:
    store = ScriptedStore(fail_from=2)  # the get finds no Lease, the create fails
    cand = Candidate(store, "a", clock).start()
    clock.block_until_waiters(1, timeout=WAIT)  # waiting for the next attempt
    try:
        assert not cand.elector.holds_lease()
        assert not cand.elector.is_leader()
        assert store.record is None and not cand.started.is_set()
    finally:
        cand.shutdown()

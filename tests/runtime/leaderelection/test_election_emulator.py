"""Electors on real threads and a real clock against the emulator.

Short durations (lease 1 s, renew deadline 0.5 s, retry 0.1 s). Each candidate records when it
started and stopped leading and when its last successful write to the Lease was sent; a sampler
thread also checks continuously that at most one candidate leads at any moment.

Every bound holds on a loaded machine: the safety bounds are exact (a candidate takes over no
sooner than a lease duration after the last renewal it could have seen, which load can only
delay), and the liveness bounds leave :data:`LOADED` seconds for scheduling delays.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from mcm.runtime.client.config import load_config
from mcm.runtime.client.resources import LEASES
from mcm.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    LeaseLock,
    lease_request_timeout,
)

if TYPE_CHECKING:
    from mcm.emulator import Emulator

LEASE, RENEW, RETRY = 1.0, 0.5, 0.1
LOADED = 3.0
"""Seconds a loaded 2-core machine may add to a thread's wake-up or a request (liveness only)."""
WAIT = 10.0
LONG_LEASE = 30.0
"""A Lease duration no wait of these tests comes near: a takeover within WAIT did not wait it out."""


class TimedLock(LeaseLock):
    """A LeaseLock that remembers when its last successful write (create or update) was sent:
    no other candidate can have seen the record it wrote before that moment."""

    written_at: float | None = None

    def create(self, record: LeaderElectionRecord) -> None:
        sent = time.monotonic()
        super().create(record)
        self.written_at = sent

    def update(self, record: LeaderElectionRecord) -> None:
        sent = time.monotonic()
        super().update(record)
        self.written_at = sent


class Candidate:
    def __init__(
        self, kubeconfig: str, identity: str, *, release_on_cancel: bool = False, lease: float = LEASE
    ) -> None:
        self.identity = identity
        self.client = load_config(kubeconfig, qps=-1, timeout=lease_request_timeout(RENEW))
        self.lock = TimedLock(self.client, "default", "mcm", identity)
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.lead_stop: threading.Event | None = None
        self.started_at: float | None = None
        self.lost_at: float | None = None
        self.lead_done = threading.Event()
        self.stop = threading.Event()
        config = LeaderElectionConfig(
            lock=self.lock,
            callbacks=LeaderCallbacks(self._lead, self.stopped.set),
            lease_duration=lease,
            renew_deadline=RENEW,
            retry_period=RETRY,
            release_on_cancel=release_on_cancel,
            name="mcm",
        )
        self.elector = LeaderElector(config)
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)

    def _lead(self, stop: threading.Event) -> None:
        self.started_at = time.monotonic()
        self.lead_stop = stop
        self.started.set()
        stop.wait()
        self.lost_at = time.monotonic()
        self.lead_done.set()

    def leading(self) -> bool:
        return self.lead_stop is not None and not self.lead_stop.is_set()

    def start(self) -> Candidate:
        self.thread.start()
        return self

    def halt(self) -> float:
        """Stop campaigning; return when that was asked (monotonic)."""
        asked = time.monotonic()
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return asked


class Sampler:
    """Samples all candidates every millisecond; remembers the most leaders seen at once."""

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates = candidates
        self.max_leaders = 0
        self.samples = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(0.001):
            self.samples += 1
            self.max_leaders = max(self.max_leaders, sum(c.leading() for c in self.candidates))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(WAIT)


def leader_of(candidates: list[Candidate]) -> tuple[Candidate, Candidate]:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for cand in candidates:
            if cand.started.wait(0.01):
                return cand, next(c for c in candidates if c is not cand)
    raise AssertionError("nobody became leader")


def assert_no_overlap(first: Candidate, second: Candidate) -> None:
    assert first.lead_done.wait(WAIT)
    assert first.lost_at is not None and second.started_at is not None
    assert first.lost_at < second.started_at


@pytest.fixture
def pair(kubeconfig: str, request: pytest.FixtureRequest) -> Iterator[list[Candidate]]:
    release = getattr(request, "param", False)
    lease = LONG_LEASE if release else LEASE
    cands = [Candidate(kubeconfig, name, release_on_cancel=release, lease=lease) for name in ("a", "b")]
    yield cands
    for cand in cands:
        cand.stop.set()
    for cand in cands:
        cand.thread.join(WAIT)


@pytest.mark.slow
def test_the_other_takes_over_after_the_lease_expires(pair: list[Candidate], emulator: Emulator) -> None:
    with Sampler(pair) as sampler:
        for cand in pair:
            cand.start()
        leader, other = leader_of(pair)
        time.sleep(1.5 * LEASE)  # several renewals; the other must keep waiting ...
        if other.started.is_set():  # ... unless load held the renewals past the deadline
            assert leader.lost_at is not None and leader.lost_at < (other.started_at or 0)
        leader.halt()
        assert leader.stopped.is_set()
        assert other.started.wait(WAIT)
    assert_no_overlap(leader, other)
    assert leader.lock.written_at is not None and other.started_at is not None
    assert other.started_at - leader.lock.written_at >= LEASE, "taken over before the lease expired"
    assert sampler.samples > 100
    assert sampler.max_leaders == 1
    lease = other.client.resource(LEASES).get("mcm", namespace="default")
    assert lease["spec"]["holderIdentity"] == other.identity
    assert lease["spec"]["leaseTransitions"] == 1


@pytest.mark.parametrize("pair", [True], indirect=True)
def test_release_on_cancel_lets_the_other_take_over_without_waiting_out_the_lease(
    pair: list[Candidate],
) -> None:
    """With a 30 s Lease, a takeover within WAIT (10 s) can only come from the release."""
    with Sampler(pair) as sampler:
        for cand in pair:
            cand.start()
        leader, other = leader_of(pair)
        leader.halt()
        assert other.started.wait(WAIT), "the other waited for the released Lease to expire"
    assert_no_overlap(leader, other)
    assert sampler.max_leaders <= 1  # the first leadership may be too short to be sampled


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["refuse", "hang"])
def test_a_leader_that_cannot_renew_steps_down_at_the_deadline(
    pair: list[Candidate], emulator: Emulator, mode: str
) -> None:
    with Sampler(pair) as sampler:
        for cand in pair:
            cand.start()
        leader, other = leader_of(pair)
        paused_at = time.monotonic()
        emulator.pause(mode)
        try:
            assert leader.lead_stop is not None and leader.lead_stop.wait(WAIT)
            lost_after = (leader.lost_at or time.monotonic()) - paused_at
            assert lost_after < RETRY + RENEW + LOADED
            time.sleep(LEASE + 0.5)  # nobody may claim leadership while the server is away
            assert not leader.leading()
            assert not other.started.is_set()
        finally:
            emulator.resume()
        assert leader.stopped.wait(WAIT)
        assert other.started.wait(WAIT)  # once the server is back, the lease expires for the other
    assert_no_overlap(leader, other)
    assert sampler.max_leaders == 1

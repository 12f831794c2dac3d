"""The leader elector (``tools/leaderelection/leaderelection.go``, v0.28 semantics; the v0.30
fast path is the ``fast_path`` option).

Guarantees:

- A candidate takes the lock only when the holder is empty, or when the record it observes has
  not changed for the record's ``leaseDurationSeconds`` measured on **our** monotonic clock since
  we saw it change. The times written in the record are never compared with the local clock.
- Every write goes through the lock's optimistic concurrency (resourceVersion), so of two
  racing candidates at most one succeeds.
- The leader renews every ``retry_period``. Leadership ends at a deadline that only a
  successful renewal moves (to ``retry_period + renew_deadline`` after it; acquiring sets it
  ``renew_deadline`` ahead), never the start of a renewal round: a process paused past the
  deadline wakes with it behind, makes no further attempt and steps down. At the deadline the
  stop event given to ``on_started_leading`` is set, even if a request is still hanging (a
  watchdog on the clock enforces it, as client-go's context deadline aborts the request). A
  renewal answered after the deadline does not count. (client-go gives each renewal round a
  fresh ``RenewDeadline`` from the round's start, so a paused leader that wakes leads on until
  that round fails; mcm's fence needs the deadline to mean "no renewal since".)
- Setting the ``stop`` event given to :meth:`LeaderElector.run` sets the leading stop event at
  once; with ``release_on_cancel`` the record is then rewritten with an empty holder.
- ``on_stopped_leading`` always runs when :meth:`LeaderElector.run` returns, after the leading
  stop event is set. ``leaseTransitions`` grows by one whenever a different identity takes over.
- :meth:`LeaderElector.is_leader` is client-go's ``IsLeader``: the last observed holder is us.
  It is not reset when renewing fails (the health check relies on that); "currently leading"
  is the window between ``on_started_leading`` and its stop event.
- :meth:`LeaderElector.holds_lease` (not in client-go) is "currently leading" checked against
  the clock: false as soon as the renew deadline has passed without a renewal, even before the
  deadline watchdog has run. A process paused past the deadline (SIGSTOP, a frozen VM) can ask
  it before an action another leader may already have taken over.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import structlog

from mcm.runtime.client.errors import is_not_found
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import handle_crash
from mcm.runtime.leaderelection.config import JITTER_FACTOR, LeaderCallbacks, LeaderElectionConfig
from mcm.runtime.leaderelection.interface import ResourceLock
from mcm.runtime.leaderelection.metrics import LeaderMetrics, get_provider
from mcm.runtime.leaderelection.record import LeaderElectionRecord

__all__ = ["LeaderElector", "new_leader_elector", "run_or_die"]

log = structlog.get_logger(__name__)


def _jitter(duration: float, max_factor: float, rand: Callable[[], float]) -> float:
    return duration + rand() * max_factor * duration


class LeaderElector:
    """Runs one candidate for one lock. Create with :func:`new_leader_elector` or directly."""

    def __init__(
        self,
        config: LeaderElectionConfig,
        *,
        clock: Clock = REAL_CLOCK,
        metrics: LeaderMetrics | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        config.validate()
        assert config.lock is not None  # validated
        self._config = config
        self._lock: ResourceLock = config.lock
        self._callbacks: LeaderCallbacks = config.callbacks
        self._clock = clock
        self._metrics = metrics if metrics is not None else get_provider()
        self._rand = rand
        self._mutex = threading.Lock()
        self._observed_record = LeaderElectionRecord()
        self._observed_raw: bytes | None = None
        self._observed_time = clock.monotonic()
        self._reported_leader = ""
        self._deadline = 0.0
        self._lead_stop: threading.Event | None = None
        self._metrics.leader_off(config.name)
        if config.watchdog is not None:
            config.watchdog.set_leader_elector(self)

    @property
    def config(self) -> LeaderElectionConfig:
        return self._config

    # -- observed state ------------------------------------------------------------------------
    def is_leader(self) -> bool:
        """True if the last observed record names us as holder."""
        with self._mutex:
            return self._observed_record.holder_identity == self._lock.identity()

    def holds_lease(self) -> bool:
        """True while leading and the renew deadline has not passed (see the module docstring)."""
        with self._mutex:
            lead_stop = self._lead_stop
            return (
                lead_stop is not None and not lead_stop.is_set() and self._clock.monotonic() < self._deadline
            )

    def get_leader(self) -> str:
        """The holder identity of the last observed record (``""``: none)."""
        with self._mutex:
            return self._observed_record.holder_identity

    def _set_observed(self, record: LeaderElectionRecord, raw: bytes | None = None) -> None:
        with self._mutex:
            self._observed_record = record
            self._observed_time = self._clock.monotonic()
            if raw is not None:
                self._observed_raw = raw

    def _observed(self) -> LeaderElectionRecord:
        with self._mutex:
            return self._observed_record

    def check(self, max_tolerable_expired_lease: float) -> Exception | None:
        """Health check: an error when we lead but have not renewed for too long, else None."""
        if not self.is_leader():
            return None
        with self._mutex:
            since = self._clock.since(self._observed_time)
        if since > self._config.lease_duration + max_tolerable_expired_lease:
            return RuntimeError(f"failed election to renew leadership on lease {self._config.name}")
        return None

    # -- run -----------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Campaign until ``stop`` is set; lead while we hold the lock; return when we stop leading."""
        try:
            if not self._acquire(stop):
                return
            lead_stop = threading.Event()
            with self._mutex:
                self._lead_stop = lead_stop
                self._deadline = self._clock.monotonic() + self._config.renew_deadline
            self._start_leading(lead_stop)
            self._renew(stop, lead_stop)
        finally:
            on_stopped = self._callbacks.on_stopped_leading
            if on_stopped is not None:
                with handle_crash():
                    on_stopped()

    def _start_leading(self, lead_stop: threading.Event) -> None:
        on_started = self._callbacks.on_started_leading
        assert on_started is not None  # validated

        def lead() -> None:
            with handle_crash():
                on_started(lead_stop)

        threading.Thread(target=lead, name=f"leading-{self._config.name}", daemon=True).start()

    # -- acquire -------------------------------------------------------------------------------
    def _acquire(self, stop: threading.Event) -> bool:
        """Try every ``retry_period`` (jittered by 1.2) until we hold the lock or ``stop`` is set."""
        desc = self._lock.describe()
        log.info("attempting_to_acquire_leader_lease", lease=desc)
        while not stop.is_set():
            succeeded = self._attempt()
            self._maybe_report_transition()
            if succeeded:
                self._lock.record_event("became leader")
                self._metrics.leader_on(self._config.name)
                log.info("successfully_acquired_lease", lease=desc)
                return True
            log.debug("failed_to_acquire_lease", lease=desc)
            self._clock.wait(stop, _jitter(self._config.retry_period, JITTER_FACTOR, self._rand))
        return False

    # -- renew ---------------------------------------------------------------------------------
    def _renew(self, stop: threading.Event, lead_stop: threading.Event) -> None:
        """Renew in a thread while this one enforces the deadline; then step down."""
        renewer = threading.Thread(
            target=self._renew_loop, args=(lead_stop,), name=f"renew-{self._config.name}", daemon=True
        )
        renewer.start()
        self._watch_deadline(stop, lead_stop)
        # A request still hanging may keep the renewer a while; do not let it hold back
        # on_stopped_leading for longer than a renew deadline (real time).
        renewer.join(max(1.0, self._config.renew_deadline))
        self._metrics.leader_off(self._config.name)
        self._lock.record_event("stopped leading")
        if self._config.release_on_cancel:
            self._release()

    def _watch_deadline(self, stop: threading.Event, lead_stop: threading.Event) -> None:
        """Return once leadership ends: ``stop`` set, deadline passed, or the renewer gave up."""
        while not lead_stop.is_set():
            with self._mutex:
                remaining = self._deadline - self._clock.monotonic()
                if remaining <= 0:
                    lead_stop.set()
                    break
            if self._clock.wait(stop, remaining):
                lead_stop.set()
        log.info("stopped_leading", lease=self._lock.describe(), stopped=stop.is_set())

    def _renew_loop(self, lead_stop: threading.Event) -> None:
        desc = self._lock.describe()
        while not lead_stop.is_set():
            if not self._renew_round(lead_stop):
                log.info("failed_to_renew_lease", lease=desc, reason="timed out waiting for the condition")
                lead_stop.set()
                return
            log.debug("successfully_renewed_lease", lease=desc)
            self._clock.wait(lead_stop, self._config.retry_period)

    def _renew_round(self, lead_stop: threading.Event) -> bool:
        """Attempt at once, then every ``retry_period``, until a renewal succeeds or the deadline
        set by the last success passes. The round never moves the deadline itself: a process
        paused past it wakes with the deadline behind it, so :meth:`holds_lease` stays false and
        no attempt is made (only :meth:`_extend_deadline`, after a success, moves it)."""
        with self._mutex:
            deadline = self._deadline
        while not lead_stop.is_set() and self._clock.monotonic() < deadline:
            succeeded = self._attempt()
            self._maybe_report_transition()
            if succeeded and self._extend_deadline(lead_stop):
                return True
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            self._clock.wait(lead_stop, min(self._config.retry_period, remaining))
        return False

    def _extend_deadline(self, lead_stop: threading.Event) -> bool:
        """Count a success only if leadership has not ended meanwhile; move the deadline on."""
        with self._mutex:
            now = self._clock.monotonic()
            if lead_stop.is_set() or now >= self._deadline:
                return False
            self._deadline = now + self._config.retry_period + self._config.renew_deadline
            return True

    # -- one attempt ---------------------------------------------------------------------------
    def _attempt(self) -> bool:
        try:
            return self._try_acquire_or_renew()
        except Exception as err:  # a broken lock must not end the campaign
            log.error("leader_election_attempt_failed", lease=self._lock.describe(), error=str(err))
            return False

    def _try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lock (``tryAcquireOrRenew``)."""
        now_wall = self._clock.now()
        now = self._clock.monotonic()
        desired = LeaderElectionRecord(
            holder_identity=self._lock.identity(),
            lease_duration_seconds=int(self._config.lease_duration),
            acquire_time=now_wall,
            renew_time=now_wall,
        )
        if self._config.fast_path and self._renew_from_cache(desired, now):
            return True
        try:
            old, raw = self._lock.get()
        except Exception as err:
            if not is_not_found(err):
                log.error("error_retrieving_resource_lock", lease=self._lock.describe(), error=str(err))
                return False
            return self._create(desired)

        with self._mutex:
            changed = raw != self._observed_raw
        if changed:
            self._set_observed(old, raw)
        with self._mutex:
            observed_time = self._observed_time
        is_leader = self.is_leader()
        if old.holder_identity and observed_time + old.lease_duration_seconds > now and not is_leader:
            log.debug("lock_is_held", holder=old.holder_identity)
            return False

        if is_leader:
            desired = desired.with_changes(
                acquire_time=old.acquire_time, leader_transitions=old.leader_transitions
            )
        else:
            desired = desired.with_changes(leader_transitions=old.leader_transitions + 1)
        try:
            self._lock.update(desired)
        except Exception as err:
            log.error("failed_to_update_lock", lease=self._lock.describe(), error=str(err))
            return False
        self._set_observed(desired)
        return True

    def _renew_from_cache(self, desired: LeaderElectionRecord, now: float) -> bool:
        """The v0.30 fast path: a leader with a valid lease writes without reading first."""
        with self._mutex:
            observed, observed_time = self._observed_record, self._observed_time
        if observed.holder_identity != self._lock.identity():
            return False
        if observed_time + observed.lease_duration_seconds <= now:
            return False
        renewal = desired.with_changes(
            acquire_time=observed.acquire_time, leader_transitions=observed.leader_transitions
        )
        try:
            self._lock.update(renewal)
        except Exception as err:
            log.info("failed_to_renew_optimistically", lease=self._lock.describe(), error=str(err))
            return False
        self._set_observed(renewal)
        return True

    def _create(self, desired: LeaderElectionRecord) -> bool:
        try:
            self._lock.create(desired)
        except Exception as err:
            log.error("error_initially_creating_leader_election_record", error=str(err))
            return False
        self._set_observed(desired)
        return True

    def _release(self) -> None:
        """Write an empty holder if we hold the lock, so others need not wait (``release``)."""
        if not self.is_leader():
            return
        now_wall = self._clock.now()
        released = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now_wall,
            renew_time=now_wall,
            leader_transitions=self._observed().leader_transitions,
        )
        try:
            self._lock.update(released)
        except Exception as err:
            log.error("failed_to_release_lock", lease=self._lock.describe(), error=str(err))
            return
        self._set_observed(released)

    def _maybe_report_transition(self) -> None:
        with self._mutex:
            holder = self._observed_record.holder_identity
            if holder == self._reported_leader:
                return
            self._reported_leader = holder
        on_new_leader = self._callbacks.on_new_leader
        if on_new_leader is None:
            return

        def report() -> None:
            with handle_crash():
                on_new_leader(holder)

        threading.Thread(target=report, name="new-leader", daemon=True).start()


def new_leader_elector(
    config: LeaderElectionConfig, *, clock: Clock = REAL_CLOCK, metrics: LeaderMetrics | None = None
) -> LeaderElector:
    """Validate ``config`` and build an elector (raises ``LeaderElectionConfigError``)."""
    return LeaderElector(config, clock=clock, metrics=metrics)


def run_or_die(config: LeaderElectionConfig, stop: threading.Event, *, clock: Clock = REAL_CLOCK) -> None:
    """Build an elector and run it; an invalid ``config`` raises instead of returning."""
    new_leader_elector(config, clock=clock).run(stop)

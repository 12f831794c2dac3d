"""Leader election settings and their validation (``LeaderElectionConfig``, ``NewLeaderElector``).

Durations are seconds. :meth:`LeaderElectionConfig.validate` applies client-go's rules with its
messages, in its order:

- ``lease_duration > renew_deadline``
- ``renew_deadline > JITTER_FACTOR * retry_period``
- every duration > 0
- ``on_started_leading`` and ``on_stopped_leading`` set, a lock set, and its identity not empty.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcm.runtime.leaderelection.interface import ResourceLock

if TYPE_CHECKING:
    from mcm.runtime.leaderelection.healthz import HealthzAdaptor

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElectionConfigError",
]

JITTER_FACTOR = 1.2
"""Acquire attempts are ``retry_period`` times a random factor in ``[1, 1 + JITTER_FACTOR)`` apart."""

DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0

_NANOSECOND = 1e-9


class LeaderElectionConfigError(ValueError):
    """The configuration breaks one of client-go's rules."""


@dataclass(frozen=True)
class LeaderCallbacks:
    """What to run on leadership changes.

    - ``on_started_leading(stop)`` runs in its own thread once we lead; ``stop`` is set when
      leadership is lost or the elector is stopped, and the work must then end.
    - ``on_stopped_leading()`` runs when :meth:`LeaderElector.run` returns, also if we never led.
    - ``on_new_leader(identity)`` (optional) runs in its own thread whenever the observed holder
      changes, including the first one seen and ``""`` after a release.
    """

    on_started_leading: Callable[[threading.Event], None] | None
    on_stopped_leading: Callable[[], None] | None
    on_new_leader: Callable[[str], None] | None = None


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Settings of one elector (``leaderelection.LeaderElectionConfig``).

    - ``lock``: where the record lives (a :class:`LeaseLock`).
    - ``lease_duration``: how long a candidate waits, on its own clock since it last saw the
      record change, before it takes over. Written to the record in whole seconds.
    - ``renew_deadline``: how long the leader keeps retrying a renewal before it stops leading.
    - ``retry_period``: pause between attempts.
    - ``release_on_cancel``: when stopped while leading, write an empty holder so another
      candidate takes over at its next attempt.
    - ``fast_path``: the leader renews straight from its cached Lease, without reading it
      first, while its lease is valid by its own observation (client-go v0.30+; one request per
      renewal instead of two). A conflict falls back to the read-then-write path. Off by
      default: the v0.28 behaviour.
    - ``name``: label for metrics and health checks.
    - ``watchdog``: a :class:`HealthzAdaptor` to attach the elector to.
    """

    lock: ResourceLock | None
    callbacks: LeaderCallbacks
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = False
    fast_path: bool = False
    name: str = ""
    watchdog: HealthzAdaptor | None = field(default=None, compare=False)

    def validate(self) -> None:
        """Raise :class:`LeaderElectionConfigError` on the first rule the settings break."""
        message = _first_violation(self)
        if message is not None:
            raise LeaderElectionConfigError(message)


def _first_violation(config: LeaderElectionConfig) -> str | None:
    if config.lease_duration <= config.renew_deadline:
        return "leaseDuration must be greater than renewDeadline"
    if config.renew_deadline <= JITTER_FACTOR * config.retry_period:
        return "renewDeadline must be greater than retryPeriod*JitterFactor"
    if config.lease_duration < _NANOSECOND:
        return "leaseDuration must be greater than zero"
    if config.renew_deadline < _NANOSECOND:
        return "renewDeadline must be greater than zero"
    if config.retry_period < _NANOSECOND:
        return "retryPeriod must be greater than zero"
    if config.callbacks.on_started_leading is None:
        return "OnStartedLeading callback must not be nil"
    if config.callbacks.on_stopped_leading is None:
        return "OnStoppedLeading callback must not be nil"
    if config.lock is None:
        return "Lock must not be nil."
    if not config.lock.identity():
        return "Lock identity is empty"
    return None

"""Validation of LeaderElectionConfig with client-go's rules and messages."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from mcm.runtime.leaderelection import LeaderCallbacks, LeaderElectionConfig, LeaderElectionConfigError
from mcm.runtime.leaderelection.elector import LeaderElector
from tests.runtime.leaderelection.fakes import FakeLock, LockStore


def _started(stop: threading.Event) -> None:
    pass


def _stopped() -> None:
    pass


CALLBACKS = LeaderCallbacks(_started, _stopped)


def config(**changes: object) -> LeaderElectionConfig:
    values: dict[str, object] = {
        "lock": FakeLock(LockStore(), "me"),
        "callbacks": CALLBACKS,
        "lease_duration": 15.0,
        "renew_deadline": 10.0,
        "retry_period": 2.0,
    }
    values.update(changes)
    return LeaderElectionConfig(**values)  # type: ignore[arg-type]


def test_defaults_are_client_go_and_mcm_defaults() -> None:
    cfg = LeaderElectionConfig(lock=FakeLock(LockStore(), "me"), callbacks=CALLBACKS)
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    assert cfg.release_on_cancel is False
    assert cfg.fast_path is False  # client-go v0.28: every renewal reads the Lease first
    assert (cfg.name, cfg.watchdog, CALLBACKS.on_new_leader) == ("", None, None)
    cfg.validate()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lease_duration": 10.0}, "leaseDuration must be greater than renewDeadline"),
        ({"renew_deadline": 2.4}, "renewDeadline must be greater than retryPeriod*JitterFactor"),
        (
            {"lease_duration": 0.0, "renew_deadline": -1.0, "retry_period": -1.0},
            "leaseDuration must be greater than zero",
        ),
        ({"renew_deadline": 0.0, "retry_period": -1.0}, "renewDeadline must be greater than zero"),
        ({"retry_period": 0.0}, "retryPeriod must be greater than zero"),
        ({"callbacks": LeaderCallbacks(None, _stopped)}, "OnStartedLeading callback must not be nil"),
        ({"callbacks": LeaderCallbacks(_started, None)}, "OnStoppedLeading callback must not be nil"),
        ({"lock": None}, "Lock must not be nil."),
        ({"lock": FakeLock(LockStore(), "")}, "Lock identity is empty"),
    ],
)
def test_invalid_settings_are_rejected(changes: dict[str, object], message: str) -> None:
    cfg = config(**changes)
    with pytest.raises(LeaderElectionConfigError, match=f"^{message}$".replace("*", r"\*")):
        cfg.validate()
    with pytest.raises(LeaderElectionConfigError):
        LeaderElector(cfg)


def test_renew_deadline_just_above_jittered_retry_period_is_valid() -> None:
    config(renew_deadline=2.41, lease_duration=2.5).validate()
    config(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1).validate()


def test_settings_and_callbacks_cannot_change_once_built() -> None:
    """An elector keeps its config: it must not change under a running election."""
    settings = config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.lease_duration = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        CALLBACKS.on_new_leader = print  # type: ignore[misc]


def test_the_watchdog_attached_is_not_part_of_the_settings() -> None:
    from mcm.runtime.leaderelection import HealthzAdaptor

    lock = FakeLock(LockStore(), "me")
    watched = config(lock=lock, watchdog=HealthzAdaptor(20.0))
    assert watched == config(lock=lock) == config(lock=lock, watchdog=HealthzAdaptor(5.0))

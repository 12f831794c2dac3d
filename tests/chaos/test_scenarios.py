"""The chaos scenarios' composition: what the short profile's sweep runs."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from mcm.testing.chaos import scenarios


def _recording(name: str, ran: list[str]) -> scenarios.Program:
    def program(h: Any, rng: random.Random, seconds: float) -> None:
        ran.append(name)

    program.__name__ = name
    return program


@pytest.mark.parametrize("sidecars", [[], ["sidecar-0"]])
def test_the_sweep_runs_every_program_of_the_mix_once_but_failover(
    monkeypatch: pytest.MonkeyPatch, sidecars: list[str]
) -> None:
    ran: list[str] = []
    stubs = [_recording(f"p{i}", ran) for i in range(6)]
    kills = _recording("sidecar_kills", ran)
    monkeypatch.setattr(scenarios, "sidecar_kills", kills)
    monkeypatch.setattr(
        scenarios, "MIXABLE", (*stubs, kills, scenarios.leader_failover, scenarios.leader_pause)
    )
    harness = SimpleNamespace(sidecars=sidecars, note=lambda *args, **kwargs: None)

    scenarios.sweep(harness, random.Random(3), 0.3)  # type: ignore[arg-type]

    expected = [f"p{i}" for i in range(6)] + (["sidecar_kills"] if sidecars else [])
    assert sorted(ran) == sorted(expected)


def test_the_short_profile_is_the_sweep_then_failover_then_a_pause_then_the_manager() -> None:
    plan = scenarios.short_plan()
    assert [s.name for s, _ in plan] == ["sweep", "leader-failover", "leader-pause", "manager-mix"]
    assert sum(seconds for _, seconds in plan) <= 30
    assert scenarios.by_name("sweep") is scenarios.SWEEP


def test_the_manager_scenarios_are_in_the_long_profile_and_out_of_the_mix() -> None:
    names = [s.name for s in scenarios.SCENARIOS]
    assert {"manager-kill", "manager-api-faults", "manager-mix"} <= set(names)
    assert not any(p.__module__.endswith(".pool") for p in scenarios.MIXABLE)  # each brings its own pool

"""The drain's rules as tables (upstream v0.47.0 ``pkg/util/provider/drain/drain.go``, with HEAD's
changes): what a drain hands back, the PDB and eviction paths, the waits for terminating pods
and for volumes. Fake cluster and FakeClock (tests/drain/fakes.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mcm.drain import DrainOptions, DrainResult
from mcm.drain.types import PodOutcome
from mcm.drain.volumes import TrackedVolume
from tests.drain.fakes import listers


@pytest.mark.parametrize(
    ("value", "field_name"),
    [
        (DrainOptions(), "timeout"),
        (listers(), "pods"),
        (PodOutcome("default", "p", "evicted"), "action"),
        (DrainResult(node="n", duration=0.0), "node"),
        (TrackedVolume("pv", "vol"), "pv_name"),
    ],
    ids=["DrainOptions", "DrainListers", "PodOutcome", "DrainResult", "TrackedVolume"],
)
def test_the_drains_values_are_immutable_and_hashable(value: Any, field_name: str) -> None:
    """Options, listers and results are shared between the drain's threads and handed to
    callers: none of them can be changed after it is built, and each can be a dict key."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field_name, None)
    assert hash(value) == hash(dataclasses.replace(value))

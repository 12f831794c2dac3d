"""The chaos suite's short profile, run by CI (about a minute and a half): every fault program
once, overlapping, then leader failovers, against the real ``machine-controller``, then a
MachineDeployment rolled out under ``machine-controller-manager``'s faults; every invariant must
hold.

The seed is new on every run and printed; replay a failure with ``MCM_CHAOS_SEED=<seed>``
(here) or ``hack/chaos.sh --seed <seed>`` (the long profile). ``docs/reliability.md`` describes
the scenarios and the invariants.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from mcm.runtime import logs
from mcm.testing.chaos.run import run_profile
from mcm.testing.chaos.scenarios import short_plan

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


@pytest.fixture
def harness_log(tmp_path: Path) -> Iterator[Path]:
    """This process's log lines (kubelets, emulators) go to a file for the test's duration."""
    path = tmp_path / "harness.log"
    saved = structlog.get_config()
    with path.open("a", encoding="utf-8") as stream:
        logs.configure("json", stream=stream)
        try:
            yield path
        finally:
            structlog.configure(**saved)


@pytest.mark.timeout(300)
def test_every_invariant_holds_under_every_fault(tmp_path: Path, harness_log: Path) -> None:
    seed = int(os.environ.get("MCM_CHAOS_SEED") or random.SystemRandom().randrange(2**31))
    report = run_profile(tmp_path, seed, short_plan(), replicas=3, log=print)
    print(report.table())
    assert report.ok, f"\n{report.table()}\n{report.failures()}\n{report.summary()}"

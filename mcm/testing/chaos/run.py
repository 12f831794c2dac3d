"""Running scenarios and reporting: what ``hack/chaos.sh`` and the CI profile call.

:func:`run_profile` starts one :class:`~mcm.testing.chaos.harness.Harness`, runs the given
scenarios in order (each: controllers up with the scenario's settings, world converged, the
fault program for the fault phase with owner churn, faults cleared, convergence within the
scenario's bound, baseline check), then checks the event-based invariants over the whole run
and attributes every violation to the scenario run during which it happened.

:class:`Report` renders the scenario x invariant table and, for each violation, the seed, the
scenario, the invariant and the machine's history.
"""

from __future__ import annotations

import random
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcm.testing.chaos.harness import Harness
from mcm.testing.chaos.invariants import INVARIANTS, Violation, check_all, measure_baseline
from mcm.testing.chaos.scenarios import Scenario

__all__ = ["Report", "ScenarioRun", "run_profile"]

SETTLE_BOUND = 90.0
"""Seconds the world may take to converge before a scenario's faults start."""
BASELINE_BOUND = 45.0
THREAD_SLACK = 4
"""Threads a settled controller may have above its first settled count (HTTP handlers, probes)."""


@dataclass
class ScenarioRun:
    """One run of one scenario: when, and what it did."""

    scenario: str
    index: int
    start: float
    end: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent settling, injecting faults, converging and back to baseline."""


@dataclass
class Report:
    """The outcome of a profile."""

    seed: int
    runs: list[ScenarioRun]
    violations: list[tuple[str, Violation]]
    histories: dict[str, list[str]]
    elapsed: float
    errors: list[str] = field(default_factory=list)
    """Scenario runs the harness itself failed in (with the traceback): they fail the report."""

    @property
    def ok(self) -> bool:
        return not self.violations and not self.errors

    def table(self) -> str:
        """Scenario x invariant: ``ok`` or the number of violations; plus runs and activity."""
        names = [n for n, _ in INVARIANTS]
        by_cell: dict[tuple[str, str], int] = defaultdict(int)
        for scenario, violation in self.violations:
            by_cell[(scenario, violation.invariant)] += 1
        scenarios: dict[str, list[ScenarioRun]] = defaultdict(list)
        for run in self.runs:
            scenarios[run.scenario].append(run)
        header = ["scenario", "runs", "creates", "deletes", "kills", *names]
        rows = [header]
        for scenario, runs in scenarios.items():
            total: dict[str, int] = defaultdict(int)
            for run in runs:
                for key, value in run.counts.items():
                    total[key] += value
            cells = [str(by_cell[(scenario, n)]) if by_cell[(scenario, n)] else "ok" for n in names]
            rows.append(
                [
                    scenario,
                    str(len(runs)),
                    str(total["creates"]),
                    str(total["deletes"]),
                    str(total["kills"]),
                    *cells,
                ]
            )
        outside = [v for s, v in self.violations if s not in scenarios]
        if outside:
            rows.append(
                [
                    "(between)",
                    "-",
                    "-",
                    "-",
                    "-",
                    *[str(sum(1 for v in outside if v.invariant == n)) or "ok" for n in names],
                ]
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = [
            "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"
            for row in rows
        ]
        lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(lines)

    def failures(self) -> str:
        """Every violation with seed, scenario, invariant and the machine's history."""
        parts = [f"HARNESS ERROR seed={self.seed} {error}" for error in self.errors]
        for scenario, violation in self.violations:
            parts.append(
                f"VIOLATION seed={self.seed} scenario={scenario} invariant={violation.invariant} "
                f"key={violation.key}\n  {violation.message}"
            )
            history = self.histories.get(violation.key)
            if history:
                parts.append("  history of " + violation.key + ":\n    " + "\n    ".join(history))
        return "\n".join(parts)

    def summary(self) -> str:
        verdict = "all invariants held" if self.ok else f"{len(self.violations)} violation(s)"
        if self.errors:
            verdict += f", {len(self.errors)} harness error(s)"
        return (
            f"chaos: seed={self.seed} scenarios={len(self.runs)} elapsed={self.elapsed:.0f}s: {verdict}\n"
            f"replay: hack/chaos.sh --seed {self.seed} ..."
        )


def _counts(h: Harness, start: float, end: float) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for event in h.tracker.events():
        if not start <= event.t <= end:
            continue
        if event.source == "vm":
            counts["creates" if event.kind == "created" else "deletes"] += 1
        elif event.source == "process" and event.kind in ("SIGKILL", "SIGTERM", "SIGSTOP"):
            counts["kills"] += 1
        elif event.source == "fault":
            counts["faults"] += 1
    return dict(counts)


def run_scenario(
    h: Harness, scenario: Scenario, index: int, rng: random.Random, duration: float
) -> ScenarioRun:
    """One scenario run; see the module docstring."""
    run = ScenarioRun(scenario.name, index, time.monotonic())
    h.tracker.record("scenario", "start", scenario.name, index=index, seed_state=rng.random())
    h.apply(scenario.settings)
    h.converge(SETTLE_BOUND, f"{scenario.name} (settling)")
    threads = _baseline(h, scenario)
    faults = time.monotonic()
    h.world.owner.churn = scenario.churn
    try:
        scenario.program(h, rng, duration)
    finally:
        h.world.owner.churn = 0.0
        h.clear_faults()
    h.ensure_running()
    cleared = time.monotonic()
    h.converge(scenario.bound, scenario.name)
    converged = time.monotonic()
    if threads:
        h.check_baseline(threads, BASELINE_BOUND, THREAD_SLACK)
    run.end = time.monotonic()
    run.timings = {
        "settle": faults - run.start,
        "faults": cleared - faults,
        "converge": converged - cleared,
        "baseline": run.end - converged,
    }
    h.tracker.record(
        "scenario",
        "end",
        scenario.name,
        index=index,
        timings={k: round(v, 1) for k, v in run.timings.items()},
    )
    run.counts = _counts(h, run.start, run.end)
    return run


def _baseline(h: Harness, scenario: Scenario) -> int:
    """The settled leader's thread count (ready, queue empty), measured once per settings per
    harness. No such leader within :data:`BASELINE_BOUND` is a ``baseline`` violation (and 0: no
    later check)."""
    if scenario.settings not in h.baselines:
        threads = measure_baseline(h.settled_sample, BASELINE_BOUND)
        if threads is None:
            message = f"after {BASELINE_BOUND:g}s: no leader reported its threads to take the baseline from"
            h.violations.append(Violation("baseline", time.monotonic(), "controller", message))
            return 0
        h.baselines[scenario.settings] = threads
        h.tracker.record("check", "baseline", scenario.name, threads=threads)
    return h.baselines[scenario.settings]


def run_profile(
    directory: Path,
    seed: int,
    plan: Callable[[random.Random], Sequence[tuple[Scenario, float]]] | Sequence[tuple[Scenario, float]],
    *,
    replicas: int = 4,
    deadline: float | None = None,
    log: Callable[[str], None] = print,
) -> Report:
    """Run ``plan`` (scenario, fault-phase seconds) pairs, or a function giving them from the
    seeded generator, and report. ``deadline`` (monotonic) stops starting new scenarios."""
    started = time.monotonic()
    rng = random.Random(seed)
    log(f"chaos: seed={seed} (replay with --seed {seed})")
    h = Harness(directory, seed)
    h.world.owner.replicas = replicas
    runs: list[ScenarioRun] = []
    errors: list[str] = []
    try:
        steps = plan(rng) if callable(plan) else plan
        for index, (scenario, duration) in enumerate(steps):
            if deadline is not None and time.monotonic() > deadline:
                break
            at = time.monotonic() - started
            log(f"chaos: {at:6.0f}s [{index}] {scenario.name} for {duration:g}s: {scenario.summary}")
            scenario_rng = random.Random(rng.random())
            try:
                run = run_scenario(h, scenario, index, scenario_rng, duration)
            except Exception:  # a bug of the harness: reported, and the run goes on
                errors.append(f"scenario={scenario.name} index={index}:\n{traceback.format_exc()}")
                log(f"chaos:        harness error: {errors[-1]}")
                h.clear_faults()
                continue
            runs.append(run)
            log("chaos:        " + ", ".join(f"{k} {v:.0f}s" for k, v in run.timings.items()))
        h.stop_processes()
        report = _report(h, seed, runs, time.monotonic() - started)
        report.errors = errors
        return report
    finally:
        h.close()


def _report(h: Harness, seed: int, runs: list[ScenarioRun], elapsed: float) -> Report:
    events = h.tracker.events()
    violations = [*h.violations, *check_all(events, h.deaths, time.monotonic())]
    attributed = [(_scenario_at(runs, v.t), v) for v in sorted(violations, key=lambda v: v.t)]
    processes = {p.name: p for p in h.controllers + h.sidecars}
    histories = {}
    for _, violation in attributed:
        if violation.key in histories:
            continue
        process = processes.get(violation.key)
        if process is not None:
            tail = [line[:300] for line in process.log_tail(15)]
            histories[violation.key] = [f"{process.log_path}:", *tail]
        else:
            histories[violation.key] = h.tracker.history(violation.key, violation.uid)
    return Report(seed, runs, attributed, histories, elapsed)


def _scenario_at(runs: Sequence[ScenarioRun], t: float) -> str:
    for run in runs:
        if run.start <= t <= (run.end or float("inf")):
            return run.scenario
    return "(between)"

"""``python -m mcm.testing.chaos``: run chaos scenarios against the real ``machine-controller``.

Every single-fault scenario once, then mixed runs until ``--minutes`` are up (at least one of
each). ``--scenario`` restricts the run to named scenarios (repeatable); ``--seed`` replays a
run (the seed is printed first); ``--short`` runs the CI profile instead (every scenario with a
short fault phase; ``--minutes`` is ignored). Exits 1 when any invariant was violated, after
printing the scenario x invariant table and each violation with the machine's history.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mcm.runtime import logs
from mcm.testing.chaos.run import run_profile
from mcm.testing.chaos.scenarios import SCENARIOS, Scenario, by_name, short_plan


def long_plan(minutes: float, names: Sequence[str], phase: float) -> list[tuple[Scenario, float]]:
    """Each chosen single-fault scenario once, then ``mixed`` repeated until ``minutes`` are up
    (the caller's deadline stops the plan)."""
    chosen = [by_name(n) for n in names] if names else list(SCENARIOS)
    singles = [s for s in chosen if s.name != "mixed"]
    plan = [(s, phase) for s in singles]
    if names and "mixed" not in names:
        return plan
    mixed = by_name("mixed")
    rounds = max(1, int(minutes * 60 // (3 * phase)))  # more than fit: the deadline ends the run
    return plan + [(mixed, 3 * phase)] * rounds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcm.testing.chaos", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="replay this seed (default: random)")
    parser.add_argument("--scenario", action="append", default=[], help="run only this scenario (repeatable)")
    parser.add_argument("--phase", type=float, default=10.0, help="fault phase of one scenario, seconds")
    parser.add_argument("--replicas", type=int, default=4, help="Machines the owner keeps")
    parser.add_argument("--dir", type=Path, default=None, help="keep logs and files here")
    parser.add_argument("--short", action="store_true", help="the CI profile (every scenario, short phases)")
    args = parser.parse_args(argv)
    # SIGTERM (hack/test.sh ending early) unwinds like Ctrl-C, so the controllers, sidecars and
    # emulators this run started are stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="mcm-chaos-"))
    plan = short_plan() if args.short else long_plan(args.minutes, args.scenario, args.phase)
    deadline = None if args.short else time.monotonic() + args.minutes * 60
    directory.mkdir(parents=True, exist_ok=True)
    logs.configure("json", stream=open(directory / "harness.log", "a", encoding="utf-8"))  # noqa: SIM115
    print(f"chaos: files in {directory} (harness.log, controller-*.log, sidecar-*.log)", flush=True)
    report = run_profile(
        directory,
        seed,
        plan,
        replicas=args.replicas,
        deadline=deadline,
        log=lambda line: print(line, flush=True),
    )
    print(report.table())
    if not report.ok:
        print(report.failures())
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""mcm's cost curve from 100 to 20,000 machines: ``benchmarks/scale.py [--smoke] [--plot PNG]``.

For each client setting (Gardener's production ``--kube-api-qps=100 --kube-api-burst=200``, and
the limit off) and each N in ``--machines`` (default 100, 1,000, 2,000, 5,000, 10,000, 20,000;
``--production-up-to`` keeps the production setting to the smaller ones), on fresh emulator
processes with the node simulator of ``_scenario.py``, ``machine-controller --driver=fake`` runs in
its own process with ``--min-resync-period=1m``:

1. N machines created at once; seconds until all are Running, and the CPU seconds every process
   of the scenario (controller, both emulators, node simulator, the benchmark's observer) used
   meanwhile: their sum over the machine's cores is the floor under that time;
2. steady state (the first setting only, or every one with ``--steady-all``): ``--steady``
   seconds (default 120, so at least one informer resync falls inside) with all machines
   Running: the controller's CPU % of one core and its RSS at the end;
3. all deleted at once; seconds until all are gone.

Per N: those figures, the controller's requests and CPU seconds per machine over phases 1 and 3,
and its peak RSS. Then, per figure, a least-squares fit ``a + b·N`` and the exponent ``k`` of
``N^k`` (log-log slope: 1 is linear, below 1 better than linear). ``--plot`` draws the curves
into a PNG (matplotlib, from the ``bench`` extra); ``--tracemalloc FILE`` lists what the
controller's heap holds per machine. The targets: every figure linear in N or better (k ≤ 1.15
allows for noise); with the limit off 5,000 (issue 25) and 20,000 machines (issue 39) all Running
within 3 minutes; in steady state ≤ 5 % of one core and ≤ 256 MiB RSS at 2,000 machines, ≤ 400 MiB
at 20,000.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scenario import (
    LIMIT_OFF,
    REPO,
    ControllerProcess,
    CpuMeter,
    Observer,
    bench_client,
    create_machines,
    delete_machines,
    free_port,
    install_class,
    machine_names,
    mcm_command,
    quiet,
    read_requests,
    start_node_simulator,
    tear_down,
    warm_up,
)

from mcm.emulator import ClusterPair

SETTINGS: dict[str, tuple[float, int]] = {"QPS 100/burst 200": (100.0, 200), "limit off": LIMIT_OFF}
LINEAR_SLACK = 1.15
"""The largest log-log exponent still counted as linear (two cores shared with other work)."""


@dataclass
class Point:
    """One N in one setting."""

    setting: str
    n: int
    running: int = 0
    to_running: float = math.nan
    to_gone: float = math.nan
    requests: float = math.nan
    cpu_per_machine: float = math.nan
    peak_rss: float = math.nan
    steady_cpu_pct: float = math.nan
    steady_rss: float = math.nan
    running_cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each process of the scenario used from the first creation to all Running."""


TRACEMALLOC_FRAMES = 12
"""Frames kept per allocation by ``--tracemalloc`` (enough to see which cache or queue holds it)."""


def snapshot_memory(process: ControllerProcess, out: Path) -> None:
    """Have the controller (started with :func:`tracemalloc_env`) write its snapshot to ``out``."""
    done = Path(f"{out}.done")
    done.unlink(missing_ok=True)
    process.proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 600
    while not done.exists() and time.monotonic() < deadline and process.alive():
        time.sleep(0.5)


def tracemalloc_env(out: Path) -> dict[str, str]:
    """The controller's environment for ``--tracemalloc``: tracing from the start, the snapshot
    hook of ``benchmarks/_tracemalloc/sitecustomize.py``."""
    hook = Path(__file__).resolve().parent / "_tracemalloc"
    return {
        "PYTHONTRACEMALLOC": str(TRACEMALLOC_FRAMES),
        "PYTHONPATH": f"{hook}:{REPO}",
        "MCM_TRACEMALLOC_OUT": str(out),
        "MCM_TRACEMALLOC_HOLDERS": os.environ.get("MCM_TRACEMALLOC_HOLDERS", ""),
    }


def _frame(frame: Any) -> str:
    name = re.sub(r".*/(site-packages|lib/python3\.\d+)/", "", str(frame.filename))
    return f"{name.removeprefix(f'{REPO}/')}:{frame.lineno}"


def summarize_snapshot(path: Path, n: int, top: int = 20) -> None:
    """What the controller's heap holds per machine: the largest allocation sites, each with the
    stack that allocated most of it (most recent frame first, up to the worker or reflector)."""
    import tracemalloc

    snapshot = tracemalloc.Snapshot.load(str(path))
    total = sum(stat.size for stat in snapshot.statistics("filename"))
    print(
        f"\ntraced heap: {total / 2**20:.1f} MiB, {total / max(n, 1) / 1024:.2f} KiB per machine (N={n:,})\n"
    )
    print("| KiB per machine | blocks per machine | allocated at | by (largest stack) |")
    print("|---|---|---|---|")
    stacks = snapshot.statistics("traceback")
    for stat in snapshot.statistics("lineno")[:top]:
        site = stat.traceback[-1]
        biggest = next((s for s in stacks if s.traceback[-1] == site), None)
        frames = [] if biggest is None else [_frame(f) for f in reversed(biggest.traceback)][1:6]
        print(
            f"| {stat.size / n / 1024:.2f} | {stat.count / n:.1f} | {_frame(site)} | {' ← '.join(frames)} |"
        )


def run_point(
    setting: str,
    n: int,
    steady: float,
    timeout: float,
    profile: Path | None = None,
    memory: Path | None = None,
) -> Point:
    qps, burst = SETTINGS[setting]
    point = Point(setting, n)
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        directory = Path(tmp)
        pair = ClusterPair.start(directory, in_process=False, request_logs=True)
        stop_sim = observer = process = None
        try:
            control, target = bench_client(pair.control_kubeconfig), bench_client(pair.target_kubeconfig)
            install_class(control)
            stop_sim = start_node_simulator(pair.control_kubeconfig, pair.target_kubeconfig)
            observer = Observer(control, target)
            observer.start()
            command = mcm_command(
                pair.control_kubeconfig,
                pair.target_kubeconfig,
                qps=qps,
                burst=burst,
                port=free_port(),
                extra=["--min-resync-period=1m"],
            )
            env = tracemalloc_env(memory) if memory is not None else None
            process = ControllerProcess(command, directory / "controller.log", env=env)
            control_log, target_log = (
                directory / "control.requests.jsonl",
                directory / "target.requests.jsonl",
            )
            if not warm_up(control, observer, 120, process.alive):
                print((directory / "controller.log").read_text(errors="replace")[-3000:])
                return point
            names = machine_names(n)
            since = time.time()
            profiler = process.profile(profile) if profile is not None else None
            meter = CpuMeter(
                {
                    "controller": process.proc.pid,
                    "control emulator": pair.processes[0].pid,
                    "target emulator": pair.processes[1].pid,
                    "node simulator": stop_sim.pid,
                }
            )
            meter.start()
            cpu0 = process.cpu_seconds()
            start = time.monotonic()
            create_machines(control, names, observer, None)
            observer.wait(lambda: observer.running >= n, timeout)
            point.running_cpu = meter.read()
            with observer.lock:
                point.running = observer.running
                done = max(line.at.get("running", math.nan) for line in observer.timelines.values())
            point.to_running = done - start if point.running == n else math.nan
            cpu_active = process.cpu_seconds() - cpu0
            if steady > 0:
                steady_from = time.time()
                cpu1 = process.cpu_seconds()
                time.sleep(steady)
                point.steady_cpu_pct = 100.0 * (process.cpu_seconds() - cpu1) / steady
                point.steady_rss = process.rss_mib()
                steady_requests = len(read_requests(control_log).controller(steady_from)) + len(
                    read_requests(target_log).controller(steady_from)
                )
            else:
                steady_from, steady_requests = math.inf, 0
            if memory is not None:
                snapshot_memory(process, memory)
            cpu2 = process.cpu_seconds()
            deleting = time.monotonic()
            delete_machines(control, names)
            observer.wait(lambda: all(name in observer.gone for name in names), timeout)
            with observer.lock:
                gone = [observer.gone[name] for name in names if name in observer.gone]
            point.to_gone = max(gone) - deleting if len(gone) == n else math.nan
            cpu_active += process.cpu_seconds() - cpu2
            point.cpu_per_machine = cpu_active / n
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(60)
            process.stop()
            point.peak_rss = process.peak_rss_mib
            sent = len(read_requests(control_log).controller(since)) + len(
                read_requests(target_log).controller(since)
            )
            point.requests = (sent - steady_requests) / n if steady_from != math.inf else sent / n
        finally:
            tear_down(process, observer, stop_sim, pair)
    return point


# --- fits -----------------------------------------------------------------------------------------

FIGURES: tuple[tuple[str, str, bool], ...] = (
    ("to_running", "s to all Running", False),
    ("to_gone", "s to all gone", False),
    ("requests", "requests per machine", True),
    ("cpu_per_machine", "CPU s per machine", True),
    ("peak_rss", "peak RSS", False),
    ("steady_cpu_pct", "steady CPU % of a core", False),
    ("steady_rss", "steady RSS", False),
)
"""Attribute, label, and whether it is per machine (linear in N means a per-machine figure stays
flat, k ≈ 0, and a total grows at most like N, k ≤ 1)."""


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares ``y = a + b·x``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else math.nan
    return my - b * mx, b


def exponent(xs: list[float], ys: list[float]) -> float:
    """The log-log slope of y against x (the ``k`` of ``y ∝ x^k``)."""
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pairs) < 2:
        return math.nan
    return linear_fit([p[0] for p in pairs], [p[1] for p in pairs])[1]


def _num(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def print_results(points: list[Point]) -> list[str]:
    """The table and the fits; returns the targets that are not met."""
    print(
        "\n| setting | N | to all Running (s) | to all gone (s) | requests / machine | CPU s / machine "
        "| peak RSS (MiB) | steady CPU % | steady RSS (MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p in points:
        cells = [p.setting, f"{p.n:,}"] + [_num(getattr(p, attr)) for attr, _, _ in FIGURES]
        print("| " + " | ".join(cells) + " |")
    unmet: list[str] = []
    print("\nfits against N (a + b·N; k of N^k, 1 = linear)\n")
    print("| setting | figure | a | b (per machine) | k |")
    print("|---|---|---|---|---|")
    for setting in SETTINGS:
        series = [p for p in points if p.setting == setting]
        for attr, label, per_machine in FIGURES:
            data = [(float(p.n), getattr(p, attr)) for p in series if not math.isnan(getattr(p, attr))]
            if len(data) < 2:
                continue
            xs, ys = [d[0] for d in data], [d[1] for d in data]
            a, b = linear_fit(xs, ys)
            k = exponent(xs, ys)
            print(f"| {setting} | {label} | {a:.4g} | {b:.4g} | {k:.2f} |")
            if not math.isnan(k) and k > LINEAR_SLACK - (1.0 if per_machine else 0.0):
                unmet.append(f"{setting}: {label} grows as N^{k:.2f}")
    return unmet


def print_cpu_split(points: list[Point]) -> None:
    """Who used the CPU until all machines were Running, and the floor that puts under the time:
    the scenario's CPU seconds over the machine's cores. A run whose time to Running is near
    its floor is limited by the CPU of all its processes, not by the controller's alone."""
    cores = os.cpu_count() or 1
    roles = list(dict.fromkeys(role for p in points for role in p.running_cpu))
    if not roles:
        return
    print(f"\nCPU seconds from the first creation to all Running, by process ({cores} cores)\n")
    print("| setting | N | " + " | ".join(roles) + " | all | floor (all / cores) | to all Running |")
    print("|---|---|" + "---|" * (len(roles) + 3))
    for p in points:
        total = sum(p.running_cpu.values())
        cells = [_num(p.running_cpu.get(role, math.nan)) for role in roles]
        print(
            f"| {p.setting} | {p.n:,} | " + " | ".join(cells) + f" | {_num(total)} | "
            f"{_num(total / cores)} s | {_num(p.to_running)} s |"
        )


STEADY_TARGETS = {2000: 256.0, 20000: 400.0}
"""N → the steady-state RSS bound in MiB (issue 25 at 2,000, issue 39 at 20,000); both ≤ 5 % of a core."""


def judge(points: list[Point], unmet: list[str]) -> None:
    for p in points:
        if p.setting == "limit off" and p.n in (5000, 20000) and not p.to_running <= 180:
            unmet.append(f"{p.n:,} machines to all Running took {_num(p.to_running)} s (target ≤ 180 s)")
        bound = STEADY_TARGETS.get(p.n)
        if bound is not None and not math.isnan(p.steady_rss):
            if p.steady_rss > bound:
                unmet.append(
                    f"{p.setting}: steady RSS with {p.n:,} machines {p.steady_rss:.0f} MiB (≤ {bound:.0f})"
                )
            if p.steady_cpu_pct > 5:
                unmet.append(f"{p.setting}: steady CPU with {p.n:,} machines {p.steady_cpu_pct:.1f} % (≤ 5)")


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    panels = [FIGURES[0], FIGURES[1], FIGURES[3], FIGURES[2], FIGURES[4], FIGURES[5]]
    for ax, (attr, label, _per_machine) in zip(axes.flat, panels, strict=True):
        for setting in SETTINGS:
            series = [p for p in points if p.setting == setting and not math.isnan(getattr(p, attr))]
            if series:
                ax.plot([p.n for p in series], [getattr(p, attr) for p in series], "o-", label=setting)
        ax.set_title(label)
        ax.set_xlabel("machines")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    axes.flat[0].legend()
    fig.suptitle("mcm machine controller: cost against the number of machines (one run, 2 shared cores)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    print(f"\nplot: {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machines", default="100,1000,2000,5000,10000,20000", help="comma-separated sizes")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated client settings")
    parser.add_argument("--steady", type=float, default=120.0, help="steady-state seconds (0: skip)")
    parser.add_argument("--steady-all", action="store_true", help="steady state in every setting")
    parser.add_argument(
        "--steady-from", type=int, default=0, help="steady state only at sizes of at least this N"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="N = 5, 10 with the limit off; 2 s of steady state"
    )
    parser.add_argument(
        "--production-up-to",
        type=int,
        help="run sizes above this only with the limit off (client-side throttling alone makes "
        "the production setting take minutes there)",
    )
    parser.add_argument("--plot", type=Path, help="write the curves to this PNG")
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        help="trace the controller's allocations (slow) and, with every machine Running (after the "
        "steady state), write a tracemalloc snapshot of the first point to this file and summarise it",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds each phase may take")
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy the controller through create, steady state and delete of the first point "
        "into this file (collapsed stacks; summarise with benchmarks/profile_summary.py)",
    )
    args = parser.parse_args()
    quiet()
    sizes = [5, 10] if args.smoke else [int(s) for s in args.machines.split(",")]
    settings = ["limit off"] if args.smoke else [s.strip() for s in args.settings.split(",")]
    steady = 2.0 if args.smoke else args.steady
    points: list[Point] = []
    for setting in settings:
        for n in sizes:
            if setting != "limit off" and args.production_up_to is not None and n > args.production_up_to:
                continue
            in_setting = args.steady_all or setting == settings[0]
            seconds = steady if in_setting and n >= args.steady_from else 0.0
            profile = args.profile if not points else None
            memory = args.tracemalloc if not points else None
            point = run_point(setting, n, seconds, args.timeout, profile, memory)
            if memory is not None and memory.exists():
                summarize_snapshot(memory, n)
            points.append(point)
            print(
                f"{setting}, N={n}: {point.running}/{n} Running in {_num(point.to_running)} s, "
                f"gone in {_num(point.to_gone)} s, {_num(point.requests)} requests and "
                f"{_num(point.cpu_per_machine)} CPU s per machine, peak RSS {_num(point.peak_rss)} MiB, "
                f"steady {_num(point.steady_cpu_pct)} % / {_num(point.steady_rss)} MiB",
                flush=True,
            )
    unmet = print_results(points)
    print_cpu_split(points)
    if not args.smoke:
        judge(points, unmet)
        print("\ntargets not met:" if unmet else "\nall targets met")
        for line in unmet:
            print(f"- {line}")
    if args.plot is not None:
        plot(points, args.plot)
    complete = all(p.running == p.n and not math.isnan(p.to_gone) for p in points)
    if not complete:
        print("\nsome machines did not reach Running or were not gone in time")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

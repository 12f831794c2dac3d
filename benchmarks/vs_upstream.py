"""mcm beside upstream's Go machine controller, in one run: ``benchmarks/vs_upstream.py [--smoke]``.

Both controllers run as processes of their own against the same scenario: a fresh pair of
emulator processes (control and target) per run, the node simulator of ``_scenario.py`` (a Ready
Node for every machine that has a providerID and a ``node`` label), client rate limits off
(``--kube-api-qps=1e6 --kube-api-burst=1000000``), no leader election, default workers. mcm runs
``machine-controller --driver=fake``; upstream runs the ``machine-controller`` that
``hack/upstream-mcm.sh`` builds from the Go module proxy (release v0.47.0 with an in-memory
driver that behaves like mcm's fake one: provider ID ``fake:///<machine>``, node name = machine name).

Runs: burst (N machines created at once) and paced (N created at ``--rate`` per second, twice by
default), each with Go first, then mcm. Each run: create all, wait until all are Running, delete
all, wait until all are gone. Figures per run: seconds to all Running and to all gone, each
machine's create→Running p50/p99, the controller's CPU seconds and peak RSS, its writes per
machine to the control cluster (Events and Leases aside) and to the target, 409 answers, Events;
and the per-stage latency breakdown. Absolute times depend on the shared machine; the ratios
within one run are the result.

Without Go (or with ``--no-build`` and no cached binary) it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scenario import (
    LIMIT_OFF,
    REPO,
    ControllerProcess,
    Observer,
    Requests,
    bench_client,
    create_machines,
    delete_machines,
    free_port,
    go_command,
    install_class,
    machine_names,
    mcm_command,
    percentile,
    quiet,
    read_requests,
    stage_breakdown,
    start_node_simulator,
    tear_down,
    warm_up,
)

from mcm.emulator import ClusterPair

BUILD_SCRIPT = REPO / "hack" / "upstream-mcm.sh"


@dataclass
class Run:
    """The figures of one controller in one scenario."""

    controller: str
    scenario: str
    n: int
    running: int = 0
    to_running: float = math.nan
    p50: float = math.nan
    p99: float = math.nan
    to_gone: float = math.nan
    gone: int = 0
    cpu: float = math.nan
    system_cpu: float = math.nan
    rss: float = math.nan
    control_writes: float = math.nan
    target_writes: float = math.nan
    conflicts: int = 0
    events: float = math.nan
    stages: dict[str, tuple[float, float]] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)


def upstream_binary(build: bool, label: str = "vs_upstream") -> Path | None:
    """The cached upstream machine controller (with its release's CRDs in ``crds/`` beside it and
    the release's manager, ``hack/upstream-mcm.sh --manager-path``, built with it), or None with
    the reason printed after ``label``. ``build``: build them when missing (minutes)."""
    located = subprocess.run([str(BUILD_SCRIPT), "--path"], check=False, capture_output=True, text=True)
    path = Path(located.stdout.strip())
    if path.is_file() and (path.parent / "crds").is_dir():
        return path
    if shutil.which("go") is None:
        print(f"{label}: skipped: Go is not installed, so upstream's machine controller cannot be built")
        return None
    if not build and not path.is_file():
        print(f"{label}: skipped: upstream's machine controller is not built yet ({path})")
        return None
    started = time.monotonic()
    done = subprocess.run([str(BUILD_SCRIPT)], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{label}: building upstream's binaries failed:\n{done.stderr[-3000:]}")
        return None
    if "built " in done.stderr:
        print(f"built upstream's binaries in {time.monotonic() - started:.0f} s: {path.parent}")
    return path


def run_scenario(
    controller: str, binary: Path, scenario: str, n: int, rate: float | None, timeout: float
) -> Run:
    """One controller through one scenario on fresh emulators."""
    result = Run(controller, scenario, n)
    with tempfile.TemporaryDirectory(prefix=f"vs-{controller}-") as tmp:
        directory = Path(tmp)
        crds = binary.parent / "crds" if controller == "Go" else None
        pair = ClusterPair.start(directory, in_process=False, request_logs=True, crds=crds)
        stop_sim = None
        observer = None
        process = None
        try:
            control, target = bench_client(pair.control_kubeconfig), bench_client(pair.target_kubeconfig)
            install_class(control)
            stop_sim = start_node_simulator(pair.control_kubeconfig, pair.target_kubeconfig)
            observer = Observer(control, target)
            observer.start()
            port = free_port()
            kubeconfigs = (pair.control_kubeconfig, pair.target_kubeconfig)
            qps, burst = LIMIT_OFF
            if controller == "Go":
                command = go_command(binary, *kubeconfigs, qps=qps, burst=burst, port=port)
            else:
                command = mcm_command(*kubeconfigs, qps=qps, burst=burst, port=port)
            process = ControllerProcess(command, directory / "controller.log")
            control_log, target_log = (
                directory / "control.requests.jsonl",
                directory / "target.requests.jsonl",
            )
            if not warm_up(control, observer, 120, process.alive):
                print(f"{controller}: the warm-up machine did not get Running; the controller's log:")
                print((directory / "controller.log").read_text(errors="replace")[-3000:])
                return result
            names = machine_names(n)
            since = time.time()
            create_machines(control, names, observer, rate)
            observer.wait(lambda: observer.running >= n, timeout)
            measure_running(result, observer, names)
            deleting = time.monotonic()
            delete_machines(control, names)
            observer.wait(lambda: all(name in observer.gone for name in names), timeout)
            with observer.lock:
                gone = [observer.gone[name] for name in names if name in observer.gone]
            result.gone = len(gone)
            result.to_gone = (max(gone) - deleting) if len(gone) == n else math.nan
            time.sleep(0.5)
            process.stop()
            result.cpu, result.system_cpu, result.rss = process.cpu, process.system_cpu, process.peak_rss_mib
            count_requests(result, read_requests(control_log), read_requests(target_log), since)
        finally:
            tear_down(process, observer, stop_sim, pair)
    return result


def measure_running(result: Run, observer: Observer, names: list[str]) -> None:
    with observer.lock:
        lines = [observer.timelines[name] for name in names if name in observer.timelines]
        per_machine = [s for s in (line.span(("created",), "running") for line in lines) if s is not None]
        first = min((line.at["created"] for line in lines if "created" in line.at), default=math.nan)
        last = max((line.at["running"] for line in lines if "running" in line.at), default=math.nan)
        result.running = len(per_machine)
        result.stages = stage_breakdown(lines)
    result.to_running = last - first if result.running == result.n else math.nan
    result.p50, result.p99 = percentile(per_machine, 0.5), percentile(per_machine, 0.99)


def count_requests(result: Run, control: Requests, target: Requests, since: float) -> None:
    n = result.n
    result.control_writes = len(control.writes(since)) / n
    result.target_writes = len(target.writes(since)) / n
    result.conflicts = sum(1 for e in control.writes(since) if e["code"] == 409)
    events = [
        e for e in control.controller(since) if e["path"].endswith("/events") or "/events/" in e["path"]
    ]
    result.events = len([e for e in events if e["verb"] in ("create", "patch")]) / n
    counts = control.by_verb_resource(since) + target.by_verb_resource(since)
    result.requests = dict(sorted(counts.items()))


# --- the table ----------------------------------------------------------------------------------


def _ratio(mcm: float, go: float) -> float:
    return mcm / go if go and not math.isnan(go) and not math.isnan(mcm) else math.nan


def _num(value: float, digits: int = 1) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:,.{digits}f}"


def _ms(seconds: float) -> str:
    return _num(seconds * 1000.0, 0)


def _x(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}x"


@dataclass
class Row:
    figure: str
    go: str
    mcm: str
    ratio: str
    target: str = ""
    met: bool | None = None


class Table:
    def __init__(self, judged: bool) -> None:
        self.rows: list[Row] = []
        self.judged = judged

    def add(
        self, figure: str, go: str, mcm: str, ratio: str, target: str = "", met: bool | None = None
    ) -> None:
        self.rows.append(Row(figure, go, mcm, ratio, target, met if self.judged else None))

    def print(self) -> int:
        print("| figure | Go | mcm | mcm / Go | target | met |")
        print("|---|---|---|---|---|---|")
        for row in self.rows:
            met = (
                "-"
                if not row.target
                else ("not judged" if row.met is None else ("yes" if row.met else "**no**"))
            )
            print(f"| {row.figure} | {row.go} | {row.mcm} | {row.ratio} | {row.target or '-'} | {met} |")
        return sum(1 for row in self.rows if row.target and row.met is False)


def _met(value: float, bound: float) -> bool:
    """``value`` ≤ ``bound`` as printed (two decimals), so 1.00x meets "≤ 1.0x"."""
    return not math.isnan(value) and round(value, 2) <= bound


def add_latency_rows(table: Table, go: Run, mcm: Run, paced: bool) -> None:
    label = f"{mcm.scenario}: to all Running"
    ratio = _ratio(mcm.to_running, go.to_running)
    table.add(
        label, f"{_num(go.to_running)} s", f"{_num(mcm.to_running)} s", _x(ratio), "≤ 1.0x", _met(ratio, 1.0)
    )
    r50, r99 = _ratio(mcm.p50, go.p50), _ratio(mcm.p99, go.p99)
    unit, scale, digits = ("ms", 1000.0, 0) if paced else ("s", 1.0, 2)
    target = "p50 ≤ 3x, p99 ≤ 2x" if paced else "p99 ≤ 3x"
    met = (_met(r50, 3.0) and _met(r99, 2.0)) if paced else _met(r99, 3.0)
    table.add(
        f"{mcm.scenario}: create→Running p50 / p99",
        f"{_num(go.p50 * scale, digits)} / {_num(go.p99 * scale, digits)} {unit}",
        f"{_num(mcm.p50 * scale, digits)} / {_num(mcm.p99 * scale, digits)} {unit}",
        f"{_x(r50)} / {_x(r99)}",
        target,
        met,
    )


def print_table(pairs: list[tuple[Run, Run]], judged: bool) -> int:
    table = Table(judged)
    for go, mcm in pairs:
        add_latency_rows(table, go, mcm, paced=not mcm.scenario.startswith("burst"))

    def joined(runs: list[Run], attr: str, digits: int = 1) -> str:
        return " / ".join(_num(getattr(r, attr), digits) for r in runs)

    gos, mcms = [g for g, _ in pairs], [m for _, m in pairs]
    ratios = [_ratio(m.to_gone, g.to_gone) for g, m in pairs]
    table.add(
        "to all gone after deleting all (" + " / ".join(m.scenario for m in mcms) + ")",
        joined(gos, "to_gone") + " s",
        joined(mcms, "to_gone") + " s",
        " / ".join(_x(r) for r in ratios),
        "≤ 1.0x",
        all(_met(r, 1.0) for r in ratios),
    )
    cpu = [_ratio(m.cpu, g.cpu) for g, m in pairs]
    table.add(
        "controller CPU, whole run",
        joined(gos, "cpu") + " s",
        joined(mcms, "cpu") + " s",
        " / ".join(_x(r) for r in cpu),
        "≤ 1.3x",
        all(_met(r, 1.3) for r in cpu),
    )
    rss = [_ratio(m.rss, g.rss) for g, m in pairs]
    table.add(
        "peak RSS",
        joined(gos, "rss", 0) + " MiB",
        joined(mcms, "rss", 0) + " MiB",
        " / ".join(_x(r) for r in rss),
        "≤ 1.5x",
        all(_met(r, 1.5) for r in rss),
    )
    writes = [_ratio(m.control_writes, g.control_writes) for g, m in pairs]
    table.add(
        "control writes per machine (Events, Leases aside)",
        joined(gos, "control_writes"),
        joined(mcms, "control_writes"),
        " / ".join(_x(r) for r in writes),
        "≤ Go's",
        all(_met(r, 1.0) for r in writes),
    )
    table.add(
        "target writes per machine",
        joined(gos, "target_writes"),
        joined(mcms, "target_writes"),
        " / ".join(_x(_ratio(m.target_writes, g.target_writes)) for g, m in pairs),
        "≤ 9",
        all(_met(m.target_writes, 9.0) for m in mcms),
    )
    table.add(
        "409 answers to control writes",
        " / ".join(str(g.conflicts) for g in gos),
        " / ".join(str(m.conflicts) for m in mcms),
        "",
    )
    table.add("Events recorded per machine", joined(gos, "events"), joined(mcms, "events"), "")
    return table.print()


def print_stages(pairs: list[tuple[Run, Run]]) -> None:
    for go, mcm in pairs:
        print(f"\nper-stage latency, {mcm.scenario} (p50 / p99 ms over the machines that went through it)\n")
        print("| stage | Go | mcm |")
        print("|---|---|---|")
        for label, (m50, m99) in mcm.stages.items():
            g50, g99 = go.stages.get(label, (math.nan, math.nan))
            print(f"| {label} | {_ms(g50)} / {_ms(g99)} | {_ms(m50)} / {_ms(m99)} |")


def print_requests(pairs: list[tuple[Run, Run]]) -> None:
    for go, mcm in pairs:
        keys = sorted(set(go.requests) | set(mcm.requests))
        print(f"\ncontroller requests, {mcm.scenario} (verb resource[/sub] code: Go, mcm)\n")
        for key in keys:
            print(f"  {key}: {go.requests.get(key, 0)}, {mcm.requests.get(key, 0)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machines", type=int, default=1000, help="N (default 1000)")
    parser.add_argument("--rate", type=float, default=50.0, help="paced creations per second (default 50)")
    parser.add_argument("--paced-runs", type=int, default=2, help="paced runs (default 2)")
    parser.add_argument("--smoke", action="store_true", help="N=10, burst only; never builds")
    parser.add_argument("--no-build", action="store_true", help="never build; skip without a cached binary")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds each phase may take")
    parser.add_argument("--verbose", action="store_true", help="also print every request count")
    args = parser.parse_args()
    quiet()
    binary = upstream_binary(build=not (args.no_build or args.smoke))
    if binary is None:
        return 0
    n = 10 if args.smoke else args.machines
    scenarios: list[tuple[str, float | None]] = [("burst", None)]
    runs = 0 if args.smoke else args.paced_runs
    scenarios += [(f"paced {args.rate:g}/s run {i + 1}", args.rate) for i in range(runs)]
    pairs: list[tuple[Run, Run]] = []
    for scenario, rate in scenarios:
        go = run_scenario("Go", binary, scenario, n, rate, args.timeout)
        mcm = run_scenario("mcm", binary, scenario, n, rate, args.timeout)
        for run in (go, mcm):
            print(
                f"{run.controller} {scenario}: {run.running}/{n} Running in {_num(run.to_running)} s, "
                f"{run.gone}/{n} gone in {_num(run.to_gone)} s, "
                f"CPU {_num(run.cpu)} s ({_num(run.system_cpu)} s system), peak RSS {_num(run.rss, 0)} MiB",
                flush=True,
            )
        pairs.append((go, mcm))
    print(f"\nmcm beside upstream's machine controller ({binary.parent.name}), N={n}, client limits off\n")
    unmet = print_table(pairs, judged=not args.smoke)
    print_stages(pairs)
    if args.verbose:
        print_requests(pairs)
    complete = all(r.running == n and r.gone == n for pair in pairs for r in pair)
    if not complete:
        print("\nsome machines did not reach Running or were not gone in time")
        return 1
    print(f"\ntargets not met: {unmet}" if not args.smoke else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

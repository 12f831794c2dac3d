"""mcm beside upstream's Go machine controller, in one run: ``benchmarks/vs_upstream.py [--smoke]``.

Every controller runs as a process of its own against the same scenario: a fresh pair of
emulator processes (control and target) per run, the node simulator of ``_scenario.py`` (a Ready
Node for every machine that has a providerID and a ``node`` label), client rate limits off
(``--kube-api-qps=1e6 --kube-api-burst=1000000``), no leader election, default workers. The
controllers:

- ``Go``: the ``machine-controller`` that ``hack/upstream-mcm.sh`` builds from the Go module proxy
  (release v0.47.0 with an in-memory driver called in the worker goroutine: provider ID
  ``fake:///<machine>``, node name = machine name);
- ``mcm``: ``machine-controller --driver=fake``, the same kind of in-memory driver, called the way
  mcm calls every in-process driver (on the worker's thread, under the deadline watchdog);
- ``mcm-grpc``: the same controller with ``--driver-endpoint=unix://…``, the in-memory driver
  served by the gRPC sidecar (``python -m mcm.driver.grpc``) in a process of its own; its CPU and
  RSS are reported with and without the sidecar's.

Scenarios: burst (N machines created at once), paced (N created at ``--rate`` per second) and
a large burst (``--large`` machines, Go and mcm only unless ``--large-grpc``). Each scenario runs
in ``--passes`` passes (default 2) that alternate the order: pass 1 runs Go, mcm, mcm-grpc; pass 2
the reverse. The two controllers of a ratio never share the machine; a figure counts when it
holds in both orders. Each run: warm up, create all, wait until all are Running, delete all,
wait until all are gone. Figures per run: seconds to all Running and to all gone, each machine's
create→Running p50/p99, the controller's CPU seconds and peak RSS, its writes per machine to the
control cluster (Events and Leases aside) and to the target, 409 answers, Events, the emulators'
CPU seconds; and the per-stage latency breakdown. Absolute times depend on the shared machine;
the ratios within one run are the result.

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
from collections.abc import Callable
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
    own_cpu,
    percentile,
    process_cpu,
    quiet,
    read_requests,
    sidecar_command,
    stage_breakdown,
    start_node_simulator,
    tear_down,
    wait_for_line,
    warm_up,
)

from mcm.emulator import ClusterPair

BUILD_SCRIPT = REPO / "hack" / "upstream-mcm.sh"


CONTROLLERS = ("Go", "mcm", "mcm-grpc")
"""Pass 1's order; pass 2 runs them in reverse."""

TITLES = {
    "mcm": "mcm with the in-memory driver (`--driver=fake`)",
    "mcm-grpc": "mcm with the in-memory driver behind the gRPC sidecar (unix socket)",
}


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
    sidecar_cpu: float = 0.0
    sidecar_rss: float = 0.0
    emulator_cpu: float = math.nan
    bench_cpu: float = math.nan
    control_writes: float = math.nan
    target_writes: float = math.nan
    conflicts: int = 0
    events: float = math.nan
    stages: dict[str, tuple[float, float]] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def total_cpu(self) -> float:
        """The controller's CPU and its sidecar's."""
        return self.cpu + self.sidecar_cpu

    @property
    def total_rss(self) -> float:
        """The controller's peak RSS and its sidecar's."""
        return self.rss + self.sidecar_rss


@dataclass(frozen=True)
class Scenario:
    label: str
    n: int
    rate: float | None
    timeout: float
    controllers: tuple[str, ...]
    large: bool = False
    """The large burst: peak RSS is held to Go's (1.0x), not to 1.2x."""


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


def start_controller(
    controller: str, binary: Path, pair: ClusterPair, directory: Path
) -> tuple[ControllerProcess, ControllerProcess | None]:
    """The controller process (and the gRPC sidecar it talks to, for ``mcm-grpc``)."""
    port = free_port()
    kubeconfigs = (pair.control_kubeconfig, pair.target_kubeconfig)
    qps, burst = LIMIT_OFF
    if controller == "Go":
        return ControllerProcess(
            go_command(binary, *kubeconfigs, qps=qps, burst=burst, port=port), directory / "controller.log"
        ), None
    if controller == "mcm":
        return ControllerProcess(
            mcm_command(*kubeconfigs, qps=qps, burst=burst, port=port), directory / "controller.log"
        ), None
    socket = directory / "driver.sock"
    sidecar = ControllerProcess(sidecar_command(socket), directory / "sidecar.log")
    if not wait_for_line(directory / "sidecar.log", "serving", 60, sidecar.alive):
        print("mcm-grpc: the sidecar did not start:")
        print((directory / "sidecar.log").read_text(errors="replace")[-3000:])
    command = mcm_command(
        *kubeconfigs, qps=qps, burst=burst, port=port, driver=[f"--driver-endpoint=unix://{socket}"]
    )
    return ControllerProcess(command, directory / "controller.log"), sidecar


def run_scenario(controller: str, binary: Path, scenario: Scenario) -> Run:
    """One controller through one scenario on fresh emulators."""
    n, timeout = scenario.n, scenario.timeout
    result = Run(controller, scenario.label, n)
    with tempfile.TemporaryDirectory(prefix=f"vs-{controller}-") as tmp:
        directory = Path(tmp)
        crds = binary.parent / "crds" if controller == "Go" else None
        pair = ClusterPair.start(directory, in_process=False, request_logs=True, crds=crds)
        stop_sim: Callable[[], None] | None = None
        observer = process = sidecar = None
        try:
            control, target = bench_client(pair.control_kubeconfig), bench_client(pair.target_kubeconfig)
            install_class(control)
            stop_sim = start_node_simulator(pair.control_kubeconfig, pair.target_kubeconfig)
            observer = Observer(control, target)
            observer.start()
            process, sidecar = start_controller(controller, binary, pair, directory)
            if not warm_up(control, observer, 120, process.alive):
                print(f"{controller}: the warm-up machine did not get Running; the controller's log:")
                print((directory / "controller.log").read_text(errors="replace")[-3000:])
                return result
            names = machine_names(n)
            since = time.time()
            emulators = [p.pid for p in pair.processes]
            emulator_cpu0 = sum(process_cpu(pid) for pid in emulators)
            bench_cpu0 = own_cpu()
            create_machines(control, names, observer, scenario.rate)
            observer.wait(lambda: observer.running >= n, timeout)
            measure_running(result, observer, names)
            deleting = time.monotonic()
            delete_machines(control, names)
            observer.wait(lambda: all(name in observer.gone for name in names), timeout)
            with observer.lock:
                gone = [observer.gone[name] for name in names if name in observer.gone]
            result.gone = len(gone)
            result.to_gone = (max(gone) - deleting) if len(gone) == n else math.nan
            result.emulator_cpu = sum(process_cpu(pid) for pid in emulators) - emulator_cpu0
            result.bench_cpu = own_cpu() - bench_cpu0
            time.sleep(0.5)
            process.stop()
            result.cpu, result.system_cpu, result.rss = process.cpu, process.system_cpu, process.peak_rss_mib
            if sidecar is not None:
                sidecar.stop()
                result.sidecar_cpu, result.sidecar_rss = sidecar.cpu, sidecar.peak_rss_mib
            count_requests(
                result,
                read_requests(directory / "control.requests.jsonl"),
                read_requests(directory / "target.requests.jsonl"),
                since,
            )
        finally:
            tear_down(process, observer, stop_sim, pair)
            if sidecar is not None:
                sidecar.stop()
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


# --- the tables ---------------------------------------------------------------------------------


@dataclass
class Pass:
    """One scenario run once by each controller, in ``order``."""

    scenario: Scenario
    order: tuple[str, ...]
    runs: dict[str, Run]

    def first(self, a: str, b: str) -> str:
        """Which of ``a`` and ``b`` ran first in this pass."""
        return a if self.order.index(a) < self.order.index(b) else b


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


def _met(value: float, bound: float) -> bool:
    """``value`` ≤ ``bound`` as printed (two decimals), so 1.00x meets "≤ 1.0x"."""
    return not math.isnan(value) and round(value, 2) <= bound


@dataclass(frozen=True)
class Figure:
    """A row: its label, how to read it off a run, how to print it, and its target (a bound on
    the ratio mcm / Go; ``None``: not judged)."""

    label: str
    value: Callable[[Run], float]
    unit: str = ""
    scale: float = 1.0
    digits: int = 1
    bound: float | None = None
    ratio: bool = True


def figures(scenario: Scenario, variant: str) -> list[Figure]:
    """The rows of one scenario, with the targets of the production path (``mcm``)."""
    judged = variant == "mcm"
    paced = scenario.rate is not None
    unit, scale, digits = ("ms", 1000.0, 0) if paced else ("s", 1.0, 2)
    rows = [
        Figure("to all Running", lambda r: r.to_running, " s", bound=1.0 if judged else None),
        Figure(
            "create→Running p50",
            lambda r: r.p50,
            f" {unit}",
            scale,
            digits,
            1.0 if judged and paced else None,
        ),
        Figure(
            "create→Running p99",
            lambda r: r.p99,
            f" {unit}",
            scale,
            digits,
            1.0 if judged and paced else None,
        ),
        Figure("to all gone", lambda r: r.to_gone, " s", bound=1.0 if judged else None),
        Figure("controller CPU", lambda r: r.cpu, " s", bound=1.0 if judged else None),
        Figure(
            "controller peak RSS",
            lambda r: r.rss,
            " MiB",
            digits=0,
            bound=(1.0 if scenario.large else 1.2) if judged else None,
        ),
    ]
    if variant == "mcm-grpc":
        rows += [
            Figure("CPU with the sidecar's", lambda r: r.total_cpu, " s"),
            Figure("peak RSS with the sidecar's", lambda r: r.total_rss, " MiB", digits=0),
        ]
    rows += [
        Figure(
            "control writes per machine (Events, Leases aside)",
            lambda r: r.control_writes,
            bound=1.0 if judged else None,
        ),
        Figure("target writes per machine", lambda r: r.target_writes, bound=1.0 if judged else None),
        Figure("409 answers to control writes", lambda r: float(r.conflicts), digits=0, ratio=False),
        Figure("Events recorded per machine", lambda r: r.events, ratio=False),
        Figure("emulators' CPU (control + target)", lambda r: r.emulator_cpu, " s"),
    ]
    return rows


def print_table(passes: list[Pass], variant: str, judged: bool) -> int:
    """``variant`` beside Go, one row per scenario and figure, a ratio per pass; returns the
    number of targets not met (a target is met when it holds in every pass)."""
    print(f"\n### {TITLES[variant]} beside Go\n")
    orders = " / ".join(f"{p.first('Go', variant).replace(variant, 'mcm')} first" for p in passes[:2])
    print(f"Cells and ratios per pass ({orders}).\n")
    print("| scenario | figure | Go | mcm | mcm / Go | target | met |")
    print("|---|---|---|---|---|---|---|")
    unmet = 0
    for scenario in dict.fromkeys(p.scenario for p in passes):
        mine = [p for p in passes if p.scenario == scenario and variant in p.runs]
        if not mine:
            continue
        for figure in figures(scenario, variant):
            go = [figure.value(p.runs["Go"]) for p in mine]
            ours = [figure.value(p.runs[variant]) for p in mine]
            ratios = [_ratio(m, g) for m, g in zip(ours, go, strict=True)]
            cells = [
                " / ".join(_num(v * figure.scale, figure.digits) for v in vs) + figure.unit
                for vs in (go, ours)
            ]
            met = "-"
            target = "-"
            if figure.bound is not None:
                target = f"≤ {figure.bound:.1f}x"
                ok = all(_met(r, figure.bound) for r in ratios)
                met = "not judged" if not judged else ("yes" if ok else "**no**")
                unmet += judged and not ok
            print(
                f"| {scenario.label} | {figure.label} | {cells[0]} | {cells[1]} | "
                f"{' / '.join(_x(r) for r in ratios) if figure.ratio else '-'} | {target} | {met} |"
            )
    return unmet


def print_stages(passes: list[Pass]) -> None:
    seen: set[Scenario] = set()
    for p in passes:
        if p.scenario in seen:
            continue
        seen.add(p.scenario)
        names = [c for c in CONTROLLERS if c in p.runs]
        print(
            f"\nper-stage latency, {p.scenario.label}, pass 1 "
            "(p50 / p99 ms over the machines that went through it)\n"
        )
        print("| stage | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for label in p.runs[names[0]].stages:
            cells = [
                "{} / {}".format(*(_ms(v) for v in p.runs[c].stages.get(label, (math.nan, math.nan))))
                for c in names
            ]
            print(f"| {label} | " + " | ".join(cells) + " |")


def print_requests(passes: list[Pass]) -> None:
    for p in passes:
        names = [c for c in CONTROLLERS if c in p.runs]
        keys = sorted(set().union(*(p.runs[c].requests for c in names)))
        print(f"\ncontroller requests, {p.scenario.label}, order {', '.join(p.order)} ({', '.join(names)})\n")
        for key in keys:
            print(f"  {key}: " + ", ".join(str(p.runs[c].requests.get(key, 0)) for c in names))


def scenarios_from(args: argparse.Namespace, controllers: tuple[str, ...]) -> list[Scenario]:
    if args.smoke:  # one pass: every controller once
        return [Scenario("burst", 10, None, args.timeout, controllers)]
    result: list[Scenario] = []
    if args.machines > 0:
        result.append(Scenario("burst", args.machines, None, args.timeout, controllers))
    if args.rate > 0 and args.machines > 0:
        result.append(Scenario(f"paced {args.rate:g}/s", args.machines, args.rate, args.timeout, controllers))
    if args.large > 0:
        chosen = controllers if args.large_grpc else tuple(c for c in controllers if c != "mcm-grpc")
        result.append(
            Scenario(
                f"burst N={args.large:,}",
                args.large,
                None,
                max(args.timeout, args.large * 0.12),
                chosen,
                large=True,
            )
        )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--machines",
        type=int,
        default=1000,
        help="N of the burst and paced scenarios (default 1000; 0: only the large burst)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=50.0,
        help="paced creations per second (default 50; 0: no paced scenario)",
    )
    parser.add_argument(
        "--large", type=int, default=10_000, help="N of the large burst (default 10000; 0: none)"
    )
    parser.add_argument(
        "--large-grpc", action="store_true", help="run the large burst through the sidecar too"
    )
    parser.add_argument(
        "--passes", type=int, default=2, help="passes per scenario, alternating the order (default 2)"
    )
    parser.add_argument(
        "--controllers",
        default=",".join(CONTROLLERS),
        help="comma-separated, of Go,mcm,mcm-grpc (Go is always run)",
    )
    parser.add_argument("--smoke", action="store_true", help="N=10, burst only, one pass; never builds")
    parser.add_argument("--no-build", action="store_true", help="never build; skip without a cached binary")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds each phase may take")
    parser.add_argument("--verbose", action="store_true", help="also print every request count")
    args = parser.parse_args()
    quiet()
    binary = upstream_binary(build=not (args.no_build or args.smoke))
    if binary is None:
        return 0
    wanted = {c.strip() for c in args.controllers.split(",")} | {"Go"}
    controllers = tuple(c for c in CONTROLLERS if c in wanted)
    passes: list[Pass] = []
    for scenario in scenarios_from(args, controllers):
        for index in range(1 if args.smoke else args.passes):
            order = scenario.controllers if index % 2 == 0 else tuple(reversed(scenario.controllers))
            runs: dict[str, Run] = {}
            for controller in order:
                run = runs[controller] = run_scenario(controller, binary, scenario)
                print(
                    f"{scenario.label}, pass {index + 1}, {controller}: {run.running}/{run.n} Running in "
                    f"{_num(run.to_running)} s, {run.gone}/{run.n} gone in {_num(run.to_gone)} s, "
                    f"CPU {_num(run.cpu)} s ({_num(run.system_cpu)} s system), "
                    f"peak RSS {_num(run.rss, 0)} MiB, emulators {_num(run.emulator_cpu)} s",
                    flush=True,
                )
            passes.append(Pass(scenario, order, runs))
    sizes = ", ".join(f"{n:,}" for n in dict.fromkeys(p.scenario.n for p in passes))
    print(f"\nmcm beside upstream's machine controller ({binary.parent.name}), N={sizes}, client limits off")
    unmet = sum(
        print_table(passes, variant, judged=not args.smoke) for variant in controllers if variant != "Go"
    )
    print_stages(passes)
    if args.verbose:
        print_requests(passes)
    complete = all(r.running == r.n and r.gone == r.n for p in passes for r in p.runs.values())
    if not complete:
        print("\nsome machines did not reach Running or were not gone in time")
        return 1
    print(f"\ntargets not met: {unmet}" if not args.smoke else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

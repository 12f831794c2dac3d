"""mcm's manager and machine controller beside upstream's Go pair, in one run:
``benchmarks/manager.py [--smoke]``.

Each side runs two processes of its own: the manager (mcm's ``machine-controller-manager``;
upstream v0.47.0's, built by ``hack/upstream-mcm.sh``) and the machine controller (mcm's
``machine-controller --driver=fake``; upstream's with the in-memory driver of
``hack/upstream-mcm/main.go``), on a fresh pair of emulator processes with the release's CRDs,
the node simulator of ``_scenario.py`` (a Ready Node for every machine with a providerID and a
``node`` label), client rate limits off and no leader election, default workers. A warm-up
MachineDeployment of one machine is Running before anything is measured.

The scenario, for each size N (default 100 and 1,000): a MachineDeployment of N replicas until
all N are Running (``create``); a rolling update of all of them to another class with maxSurge
10% and maxUnavailable 0, until N are Running on the new class and the old ones are gone
(``roll-out``); scale to 0 until no machine is left (``scale to 0``). Figures: seconds per phase;
writes per machine in each phase (each phase moves N machines) to the control cluster and to
the target, by the manager and by the machine controller (told apart by their user agents;
Events and Leases aside), and over all three phases (judged: a phase's count alone depends on
when each side finishes its work); CPU seconds and peak RSS of each process over the whole
run. The two sides alternate which runs first (Go first for the first size, mcm first for the
next, ...). Absolute times depend on the machine; the ratios within one run are the result.

Diagnosis: ``--detail`` prints each manager's requests by verb and resource and each process's
CPU seconds per phase; ``--controllers go`` (or ``mcm``) runs both managers on the same machine
controller, which tells the managers apart from the controllers; ``--keep DIR`` keeps the
request and process logs; ``--profile FILE`` records mcm's manager with py-spy;
``--verbose`` prints every phase's writes by process, cluster, verb, resource and answer.

Without Go (or with ``--no-build`` and nothing built) it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scenario import (
    LIMIT_OFF,
    NS,
    ControllerProcess,
    Requests,
    bench_client,
    free_port,
    go_command,
    install_class,
    mcm_command,
    quiet,
    read_requests,
    request_label,
    start_node_simulator,
    tear_down,
)
from vs_upstream import BUILD_SCRIPT, _met, _num, _ratio, _x, upstream_binary

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINES
from mcm.emulator import ClusterPair
from mcm.runtime import objects as o
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import Conflict

POOL = "pool"
WARM_UP = "warm-up"
PHASES = ("create", "roll-out", "scale to 0")
MANAGER_AGENT = "machine-controller-manager"
"""Both managers' user agents name it (upstream's binary and client suffix; mcm's suffix)."""


@dataclass
class Phase:
    seconds: float = math.nan
    manager_writes: float = math.nan
    controller_writes: float = math.nan
    manager_target_writes: float = math.nan
    controller_target_writes: float = math.nan
    manager_conflicts: int = 0
    controller_conflicts: int = 0
    writes: Counter[str] = field(default_factory=Counter)
    """``process cluster verb resource code`` → count, for ``--verbose``."""
    manager_cpu: float = math.nan
    controller_cpu: float = math.nan


@dataclass
class Run:
    side: str
    n: int
    phases: dict[str, Phase] = field(default_factory=lambda: {p: Phase() for p in PHASES})
    manager_cpu: float = math.nan
    controller_cpu: float = math.nan
    manager_rss: float = math.nan
    controller_rss: float = math.nan
    complete: bool = False
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Phase → (start, end), wall-clock seconds (the request logs' clock)."""
    detail: dict[str, Counter[str]] = field(default_factory=dict)
    """Phase → the manager's requests by ``verb resource[/subresource] code`` (control and target)."""


# --- the table -----------------------------------------------------------------------------------


@dataclass
class Row:
    figure: str
    go: str
    mcm: str
    ratio: str
    target: str = ""
    met: bool | None = None


class Table:
    """Rows of figures beside each other; ``print`` returns how many judged targets were missed."""

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


# --- the objects ----------------------------------------------------------------------------------


def deployment(name: str, replicas: int, class_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name}},
                "spec": {"class": {"kind": "MachineClass", "name": class_name}},
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}},
        },
    }


def install_classes(control: ClusterClient) -> None:
    """``bench`` (with its Secret) and ``bench-b``, the class the roll-out goes to."""
    install_class(control)
    classes = control.resource(MACHINE_CLASSES)
    second = o.clone(classes.get("bench", namespace=NS))
    second["metadata"] = {k: v for k, v in second["metadata"].items() if k in ("namespace", "finalizers")}
    second["metadata"]["name"] = "bench-b"
    classes.create(second, namespace=NS)


def update_deployment(control: ClusterClient, change: Any) -> None:
    resource = control.resource(MACHINE_DEPLOYMENTS)
    for _ in range(50):
        body = o.clone(resource.get(POOL, namespace=NS))
        change(body)
        try:
            resource.update(body, namespace=NS)
            return
        except Conflict:
            continue
    raise RuntimeError("could not update the MachineDeployment")


class Pool:
    """The benchmark's own view of the Machines of one MachineDeployment (an informer)."""

    def __init__(self, control: ClusterClient) -> None:
        self.lock = threading.Lock()
        self._machines: dict[str, tuple[str, bool, str]] = {}
        self._stop = threading.Event()
        self._factory = SharedInformerFactory(control, NS)
        self._factory.informer_for(MACHINES).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self._seen, on_update=lambda _old, new: self._seen(new), on_delete=self._gone
            )
        )

    def start(self) -> None:
        self._factory.start(self._stop)
        self._factory.wait_for_cache_sync(self._stop, timeout=30)

    def stop(self) -> None:
        self._stop.set()

    def _seen(self, machine: Any) -> None:
        with self.lock:
            self._machines[o.name_of(machine)] = (
                o.label(machine, "pool") or "",
                o.text(machine, "status", "currentStatus", "phase") == c.PHASE_RUNNING
                and not o.deletion_timestamp(machine),
                o.text(machine, "spec", "class", "name"),
            )

    def _gone(self, machine: Any) -> None:
        with self.lock:
            self._machines.pop(o.name_of(getattr(machine, "obj", machine)), None)

    def counts(self, pool: str, class_name: str) -> tuple[int, int]:
        """(machines of ``pool``, of which Running on ``class_name``)."""
        with self.lock:
            mine = [m for m in self._machines.values() if m[0] == pool]
        return len(mine), sum(1 for _, running, klass in mine if running and klass == class_name)

    def wait(self, pool: str, total: int, running: int, class_name: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.counts(pool, class_name) == (total, running):
                return True
            time.sleep(0.05)
        return False


# --- the processes --------------------------------------------------------------------------------


def go_manager_command(binary: Path, control: Path, target: Path, port: int) -> list[str]:
    qps, burst = LIMIT_OFF
    return [
        str(binary),
        f"--control-kubeconfig={control}",
        f"--target-kubeconfig={target}",
        f"--namespace={NS}",
        "--leader-elect=false",
        f"--kube-api-qps={qps:g}",
        f"--kube-api-burst={burst}",
        f"--port={port}",
        "--address=127.0.0.1",
    ]


def mcm_manager_command(control: Path, target: Path, port: int) -> list[str]:
    """mcm's ``machine-controller-manager`` command."""
    qps, burst = LIMIT_OFF
    return [
        sys.executable,
        "-c",
        "import sys; from mcm.app.manager.cli import main; sys.exit(main())",
        f"--control-kubeconfig={control}",
        f"--target-kubeconfig={target}",
        f"--namespace={NS}",
        "--leader-elect=false",
        f"--kube-api-qps={qps:g}",
        f"--kube-api-burst={burst}",
        f"--port={port}",
    ]


def start_side(
    side: str, binaries: tuple[Path, Path], pair: Any, directory: Path, controllers: str = "own"
) -> tuple[Any, Any]:
    """(manager, controller) processes of ``side`` (``controllers``: see :class:`Settings`)."""
    control, target = pair.control_kubeconfig, pair.target_kubeconfig
    qps, burst = LIMIT_OFF
    if (side if controllers == "own" else controllers).lower() == "go":
        controller = go_command(binaries[0], control, target, qps=qps, burst=burst, port=free_port())
    else:
        controller = mcm_command(control, target, qps=qps, burst=burst, port=free_port())
    if side == "Go":
        manager = go_manager_command(binaries[1], control, target, free_port())
    else:
        manager = mcm_manager_command(control, target, free_port())
    return (
        ControllerProcess(manager, directory / "manager.log"),
        ControllerProcess(controller, directory / "controller.log"),
    )


# --- one side through the scenario ----------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """How each side runs (the command line's options)."""

    timeout: float = 900.0
    profile: Path | None = None
    """py-spy records mcm's manager into ``<profile>-<N>`` (warm-up's end to the last phase's end)."""
    keep: Path | None = None
    """The request and process logs of each run are copied to ``<keep>/<side>-<N>/``."""
    controllers: str = "own"
    """``own``: each manager on its own side's machine controller (the issue's scenario);
    ``go``/``mcm``: both managers on that machine controller (tells the managers apart)."""


def run_side(side: str, binaries: tuple[Path, Path], n: int, settings: Settings) -> Run:
    """One side through the scenario on fresh emulators (see :class:`Settings`)."""
    result = Run(side, n)
    with tempfile.TemporaryDirectory(prefix=f"manager-{side}-") as tmp:
        directory = Path(tmp)
        pair = ClusterPair.start(
            directory, in_process=False, request_logs=True, crds=binaries[0].parent / "crds"
        )
        stop_sim = pool = manager = controller = None
        try:
            control = bench_client(pair.control_kubeconfig)
            install_classes(control)
            stop_sim = start_node_simulator(pair.control_kubeconfig, pair.target_kubeconfig)
            pool = Pool(control)
            pool.start()
            manager, controller = start_side(side, binaries, pair, directory, settings.controllers)
            if not warm_up(control, pool, settings.timeout, lambda: manager.alive() and controller.alive()):
                print(f"{side}: the warm-up machine did not get Running; the logs:")
                for log in ("manager.log", "controller.log"):
                    print(f"--- {log}\n" + (directory / log).read_text(errors="replace")[-2000:])
                return result
            profile = settings.profile.with_name(f"{settings.profile.name}-{n}") if settings.profile else None
            profiler = manager.profile(profile) if profile is not None and side == "mcm" else None
            result.complete = run_phases(result, control, pool, settings.timeout, (manager, controller))
            time.sleep(0.5)
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(60)
            for process in (manager, controller):
                process.stop()
            result.manager_cpu, result.manager_rss = manager.cpu, manager.peak_rss_mib
            result.controller_cpu, result.controller_rss = controller.cpu, controller.peak_rss_mib
            count_writes(result, directory)
        finally:
            if manager is not None:
                manager.stop()
            tear_down(controller, pool, stop_sim, pair)
            if settings.keep is not None:
                shutil.copytree(directory, settings.keep / f"{side}-{n}", dirs_exist_ok=True)
    return result


def warm_up(control: ClusterClient, pool: Pool, timeout: float, alive: Any) -> bool:
    control.resource(MACHINE_DEPLOYMENTS).create(deployment(WARM_UP, 1, "bench"), namespace=NS)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        if pool.counts(WARM_UP, "bench") == (1, 1):
            return True
        time.sleep(0.05)
    return False


def run_phases(result: Run, control: ClusterClient, pool: Pool, timeout: float, processes: Any) -> bool:
    """The three phases; each one's wall time, span (for the request counts) and the CPU
    seconds of ``processes`` (manager, controller) during it."""
    n = result.n
    steps = (
        (
            "create",
            lambda: control.resource(MACHINE_DEPLOYMENTS).create(deployment(POOL, n, "bench"), namespace=NS),
            (n, n, "bench"),
        ),
        ("roll-out", lambda: update_deployment(control, _to_class_b), (n, n, "bench-b")),
        (
            "scale to 0",
            lambda: update_deployment(control, lambda d: d["spec"].update(replicas=0)),
            (0, 0, "bench-b"),
        ),
    )
    for name, act, (total, running, class_name) in steps:
        started, wall = time.monotonic(), time.time()
        cpu = [process.cpu_seconds() for process in processes]
        act()
        done = pool.wait(POOL, total, running, class_name, timeout)
        phase = result.phases[name]
        phase.seconds = time.monotonic() - started if done else math.nan
        result.spans[name] = (wall, time.time())
        phase.manager_cpu, phase.controller_cpu = (
            process.cpu_seconds() - before for process, before in zip(processes, cpu, strict=True)
        )
        print(f"  {result.side} N={n} {name}: {_num(result.phases[name].seconds)} s", flush=True)
        if not done:
            return False
    return True


def _to_class_b(body: dict[str, Any]) -> None:
    body["spec"]["template"]["spec"]["class"]["name"] = "bench-b"


def _is_manager(entry: dict[str, Any]) -> bool:
    return MANAGER_AGENT in entry.get("user_agent", "")


def count_writes(result: Run, directory: Path) -> None:
    control = read_requests(directory / "control.requests.jsonl")
    target = read_requests(directory / "target.requests.jsonl")
    for name, (start, end) in result.spans.items():
        writes = [e for e in control.writes(start) if e["time"] <= end]
        phase, n = result.phases[name], max(result.n, 1)
        phase.manager_writes = sum(1 for e in writes if _is_manager(e)) / n
        phase.controller_writes = sum(1 for e in writes if not _is_manager(e)) / n
        target_writes = [e for e in target.writes(start) if e["time"] <= end]
        phase.manager_target_writes = sum(1 for e in target_writes if _is_manager(e)) / n
        phase.controller_target_writes = sum(1 for e in target_writes if not _is_manager(e)) / n
        phase.manager_conflicts = sum(1 for e in writes if e["code"] == 409 and _is_manager(e))
        phase.controller_conflicts = sum(1 for e in writes if e["code"] == 409 and not _is_manager(e))
        for cluster, entries in (("control", writes), ("target", target.writes(start))):
            for e in entries:
                if e["time"] <= end:
                    process = "manager" if _is_manager(e) else "controller"
                    phase.writes[f"{process} {cluster}: {request_label(e)}"] += 1
        result.detail[name] = _manager_requests(control, start, end) + _manager_requests(target, start, end)


def print_writes(pairs: list[tuple[Run, Run]]) -> None:
    """Every phase's writes by process, cluster, verb, resource and answer (Go, mcm)."""
    for go, mcm in pairs:
        for name in PHASES:
            g, m = go.phases[name].writes, mcm.phases[name].writes
            print(f"\nwrites, N={go.n}, {name} (Go, mcm)\n")
            for key in sorted(set(g) | set(m)):
                print(f"  {key}: {g.get(key, 0)}, {m.get(key, 0)}")


def _manager_requests(requests: Requests, start: float, end: float) -> Counter[str]:
    mine = [e for e in requests.entries if _is_manager(e) and e["time"] <= end]
    return Requests(mine).by_verb_resource(start)


def print_detail(run: Run) -> None:
    """The manager's requests per phase (``--detail``)."""
    for name in PHASES:
        counts = run.detail.get(name, Counter())
        phase = run.phases[name]
        print(
            f"  {run.side} N={run.n} {name}: CPU seconds manager {_num(phase.manager_cpu)}, "
            f"controller {_num(phase.controller_cpu)}; manager requests "
            + ", ".join(f"{key}: {count}" for key, count in sorted(counts.items()))
        )


# --- the table ------------------------------------------------------------------------------------


def add_rows(table: Table, go: Run, mcm: Run) -> None:
    """The rows of one size: phases, each process's CPU and RSS, writes and conflicts."""
    label = f"N={go.n}"
    for name in PHASES:
        g, m = go.phases[name].seconds, mcm.phases[name].seconds
        ratio = _ratio(m, g)
        table.add(f"{label}: {name}", f"{_num(g)} s", f"{_num(m)} s", _x(ratio), "≤ 1.0x", _met(ratio, 1.0))
    for process in ("manager", "controller"):
        add_process_rows(table, label, process, go, mcm)
    for attr, what, judged in (
        ("manager_writes", "manager's control writes per machine", True),
        ("controller_writes", "controller's control writes per machine", True),
        ("manager_target_writes", "manager's target writes per machine", True),
        ("controller_target_writes", "controller's target writes per machine", True),
    ):
        add_per_phase_row(table, f"{label}: {what}", attr, go, mcm, judged)
    for process in ("manager", "controller"):
        table.add(
            f"{label}: 409 answers to the {process}'s control writes ({' / '.join(PHASES)})",
            " / ".join(str(getattr(go.phases[p], f"{process}_conflicts")) for p in PHASES),
            " / ".join(str(getattr(mcm.phases[p], f"{process}_conflicts")) for p in PHASES),
            "",
        )


def add_process_rows(table: Table, label: str, process: str, go: Run, mcm: Run) -> None:
    for figure, attr, unit, digits, bound in (
        ("CPU, whole run", "cpu", "s", 1, 1.3),
        ("peak RSS", "rss", "MiB", 0, 1.5),
    ):
        g, m = getattr(go, f"{process}_{attr}"), getattr(mcm, f"{process}_{attr}")
        ratio = _ratio(m, g)
        table.add(
            f"{label}: {process} {figure}",
            f"{_num(g, digits)} {unit}",
            f"{_num(m, digits)} {unit}",
            _x(ratio),
            f"≤ {bound}x",
            _met(ratio, bound),
        )


def add_per_phase_row(table: Table, figure: str, attr: str, go: Run, mcm: Run, judged: bool) -> None:
    """Writes per machine in each phase and over all three (``all``: what a machine costs from
    creation to deletion). Judged on ``all``: a phase ends when the benchmark sees its machines,
    while a manager may still finish that phase's work (a roll-out's last Node and status
    writes), which then lands in the next phase's count, so one phase alone depends on timing."""
    gv = [getattr(go.phases[p], attr) for p in PHASES]
    mv = [getattr(mcm.phases[p], attr) for p in PHASES]
    gv.append(math.fsum(gv))
    mv.append(math.fsum(mv))
    ratios = [_ratio(m, g) for m, g in zip(mv, gv, strict=True)]
    table.add(
        f"{figure} ({' / '.join(PHASES)} / all)",
        " / ".join(_num(v, 2) for v in gv),
        " / ".join(_num(v, 2) for v in mv),
        " / ".join(_x(r) for r in ratios),
        "all ≤ Go's" if judged else "",
        _at_most(mv[-1], gv[-1]) if judged else None,
    )


def _at_most(mcm: float, go: float) -> bool:
    """``mcm`` ≤ ``go`` as printed (two decimals; 0 against 0 holds)."""
    return not (math.isnan(mcm) or math.isnan(go)) and round(mcm, 2) <= round(go, 2)


def binaries(build: bool) -> tuple[Path, Path] | None:
    """Upstream's machine controller and manager (built when ``build`` and missing)."""
    controller = upstream_binary(build, label="manager benchmark")
    if controller is None:
        return None
    located = subprocess.run(
        [str(BUILD_SCRIPT), "--manager-path"], check=True, capture_output=True, text=True
    )
    manager = Path(located.stdout.strip())
    if not manager.is_file() and build and shutil.which("go") is not None:
        subprocess.run([str(BUILD_SCRIPT)], check=False, capture_output=True)
    if not manager.is_file():
        print(f"manager benchmark: skipped: upstream's manager is not built yet ({manager})")
        return None
    return controller, manager


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000", help="MachineDeployment sizes (default 100,1000)")
    parser.add_argument("--smoke", action="store_true", help="N=10 only; never builds")
    parser.add_argument("--no-build", action="store_true", help="never build; skip without cached binaries")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds each phase may take")
    parser.add_argument("--verbose", action="store_true", help="also print every phase's writes by kind")
    parser.add_argument(
        "--detail", action="store_true", help="print each manager's requests per phase by verb and resource"
    )
    parser.add_argument("--keep", type=Path, help="copy each run's request and process logs here")
    parser.add_argument(
        "--controllers",
        choices=("own", "go", "mcm"),
        default="own",
        help="own: each manager on its side's machine controller (default); go, mcm: both on that one",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record mcm's manager with py-spy (the bench set) into PROFILE-N (collapsed stacks; "
        "summarise with benchmarks/profile_summary.py)",
    )
    args = parser.parse_args()
    quiet()
    found = binaries(build=not (args.no_build or args.smoke))
    if found is None:
        return 0
    settings = Settings(args.timeout, args.profile, args.keep, args.controllers)
    sizes = [10] if args.smoke else [int(s) for s in args.sizes.split(",")]
    pairs: list[tuple[Run, Run]] = []
    for i, n in enumerate(sizes):
        order = ("Go", "mcm") if i % 2 == 0 else ("mcm", "Go")
        runs = {side: run_side(side, found, n, settings) for side in order}
        for side in order:
            run = runs[side]
            if args.detail:
                print_detail(run)
            print(
                f"{side} N={n}: manager CPU {_num(run.manager_cpu)} s, "
                f"peak RSS {_num(run.manager_rss, 0)} MiB; controller CPU {_num(run.controller_cpu)} s, "
                f"peak RSS {_num(run.controller_rss, 0)} MiB",
                flush=True,
            )
        pairs.append((runs["Go"], runs["mcm"]))
    pairing = (
        "mcm's manager and machine controller beside upstream's"
        if settings.controllers == "own"
        else f"mcm's manager beside upstream's, both on {settings.controllers}'s machine controller"
    )
    print(f"\n{pairing} ({found[0].parent.name}), client limits off\n")
    table = Table(judged=not args.smoke)
    for go, mcm in pairs:
        add_rows(table, go, mcm)
    unmet = table.print()
    if args.verbose:
        print_writes(pairs)
    if not all(r.complete for pair in pairs for r in pair):
        print("\nsome phase did not finish in time")
        return 1
    print(f"\ntargets not met: {unmet}" if not args.smoke else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

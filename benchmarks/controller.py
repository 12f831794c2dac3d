"""Machine controller benchmark: ``benchmarks/controller.py [--machines 100,1000] [--smoke]``.

A control and a target emulator run in child processes (``python -m mcm.emulator serve``); the
controller runs in this process with a FakeDriver and unthrottled clients; a node simulator runs
in its own process (``_scenario.node_simulator``: a kubelet per VM, registering a Ready Node for
every machine the controller gave a providerID and a node name, through its own informer on the
control cluster).

For each size N: N Machines created at once → all Running; then all deleted → all gone. Prints
seconds to all Running (p50 / p99 / max of each machine's time from its creation to the moment
the controller's cache holds it Running, seen by an informer handler), seconds to
all gone, reconciles/s, control-cluster API requests per machine by verb (emulator counters),
control writes per machine to reach Running, driver calls per machine, controller CPU seconds
and peak RSS. Yardstick: upstream MCM v0.47.0 on this machine and emulator (issue 11).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from mcm.runtime.objects import Obj

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from _report import Report, at_most  # noqa: E402
from _scenario import machine, node_simulator, percentile  # noqa: E402

from mcm.apis.machine import constants as c  # noqa: E402
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES  # noqa: E402
from mcm.controller import Controller, ControllerOptions  # noqa: E402
from mcm.drain import Drainer, DrainOptions, DrainResult  # noqa: E402
from mcm.driver import FakeDriver  # noqa: E402
from mcm.emulator import ClusterPair  # noqa: E402
from mcm.runtime.cache import ResourceEventHandlerFuncs  # noqa: E402
from mcm.runtime.client import load_config  # noqa: E402
from mcm.runtime.client.resources import SECRETS  # noqa: E402

NS = "default"


class NoPodsDrainer(Drainer):
    """The benchmark's nodes run no pods: cordon and drain have nothing to do (no API calls)."""

    def __init__(self) -> None:
        """Nothing to hold: no method below reaches a cluster."""

    def cordon(self, node_name: str) -> None:
        return None

    def drain(self, node_name: str, options: DrainOptions, *, machine_ref: Any = None) -> DrainResult:
        return DrainResult(node=node_name, duration=0.0)


def watch_running(controller: Controller) -> dict[str, float]:
    """Machine name → when the controller's cache first saw it Running (an informer handler: exact
    times, and no polling of the whole cache on the controller's CPU)."""
    running: dict[str, float] = {}

    def seen(obj: Obj) -> None:
        status = obj.get("status") or {}
        if (status.get("currentStatus") or {}).get("phase") == "Running":
            running.setdefault(obj["metadata"]["name"], time.monotonic())

    controller.control_factory.informer_for(MACHINES).add_event_handler(
        ResourceEventHandlerFuncs(on_add=seen, on_update=lambda _old, new: seen(new))
    )
    return running


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_size(pair: ClusterPair, n: int, report: Report, timeout: float, workers: int) -> None:
    control = load_config(str(pair.control_kubeconfig), qps=-1, burst=0)
    target = load_config(str(pair.target_kubeconfig), qps=-1, burst=0)
    machines = control.resource(MACHINES)
    driver = FakeDriver()
    options = ControllerOptions(namespace=NS)
    controller = Controller(control, target, driver, options, drainer=NoPodsDrainer())
    reconciles: Counter[str] = Counter()
    for name, reconcile in list(controller.reconcilers.items()):

        def counted(key: str, _name: str = name, _reconcile: Any = reconcile) -> Any:
            reconciles[_name] += 1
            return _reconcile(key)

        controller.reconcilers[name] = counted
    running = watch_running(controller)
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(workers, stop), daemon=True)
    cpu0 = cpu_seconds()
    runner.start()
    assert all(f.wait_for_cache_sync(stop, timeout=30) for f in (controller.control_factory,))
    stats = pair.control.stats
    stats.reset()
    lister = controller.deps.listers.machines
    names = [f"bench-{n}-{i:05d}" for i in range(n)]
    created: dict[str, float] = {}

    def create(name: str) -> None:
        created[name] = time.monotonic()
        machines.create(machine(name), namespace=NS)

    start = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, names))
    deadline = start + timeout
    while len(running) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    all_running = (max(running.values()) if len(running) == n else time.monotonic()) - start
    per_machine = [running[name] - created[name] for name in running]
    writes_to_running = sum(stats.count(verb=v, resource="machines") for v in ("update", "patch")) / n
    by_verb_create = {
        v: stats.count(verb=v, resource="machines") / n
        for v in ("create", "get", "list", "watch", "update", "patch", "delete")
    }
    driver_calls_create = len(driver.calls) / n
    reconciles_create = sum(reconciles.values())
    reconciles_by_queue_create = Counter(reconciles)
    cpu_create = cpu_seconds() - cpu0

    report.figure(f"N={n}: machines Running", len(running), "", target=at_most(n))
    report.figure(
        f"N={n}: seconds to all Running",
        all_running,
        "s",
        target=at_most(15.0, sized=True) if n >= 1000 else None,
    )
    report.figure(f"N={n}: per-machine p50", percentile(per_machine, 0.5), "s")
    report.figure(
        f"N={n}: per-machine p99",
        percentile(per_machine, 0.99),
        "s",
        target=at_most(10.0, sized=True) if n >= 1000 else None,
    )
    report.figure(f"N={n}: per-machine max", max(per_machine, default=float("nan")), "s")
    report.figure(
        f"N={n}: controller writes per machine to Running (updates+patches)",
        writes_to_running,
        "",
        target=at_most(6.0),
    )
    for verb, value in by_verb_create.items():
        report.figure(f"N={n}: machines {verb} per machine (create phase)", value, "")
    report.figure(f"N={n}: driver calls per machine (create)", driver_calls_create, "")

    stats.reset()
    start = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda name: machines.delete(name, namespace=NS), names))
    deadline = start + timeout
    while lister.list() and time.monotonic() < deadline:
        time.sleep(0.05)
    all_gone = time.monotonic() - start
    report.figure(
        f"N={n}: seconds to all gone", all_gone, "s", target=at_most(10.0, sized=True) if n >= 1000 else None
    )
    report.figure(f"N={n}: machines left", len(lister.list()), "", target=at_most(0))
    for verb in ("get", "list", "update", "patch", "delete"):
        report.figure(
            f"N={n}: machines {verb} per machine (delete phase)",
            stats.count(verb=verb, resource="machines") / n,
            "",
        )
    report.figure(f"N={n}: driver calls per machine (total)", len(driver.calls) / n, "")
    total_reconciles = sum(reconciles.values())
    report.figure(f"N={n}: reconciles (create phase)", reconciles_create, "")
    for queue in sorted(reconciles):
        created_count = reconciles_by_queue_create[queue]
        report.figure(f"N={n}: {queue} reconciles (create phase)", created_count, "")
        report.figure(f"N={n}: {queue} reconciles (delete phase)", reconciles[queue] - created_count, "")
    report.figure(f"N={n}: reconciles/s overall", total_reconciles / max(all_running + all_gone, 1e-9), "1/s")
    stop.set()
    runner.join(60)
    report.figure(f"N={n}: controller CPU seconds (create phase)", cpu_create, "s")
    report.figure(f"N={n}: controller CPU seconds", cpu_seconds() - cpu0, "s")
    control.close()
    target.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machines", default="100,1000", help="comma-separated sizes")
    parser.add_argument("--smoke", action="store_true", help="one small size (20)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--concurrent-syncs", type=int, default=20, help="controller workers per queue (default 20)"
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    sizes = [20] if args.smoke else [int(s) for s in args.machines.split(",")]
    report = Report("machine controller benchmark", full_size=not args.smoke)
    with tempfile.TemporaryDirectory() as directory:
        pair = ClusterPair.start(directory, in_process=False)
        try:
            control = load_config(str(pair.control_kubeconfig), qps=-1, burst=0)
            control.resource(SECRETS).create(
                {
                    "metadata": {"name": "bench", "namespace": NS},
                    "data": {"userData": "I2Nsb3VkLWNvbmZpZw=="},
                },
                namespace=NS,
            )
            control.resource(MACHINE_CLASSES).create(
                {
                    "apiVersion": "machine.sapcloud.io/v1alpha1",
                    "kind": "MachineClass",
                    "metadata": {"name": "bench", "namespace": NS, "finalizers": [c.MCM_FINALIZER]},
                    "providerSpec": {},
                    "secretRef": {"name": "bench", "namespace": NS},
                    "provider": "fake",
                },
                namespace=NS,
            )
            ctx = multiprocessing.get_context("spawn")
            stop = ctx.Event()
            sim = ctx.Process(
                target=node_simulator,
                args=(str(pair.control_kubeconfig), str(pair.target_kubeconfig), stop),
                daemon=True,
            )
            sim.start()
            for n in sizes:
                run_size(pair, n, report, args.timeout, args.concurrent_syncs)
            stop.set()
            sim.join(10)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            report.figure("controller process peak RSS", peak, "MiB", target=at_most(200.0))
        finally:
            pair.close()
    return 1 if report.print() else 0


if __name__ == "__main__":
    sys.exit(main())

"""Informer benchmark: ``.venv/bin/python benchmarks/informer.py [--objects N] [--list-runs R]``.

The emulator runs in its own process (``mcm.emulator.process.spawn``), seeded with N Machine
objects of about 4 KB each through its admin listener. For the watch phase the informer's watch
is parked (``pause("hang")``) while N updates are committed in the server process (through the
admin listener), then released, so the measured span is decoding, caching and delivery only.
Each figure is printed beside a yardstick measured in the same run:

- list phase: objects/s from ``start`` until ``has_synced`` (HTTP list in pages of 500, JSON
  decode, DeltaFIFO, indexer, one handler), beside a bare paged GET + ``json.loads`` of the same
  list — target ≥ 5,000/s;
- watch phase: events/s from releasing a parked watch to the last of N MODIFIED events at the
  handler, beside the emulator's commit rate for the same updates (committed beforehand, while
  the watch was parked) — target ≥ 3,000/s;
- memory per cached object (tracemalloc, a separate run so tracing does not slow the phases
  above) after the list and after the watch, beside a plain ``json.loads`` dict of the same
  objects (as one list body, and one by one) — target ≤ 1.1x. ``--no-memory`` skips it.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "benchmarks"))

from _report import Report, at_least, ratio_at_most  # noqa: E402

from mcm import packaged  # noqa: E402
from mcm.apis.machine.resources import MACHINES  # noqa: E402
from mcm.emulator.process import spawn  # noqa: E402
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory  # noqa: E402
from mcm.runtime.client import load_config  # noqa: E402

NAMESPACE = "shoot--bench"
CRDS = packaged.machine_crds()
SEED_BATCH = 500


# --------------------------------------------------------------------------------------------
# The emulator child process
# --------------------------------------------------------------------------------------------


def machine_name(i: int) -> str:
    return f"shoot--bench-worker-z1-5d8f7-{i:05d}"


def machine(i: int) -> dict[str, Any]:
    """A realistic Machine of about 4 KB of JSON."""
    name = machine_name(i)
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {
                "machine-template-hash": "3840296372",
                "name": "shoot--bench-worker-z1",
                "node": f"ip-10-250-{i // 250}-{i % 250}.eu-west-1.compute.internal",
                "topology.kubernetes.io/zone": "eu-west-1a",
            },
            "annotations": {
                "machinepriority.machine.sapcloud.io": "3",
                "bench/generation": "0",
                "bench/padding": "p" * 1200,
            },
            "finalizers": ["machine.sapcloud.io/machine-controller-manager"],
            "ownerReferences": [
                {
                    "apiVersion": "machine.sapcloud.io/v1alpha1",
                    "kind": "MachineSet",
                    "name": "shoot--bench-worker-z1-5d8f7",
                    "uid": "5a4cf3a8-1f1e-4d55-9a57-7c2bbde5b1d1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "class": {"kind": "MachineClass", "name": "shoot--bench-worker-z1-3f1c2"},
            "providerID": f"aws:///eu-west-1/i-0{i:016x}",
            "nodeTemplate": {
                "metadata": {
                    "labels": {
                        "node.kubernetes.io/role": "node",
                        "worker.gardener.cloud/pool": "worker-z1",
                        "worker.garden.sapcloud.io/group": "worker-z1",
                    }
                },
                "spec": {"taints": [{"key": "dedicated", "value": "bench", "effect": "NoSchedule"}]},
            },
            "creationTimeout": "20m0s",
            "drainTimeout": "2h0m0s",
            "healthTimeout": "10m0s",
            "maxEvictRetries": 360,
            "nodeConditions": "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable",
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": f"10.250.{i // 250}.{i % 250}"},
                {"type": "Hostname", "address": f"ip-10-250-{i // 250}-{i % 250}"},
            ],
            "conditions": [
                {
                    "type": t,
                    "status": "False" if t != "Ready" else "True",
                    "reason": f"{t}Healthy",
                    "message": f"condition {t} is healthy on this node",
                    "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
                for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "KernelDeadlock")
            ],
            "currentStatus": {
                "phase": "Running",
                "lastUpdateTime": "2024-01-01T00:00:00Z",
                "timeoutActive": False,
            },
            "lastOperation": {
                "description": "Machine shoot--bench-worker-z1 successfully joined the cluster",
                "lastUpdateTime": "2024-01-01T00:00:00Z",
                "state": "Successful",
                "type": "Create",
            },
        },
    }


# --------------------------------------------------------------------------------------------
# The measuring side
# --------------------------------------------------------------------------------------------


class Child:
    """The emulator in its own process (:func:`mcm.emulator.process.spawn`), seeded and updated
    through its admin listener (commits in the server process, unaffected by the pause)."""

    def __init__(self, objects: int) -> None:
        self.objects = objects
        self.dir = tempfile.mkdtemp(prefix="mcm-bench-")
        self.process = spawn(
            self.dir, "informer", crds=CRDS, controllers=False, history_size=max(10_000, objects * 3)
        )
        self.kubeconfig = str(self.process.kubeconfig)
        remote = self.process.remote
        remote.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        for first in range(0, objects, SEED_BATCH):
            batch = [machine(i) for i in range(first, min(objects, first + SEED_BATCH))]
            remote.seed(batch, bypass_strategy=True)

    def hold(self) -> None:
        """Park the client's next watch request, then end its current watch: it reconnects into
        the pause and, on release, receives every update committed meanwhile at streaming speed."""
        self.process.remote.pause("hang")
        self.process.remote.drop_watches("close")

    def update_all(self) -> float:
        """One MODIFIED per object, committed in the server process; return the seconds taken."""
        patch = {"metadata": {"annotations": {"bench/generation": "1"}}}
        start = time.perf_counter()
        for first in range(0, self.objects, SEED_BATCH):
            names = [machine_name(i) for i in range(first, min(self.objects, first + SEED_BATCH))]
            self.process.remote.merge_patch_all("machines.machine.sapcloud.io", NAMESPACE, names, patch)
        return time.perf_counter() - start

    def release(self) -> None:
        self.process.remote.resume()

    def close(self) -> None:
        self.process.close()


class Counter:
    """A handler that counts adds and updates and signals when a target is reached."""

    def __init__(self) -> None:
        self.adds = 0
        self.updates = 0
        self.first_update = 0.0
        self.last_update = 0.0
        self.target = -1
        self.reached = threading.Event()

    def on_add(self, obj: Any) -> None:
        self.adds += 1

    def on_update(self, old: Any, new: Any) -> None:
        now = time.perf_counter()
        if self.updates == 0:
            self.first_update = now
        self.updates += 1
        self.last_update = now
        if self.updates == self.target:
            self.reached.set()


def wait_synced(informer: Any, timeout: float = 120.0) -> None:
    """Spin on has_synced (1 ms) so the measurement is not rounded up to a 100 ms poll."""
    deadline = time.perf_counter() + timeout
    while not informer.has_synced():
        if time.perf_counter() > deadline:
            raise RuntimeError("informer did not sync")
        time.sleep(0.001)


def run_phases(child: Child, objects: int, *, trace: bool, watch: bool = True) -> dict[str, float]:
    """List into a fresh informer (and then, with ``watch``, take one update per object)."""
    client = load_config(child.kubeconfig, qps=1_000.0, burst=1_000)
    factory = SharedInformerFactory(client, namespace=NAMESPACE)
    informer = factory.informer_for(MACHINES)
    counter = Counter()
    informer.add_event_handler(ResourceEventHandlerFuncs(counter.on_add, counter.on_update))
    stop = threading.Event()
    gc.collect()
    if trace:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0] if trace else 0
    start, cpu = time.perf_counter(), time.process_time()
    factory.start(stop)
    wait_synced(informer)
    figures = {"list_seconds": time.perf_counter() - start, "list_cpu": time.process_time() - cpu}
    assert len(informer.get_indexer().list_keys()) == objects
    if trace:
        gc.collect()
        figures["cache_after_list"] = (tracemalloc.get_traced_memory()[0] - base) / objects
    if watch:
        figures |= watch_phase(child, objects, counter)
    if trace:
        gc.collect()
        figures["cache_after_watch"] = (tracemalloc.get_traced_memory()[0] - base) / objects
    stop.set()
    factory.shutdown(10)
    if trace:
        tracemalloc.stop()
    client.close()
    return figures


def watch_phase(child: Child, objects: int, counter: Counter) -> dict[str, float]:
    figures: dict[str, float] = {}
    time.sleep(1.5)  # let the watch live past client-go's "very short watch" second
    counter.target = objects
    child.hold()
    figures["write_seconds"] = child.update_all()
    released, cpu = time.perf_counter(), time.process_time()
    child.release()
    if not counter.reached.wait(120):
        raise RuntimeError(f"only {counter.updates} of {objects} updates arrived")
    figures["watch_cpu"] = time.process_time() - cpu
    figures["watch_seconds"] = counter.last_update - released
    figures["watch_stream_seconds"] = counter.last_update - counter.first_update
    return figures


def bare_list_seconds(child: Child) -> float:
    """Seconds for the yardstick list: the same pages of 500 over HTTP and ``json.loads``, nothing else."""
    client = load_config(child.kubeconfig, qps=1_000.0, burst=1_000)
    path = f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{NAMESPACE}/machines"
    start = time.perf_counter()
    query = {"limit": "500"}
    count = 0
    while True:
        page = json.loads(client.get_bytes(path, query=query))
        count += len(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            break
        query = {"limit": "500", "continue": token}
    elapsed = time.perf_counter() - start
    client.close()
    del count
    return elapsed


def plain_dict_memory(child: Child) -> tuple[float, float]:
    """Bytes per object for json.loads of each item, and of the whole list body, in this process."""
    client = load_config(child.kubeconfig, qps=1_000.0, burst=1_000)
    body = client.get_bytes(f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{NAMESPACE}/machines")
    client.close()
    items = [json.dumps(o, separators=(",", ":")).encode() for o in json.loads(body)["items"]]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    one_by_one = [json.loads(b) for b in items]
    per_item = (tracemalloc.get_traced_memory()[0] - before) / len(items)
    del one_by_one
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    whole = json.loads(body)["items"]
    as_list = (tracemalloc.get_traced_memory()[0] - before) / len(items)
    del whole
    tracemalloc.stop()
    return per_item, as_list


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000, help="Machines to list and update (10,000)")
    parser.add_argument("--list-runs", type=int, default=3, help="list runs; the best counts (3)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    args = parser.parse_args()

    from mcm.runtime import logs

    logs.configure("console", level=30)
    n = args.objects
    size = len(json.dumps(machine(0), separators=(",", ":")))
    report = Report(
        f"informer benchmark: {n:,} Machines of ~{size:,} bytes of JSON, emulator in a child process"
    )
    child = Child(n)
    try:
        lists = [run_phases(child, n, trace=False, watch=False) for _ in range(max(1, args.list_runs - 1))]
        speed = run_phases(child, n, trace=False)
        bare = min(bare_list_seconds(child) for _ in range(max(1, args.list_runs)))
    finally:
        child.close()
    best_list = min([*lists, speed], key=lambda f: f["list_seconds"])
    report.figure(
        "list: start to has_synced",
        n / best_list["list_seconds"],
        "objects/s",
        yardstick=report.yardstick("bare paged GET + json.loads", n / bare, "objects/s"),
        target=at_least(5_000, "objects/s"),
    )
    report.figure(
        "list: per CPU-second of this process",
        n / best_list["list_cpu"],
        "objects/s",
    )
    report.figure(
        "watch: release to the last MODIFIED at the handler",
        n / speed["watch_seconds"],
        "events/s",
        yardstick=report.yardstick("emulator commit rate", n / speed["write_seconds"], "writes/s"),
        target=at_least(3_000, "events/s"),
    )
    report.figure("watch: first to last event", n / speed["watch_stream_seconds"], "events/s")
    report.figure("watch: per CPU-second of this process", n / speed["watch_cpu"], "events/s")
    if not args.no_memory:
        child = Child(n)
        try:
            memory = run_phases(child, n, trace=True)
            per_item, as_list = plain_dict_memory(child)
        finally:
            child.close()
        report.figure(
            "cache after the list",
            memory["cache_after_list"] / 1024,
            "KiB/object",
            yardstick=report.yardstick("json.loads of the list body", as_list / 1024, "KiB/object"),
            target=ratio_at_most(1.1),
        )
        report.figure(
            "cache after the watch (objects decoded one event at a time)",
            memory["cache_after_watch"] / 1024,
            "KiB/object",
            yardstick=report.yardstick("json.loads item by item", per_item / 1024, "KiB/object"),
            target=ratio_at_most(1.1),
        )
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

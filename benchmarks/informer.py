"""Informer benchmark: ``.venv/bin/python benchmarks/informer.py [--objects N]``.

The emulator runs in a child process (this file with ``--serve``): it seeds N Machine objects of
about 4 KB each (in process, not over HTTP) and, when told, commits N updates in process, so the
measuring process does nothing but list, decode, cache and deliver. Prints:

- list phase: objects/s from ``start`` until ``has_synced`` (HTTP list in pages of 500, JSON
  decode, DeltaFIFO, indexer, one handler) — target ≥ 5,000;
- watch phase: events/s from the first to the last of N MODIFIED events reaching the handler,
  next to the emulator's own commit rate (the watch cannot be faster than the writer) — target
  ≥ 3,000;
- memory per cached object (tracemalloc, a separate run so tracing does not slow the phases
  above) after the list and after the watch, next to a plain ``json.loads`` dict of the same
  object decoded one by one and as one list body, measured in the same run — target ≤ 1.1x.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcm.apis.machine.resources import MACHINES  # noqa: E402
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory  # noqa: E402
from mcm.runtime.client import load_config  # noqa: E402

NAMESPACE = "shoot--bench"
CRDS = REPO / "charts" / "machine-controller" / "crds"


# --------------------------------------------------------------------------------------------
# The emulator child process
# --------------------------------------------------------------------------------------------


def machine(i: int) -> dict[str, Any]:
    """A realistic Machine of about 4 KB of JSON."""
    name = f"shoot--bench-worker-z1-5d8f7-{i:05d}"
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


def update_all(emu: Any, objects: int) -> float:
    """Commit one MODIFIED per object, in process; return the seconds it took."""
    rt = emu.resource_type(("machine.sapcloud.io", "machines"))

    def bump(current: dict[str, Any]) -> dict[str, Any]:
        new: dict[str, Any] = json.loads(json.dumps(current))
        new["metadata"]["annotations"]["bench/generation"] = "1"
        return new

    start = time.perf_counter()
    for i in range(objects):
        emu.storage.guaranteed_update(rt, NAMESPACE, machine(i)["metadata"]["name"], bump)
    return time.perf_counter() - start


def serve(objects: int, kubeconfig: str) -> None:
    """Child process: run the emulator, seed, and commit updates on request (stdin commands)."""
    from mcm.emulator import Emulator

    emu = Emulator(history_size=max(10_000, objects * 3), controllers=False)
    emu.start()
    emu.install_crds(sorted(CRDS.glob("*.yaml")))
    emu.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    emu.seed((machine(i) for i in range(objects)), bypass_strategy=True)
    emu.write_kubeconfig(kubeconfig)
    print("READY", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "hold":
            # Park the client's next watch request, then end its current watch: it reconnects
            # into the pause and, on release, replays the whole history at streaming speed.
            emu.pause("hang")
            emu.watches.drop("close")
            print("HELD", flush=True)
        elif command == "update":
            print(f"DONE {update_all(emu, objects):.6f}", flush=True)
        elif command == "release":
            emu.resume()
            print("RELEASED", flush=True)
    emu.close()


# --------------------------------------------------------------------------------------------
# The measuring side
# --------------------------------------------------------------------------------------------


class Child:
    def __init__(self, objects: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="mcm-bench-")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--objects", str(objects), "--kubeconfig", self.kubeconfig],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._expect("READY")

    def _expect(self, word: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(word):
                return line
        raise RuntimeError(f"emulator child ended before {word}")

    def send(self, command: str, answer: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._expect(answer)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


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
    child.send("hold", "HELD")
    figures["write_seconds"] = float(child.send("update", "DONE").split()[1])
    released, cpu = time.perf_counter(), time.process_time()
    child.send("release", "RELEASED")
    if not counter.reached.wait(120):
        raise RuntimeError(f"only {counter.updates} of {objects} updates arrived")
    figures["watch_cpu"] = time.process_time() - cpu
    figures["watch_seconds"] = counter.last_update - released
    figures["watch_stream_seconds"] = counter.last_update - counter.first_update
    return figures


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.objects, args.kubeconfig)
        return

    from mcm.runtime import logs

    logs.configure("console", level=30)
    n = args.objects
    child = Child(n)
    try:
        lists = [run_phases(child, n, trace=False, watch=False) for _ in range(2)]
        speed = run_phases(child, n, trace=False)
    finally:
        child.close()
    best_list = min([*lists, speed], key=lambda f: f["list_seconds"])
    child = Child(n)
    try:
        memory = run_phases(child, n, trace=True)
        per_item, as_list = plain_dict_memory(child)
    finally:
        child.close()
    size = len(json.dumps(machine(0), separators=(",", ":")))
    list_rate = n / best_list["list_seconds"]
    watch_rate = n / speed["watch_seconds"]
    stream_rate = n / speed["watch_stream_seconds"]
    write_rate = n / speed["write_seconds"]
    print(f"objects: {n} Machines, ~{size} bytes of JSON each; emulator in a child process")
    list_seconds, list_cpu = best_list["list_seconds"], best_list["list_cpu"]
    print(
        f"list  : {list_rate:8.0f} objects/s  (best of 3: {list_seconds:.2f} s from start to has_synced; "
        f"{n / list_cpu:.0f}/s per CPU-second of this process; target >= 5000)"
    )
    print(
        f"watch : {watch_rate:8.0f} events/s   (release of the parked watch to the last MODIFIED at the "
        f"handler; {stream_rate:.0f}/s first to last; target >= 3000)"
    )
    print(
        f"        ({n / speed['watch_cpu']:.0f}/s per CPU-second of this process; the emulator committed "
        f"the {n} updates beforehand at {write_rate:.0f} writes/s)"
    )
    print(f"plain json.loads dict, item by item : {per_item / 1024:7.2f} KiB/object")
    print(f"plain json.loads dict, whole list   : {as_list / 1024:7.2f} KiB/object")
    after_list, after_watch = memory["cache_after_list"], memory["cache_after_watch"]
    ratio = after_list / as_list
    print(f"informer cache after the list       : {after_list / 1024:7.2f} KiB/object ({ratio:.2f}x)")
    print(
        f"informer cache after the watch      : {after_watch / 1024:7.2f} KiB/object "
        f"({after_watch / per_item:.2f}x; objects now decoded one event at a time; target <= 1.1x)"
    )


if __name__ == "__main__":
    main()

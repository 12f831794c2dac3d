"""Drain benchmark: ``.venv/bin/python benchmarks/drain.py [--pods 110] [--pv-pods 10] ...``.

The emulator runs in a child process (``python -m mcm.emulator serve``) with its kubelet in
``immediate`` mode (pods terminate at once) and the attach/detach simulation on. The measuring
process plays the machine controller: informers for pods, PDBs, PVs, PVCs and VolumeAttachments,
the VolumeAttachment hub, then ``cordon_node`` + ``run_drain`` on a real clock. Prints:

- phase 1, ``--pods`` pods without PVs and no blocking PDB: drain wall time (target ≤ 2 s) and
  API requests per pod as counted by the emulator during the drain (target ≤ 3);
- phase 2, ``--pv-pods`` pods with one CSI volume each and a ``--detach-delay`` s simulated
  detach: drain wall time (target ≤ 12 s for 10 pods with 1 s). A watcher stands in for the
  StatefulSet controller and scheduler: each deleted PV pod comes back on another node, so the
  reattach wait ends on the VolumeAttachment event instead of its timeout.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from mcm.runtime.objects import Obj

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from _report import Report, at_most  # noqa: E402

from mcm.drain import (  # noqa: E402
    DrainListers,
    DrainOptions,
    DrainResult,
    VolumeAttachmentHub,
    cordon_node,
    run_drain,
)
from mcm.driver import FakeDriver  # noqa: E402
from mcm.emulator.admin import RemoteEmulator  # noqa: E402
from mcm.emulator.process import spawn  # noqa: E402
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory  # noqa: E402
from mcm.runtime.client import ClusterClient, load_config  # noqa: E402
from mcm.runtime.client.resources import (  # noqa: E402
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    VOLUME_ATTACHMENTS,
)
from mcm.runtime.clock import REAL_CLOCK  # noqa: E402

NS = "default"
OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}


def pod(name: str, node: str, claim: str | None = None) -> Obj:
    spec: Obj = {
        "nodeName": node,
        "terminationGracePeriodSeconds": 30,
        "containers": [{"name": "c", "image": "i"}],
    }
    if claim is not None:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    labels = {"app": "bench"} if claim is None else {"stateful": "yes"}
    meta = {"name": name, "namespace": NS, "labels": labels, "ownerReferences": [OWNER]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def volume(name: str) -> list[Obj]:
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    csi = {"driver": "disk.csi.example.com", "volumeHandle": f"vol-{name}"}
    claim_spec = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "volumeName": name,
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {**spec, "csi": csi},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": claim_spec,
        },
    ]


def node(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


class Controller:
    """The controller's side of one drain: client, informers, hub, listers."""

    def __init__(self, kubeconfig: Path, qps: float, burst: int) -> None:
        self.client: ClusterClient = load_config(str(kubeconfig), qps=qps, burst=burst)
        self.stop = threading.Event()
        self.factory = SharedInformerFactory(self.client)
        self.hub = VolumeAttachmentHub()
        self.factory.informer_for(VOLUME_ATTACHMENTS).add_event_handler(
            ResourceEventHandlerFuncs(self.hub.on_add, self.hub.on_update, self.hub.on_delete)
        )
        pods = self.factory.informer_for(PODS)
        pods.add_event_handler(ResourceEventHandlerFuncs(on_delete=self._reschedule))
        self.listers = DrainListers(
            pods=self.factory.lister(PODS),
            pdbs=self.factory.lister(POD_DISRUPTION_BUDGETS),
            pvs=self.factory.lister(PERSISTENT_VOLUMES),
            pvcs=self.factory.lister(PERSISTENT_VOLUME_CLAIMS),
            pods_synced=pods.has_synced,
        )
        self.factory.start(self.stop)
        if not all(self.factory.wait_for_cache_sync(self.stop, timeout=60).values()):
            raise RuntimeError("informers did not sync")

    def _reschedule(self, obj: Any) -> None:
        old = getattr(obj, "obj", None) or obj
        if old["metadata"].get("labels", {}).get("stateful") != "yes" or old["spec"]["nodeName"] == "n2":
            return
        claim = old["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        self.client.resource(PODS).create(pod(f"{old['metadata']['name']}-r", "n2", claim), namespace=NS)

    def drain(self, node_name: str, options: DrainOptions) -> DrainResult:
        cordon_node(self.client, node_name)
        return run_drain(
            self.client, self.listers, FakeDriver(), node_name, options,
            clock=REAL_CLOCK, stop=threading.Event(), hub=self.hub,
        )  # fmt: skip

    def close(self) -> None:
        self.stop.set()
        self.factory.shutdown(timeout=5)
        self.client.close()


def wait_until(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out preparing the benchmark")
        time.sleep(0.05)


def phase_plain(remote: RemoteEmulator, kubeconfig: Path, args: argparse.Namespace) -> dict[str, float]:
    remote.seed([node("plain")] + [pod(f"app-{i}", "plain") for i in range(args.pods)])
    controller = Controller(kubeconfig, args.qps, args.burst)
    try:
        options = DrainOptions(timeout=600, max_evict_retries=30, max_parallel_evictions=args.parallel)
        before = remote.count()
        start = time.perf_counter()
        result = controller.drain("plain", options)
        seconds = time.perf_counter() - start
        calls = remote.count() - before
    finally:
        controller.close()
    if not result.ok or len(result.evicted) != args.pods:
        raise RuntimeError(f"phase 1 drain failed: {result}")
    return {"seconds": seconds, "calls": calls, "calls_per_pod": calls / max(args.pods, 1)}


def phase_volumes(remote: RemoteEmulator, kubeconfig: Path, args: argparse.Namespace) -> dict[str, float]:
    remote.set_controller("attachdetach", enabled=True, detach_delay=args.detach_delay)
    objects: list[Obj] = [node("n1"), node("n2")]
    for i in range(args.pv_pods):
        objects += volume(f"data-{i}")
        objects.append(pod(f"db-{i}", "n1", f"data-{i}"))
    remote.seed(objects)
    wait_until(lambda: len(remote.list("volumeattachments.storage.k8s.io")) == args.pv_pods)
    controller = Controller(kubeconfig, args.qps, args.burst)
    try:
        options = DrainOptions(timeout=600, max_evict_retries=30, max_parallel_evictions=args.parallel)
        start = time.perf_counter()
        result = controller.drain("n1", options)
        seconds = time.perf_counter() - start
    finally:
        controller.close()
    if not result.ok or len(result.evicted) != args.pv_pods:
        raise RuntimeError(f"phase 2 drain failed: {result}")
    return {"seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110, help="pods without PVs in phase 1 (default 110)")
    parser.add_argument("--pv-pods", type=int, default=10, help="pods with a PV in phase 2 (default 10)")
    parser.add_argument("--detach-delay", type=float, default=1.0, help="simulated detach in s (default 1)")
    parser.add_argument("--parallel", type=int, default=20, help="max_parallel_evictions (default 20)")
    parser.add_argument("--qps", type=float, default=200.0, help="client QPS (default 200)")
    parser.add_argument("--burst", type=int, default=400, help="client burst (default 400)")
    parser.add_argument("--smoke", action="store_true", help="20 + 2 pods, 0.2 s detach (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.pods, args.pv_pods, args.detach_delay = 20, 2, 0.2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    full = (args.pods, args.pv_pods, args.detach_delay) == (110, 10, 1.0)
    report = Report(f"drain benchmark, python {sys.version.split()[0]}", full_size=full)

    with tempfile.TemporaryDirectory() as tmp:
        child = spawn(tmp, "target")
        try:
            child.remote.set_controller("kubelet", run_pods=True, mode="immediate")
            plain = phase_plain(child.remote, child.kubeconfig, args)
            report.figure(
                f"drain of {args.pods} pods without PVs",
                plain["seconds"],
                "s",
                target=at_most(2, "s", sized=True),
            )
            report.figure("API requests per pod", plain["calls_per_pod"], "", target=at_most(3))
            if args.pv_pods:
                pv = phase_volumes(child.remote, child.kubeconfig, args)
                report.figure(
                    f"drain of {args.pv_pods} PV pods, {args.detach_delay:g} s detach each",
                    pv["seconds"],
                    "s",
                    target=at_most(12, "s", sized=True),
                )
        finally:
            child.close()
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

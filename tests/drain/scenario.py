"""Pods, volumes and handlers of upstream's ``RunDrain`` table test (v0.47.0
``drain/drain_test.go``), for the fakes."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mcm.drain import DrainListers, VolumeAttachmentHub
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj
from tests.drain.fakes import FakeCluster, listers

NODE = "old-node"
NEW_NODE = "new-node"
NS = "default"
CSI_DRIVER = "test.csi"


def pod(
    name: str,
    *,
    category: str = "none",
    tgp: int = 5,
    claims: Iterable[str] = (),
    node: str = NODE,
    priority: int | None = 0,
    labels: dict[str, str] | None = None,
    owner_kind: str | None = "ReplicaSet",
) -> Obj:
    spec: Obj = {
        "nodeName": node,
        "terminationGracePeriodSeconds": tgp,
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims],
    }
    if priority is not None:
        spec["priority"] = priority
    meta: Obj = {
        "name": name,
        "namespace": NS,
        "uid": str(uuid.uuid4()),
        "labels": {"volumes": category, **(labels or {})},
    }
    if owner_kind is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "o-1", "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def pv(name: str, handle: str | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"csi": {"driver": CSI_DRIVER, "volumeHandle": handle or name}},
    }


def pvc(name: str, volume: str | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"volumeName": name if volume is None else volume},
    }


def attachment(pv_name: str | None, node: str, attached: bool = True) -> Obj:
    spec: Obj = {"attacher": CSI_DRIVER, "nodeName": node, "source": {}}
    if pv_name is not None:
        spec["source"]["persistentVolumeName"] = pv_name
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": f"va-{pv_name}-{node}"},
        "spec": spec,
        "status": {"attached": attached},
    }


def node(name: str = NODE, volumes: Iterable[str] = ()) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {},
        "status": {"volumesAttached": [{"name": v, "devicePath": ""} for v in volumes]},
    }


@dataclass
class Scenario:
    """A node with pods of the four categories and their volumes."""

    cluster: FakeCluster
    clock: FakeClock
    pods: list[Obj] = field(default_factory=list)
    pvs: list[Obj] = field(default_factory=list)
    pvcs: list[Obj] = field(default_factory=list)
    exclusive: dict[str, list[str]] = field(default_factory=dict)
    hub: VolumeAttachmentHub | None = None

    def add(self, new: Obj, pv_names: Iterable[str] = ()) -> None:
        self.pods.append(new)
        self.cluster.add_pod(new)
        for name in pv_names:
            if all(p["metadata"]["name"] != name for p in self.pvs):
                self.pvs.append(pv(name))
                self.pvcs.append(pvc(name))

    def listers(self, **extra: Any) -> DrainListers:
        return listers(self.pods, pvs=self.pvs, pvcs=self.pvcs, **extra)

    def left(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self.cluster.lock:
            for p in self.cluster.pods.values():
                category = p["metadata"]["labels"]["volumes"]
                counts[category] = counts.get(category, 0) + 1
        return counts

    # -- handlers of the upstream test ---------------------------------------------------------
    def delete_pod(self, victim: Obj) -> None:
        self.cluster.remove_pod(victim)

    def sleep_then(self, seconds: float, then: str) -> Any:
        def handler(victim: Obj) -> None:
            self.clock.sleep(seconds)
            if then == "delete":
                self.delete_pod(victim)
            else:
                self.detach_exclusive(victim)

        return handler

    def detach_exclusive(self, victim: Obj) -> None:
        """Drop every ``expv-`` volume from the node; with a hub, move the pod's to ``new-node``."""
        with self.cluster.lock:
            current = self.cluster.nodes[NODE]
            status = current["status"]
            status["volumesAttached"] = [v for v in status["volumesAttached"] if "expv-" not in v["name"]]
        if self.hub is None:
            return
        for name in self.exclusive.get(victim["metadata"]["name"], []):
            self.clock.sleep(5)
            self.hub.dispatch(attachment(name, NEW_NODE))


def build(
    cluster: FakeCluster,
    clock: FakeClock,
    *,
    nopv: int = 0,
    expv: int = 0,
    shpv: int = 0,
    exshpv: int = 0,
    pvs_per_pod: int = 1,
    tgp: int = 5,
) -> Scenario:
    """The upstream test's pod mix on ``old-node``; every PV is attached to it."""
    s = Scenario(cluster, clock)
    for i in range(nopv):
        s.add(pod(f"nopv-{i}", category="none", tgp=tgp))
    for i in range(expv):
        names = [f"expv-{i}-{j}" for j in range(pvs_per_pod)]
        s.exclusive[f"expv-{i}"] = names
        s.add(pod(f"expv-{i}", category="only-exclusive", tgp=tgp, claims=names), names)
    for i in range(shpv):
        names = [f"shpv-{i // 2}"]
        s.add(pod(f"shpv-{i}", category="only-shared", tgp=tgp, claims=names), names)
    for i in range(exshpv):
        names = [f"exshexpv-{i}", f"exshshpv-{i // 2}"]
        s.exclusive[f"exshpv-{i}"] = names[:1]
        s.add(pod(f"exshpv-{i}", category="exclusive-and-shared", tgp=tgp, claims=names), names)
    cluster.nodes[NODE] = node(NODE, [p["metadata"]["name"] for p in s.pvs])
    return s

"""A target cluster in the emulator for drain integration tests (and the drain benchmark).

:class:`Target` seeds a node with pods (some with CSI persistent volumes), and
:class:`Informers` plays the machine controller's side: a client with informers for pods,
PDBs, PVs, PVCs and VolumeAttachments, the :class:`~mcm.drain.VolumeAttachmentHub` on the
VolumeAttachment informer, and the listers the drain reads. ``Informers.close`` then a new
``Informers`` is a controller restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcm.drain import DrainListers, VolumeAttachmentHub
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.resources import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    VOLUME_ATTACHMENTS,
)
from mcm.runtime.objects import Obj

NS = "default"
CSI_DRIVER = "disk.csi.example.com"


def pod(
    name: str, node: str, *, labels: dict[str, str] | None = None, claim: str | None = None, grace: int = 30
) -> Obj:
    spec: Obj = {
        "nodeName": node,
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "c", "image": "busybox:1"}],
    }
    if claim is not None:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}, "ownerReferences": [owner]},
        "spec": spec,
    }


def volume_objects(name: str) -> list[Obj]:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": CSI_DRIVER, "volumeHandle": f"vol-{name}"},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": name,
        },
    }
    return [pv, pvc]


def pdb(name: str, labels: dict[str, str], **spec: Any) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": labels}, **spec},
    }


def held_pdb(name: str, labels: dict[str, str]) -> Obj:
    """A PDB the emulator's disruption controller leaves alone, held at 0 allowed disruptions.

    Healthy (2) below expected (3), so it is not "misconfigured": evictions are retried.
    """
    obj = pdb(name, labels, minAvailable=3)
    obj["metadata"]["annotations"] = {"emu.sim/pdb-controller": "off"}
    obj["metadata"]["generation"] = 1
    obj["status"] = {
        "observedGeneration": 1,
        "expectedPods": 3,
        "desiredHealthy": 3,
        "currentHealthy": 2,
        "disruptionsAllowed": 0,
    }
    return obj


class Informers:
    """The controller side: a client, the target informers, the hub and the drain listers."""

    def __init__(self, kubeconfig: Path, *, qps: float = 500.0, burst: int = 1000) -> None:
        self.client: ClusterClient = load_config(str(kubeconfig), qps=qps, burst=burst)
        self.stop = threading.Event()
        self.factory = SharedInformerFactory(self.client)
        self.hub = VolumeAttachmentHub()
        vas = self.factory.informer_for(VOLUME_ATTACHMENTS)
        vas.add_event_handler(
            ResourceEventHandlerFuncs(self.hub.on_add, self.hub.on_update, self.hub.on_delete)
        )
        pods = self.factory.informer_for(PODS)
        self.listers = DrainListers(
            pods=self.factory.lister(PODS),
            pdbs=self.factory.lister(POD_DISRUPTION_BUDGETS),
            pvs=self.factory.lister(PERSISTENT_VOLUMES),
            pvcs=self.factory.lister(PERSISTENT_VOLUME_CLAIMS),
            pods_synced=pods.has_synced,
        )

    def on_pod_delete(self, handler: Callable[[Obj], None]) -> None:
        def deleted(obj: Any) -> None:
            handler(getattr(obj, "obj", None) or obj)

        self.factory.informer_for(PODS).add_event_handler(ResourceEventHandlerFuncs(on_delete=deleted))

    def start(self) -> Informers:
        self.factory.start(self.stop)
        synced = self.factory.wait_for_cache_sync(self.stop, timeout=30)
        assert all(synced.values()), synced
        return self

    def close(self) -> None:
        self.stop.set()
        self.factory.shutdown(timeout=5)
        self.client.close()

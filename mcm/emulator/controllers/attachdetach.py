"""Attach/detach simulator for CSI volumes (kube-controller-manager's
attach/detach controller; off by default).

Guarantees, when :attr:`AttachDetach.enabled` is set:

- A pod bound to node N that mounts a PVC bound to a CSI PersistentVolume gets the volume
  attached: a ``VolumeAttachment`` named ``csi-<hex sha256(volumeHandle + driver + N)>`` with
  ``spec.attacher``, ``spec.nodeName``, ``spec.source.persistentVolumeName`` and
  ``status.attached: true``, and ``kubernetes.io/csi/<driver>^<volumeHandle>`` in N's
  ``status.volumesAttached`` and ``status.volumesInUse``.
- When the last pod on N using the volume is removed, after ``detach_delay`` clock seconds the
  volume is detached again: the node entries and the ``VolumeAttachment`` are removed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from mcm.emulator.errors import ApiStatusError
from mcm.emulator.store import Obj

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.store import Change

__all__ = ["AttachDetach", "CsiVolume", "attachment_name"]

log = structlog.get_logger(__name__)

PODS = "pods"
NODES = "nodes"
PVCS = "persistentvolumeclaims"
PVS = "persistentvolumes"
ATTACHMENTS = "volumeattachments.storage.k8s.io"


@dataclass(frozen=True)
class CsiVolume:
    """A CSI persistent volume as the attach/detach controller sees it."""

    pv: str
    driver: str
    handle: str

    @property
    def unique_name(self) -> str:
        return f"kubernetes.io/csi/{self.driver}^{self.handle}"


def attachment_name(volume: CsiVolume, node: str) -> str:
    """The upstream VolumeAttachment name for a volume on a node."""
    digest = hashlib.sha256(f"{volume.handle}{volume.driver}{node}".encode()).hexdigest()
    return f"csi-{digest}"


class AttachDetach:
    """Attaches the CSI volumes of scheduled pods to their nodes and detaches them afterwards."""

    def __init__(self, reactor: Reactor, scheduler: Scheduler) -> None:
        self.reactor = reactor
        self.scheduler = scheduler
        self.enabled = False
        self.detach_delay = 1.0
        reactor.add_handler(self._on_change)

    def _on_change(self, change: Change) -> None:
        if not self.enabled or change.resource != PODS:
            return
        pod = change.new.obj
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            return
        namespace, name = change.key
        if change.type == "DELETED":
            for volume in self._volumes(pod):
                self._schedule_detach(volume, node)
            return
        if not pod["metadata"].get("deletionTimestamp"):
            self.reactor.defer(("attach", namespace, name), lambda: self._attach_pod(namespace, name))

    def _schedule_detach(self, volume: CsiVolume, node: str) -> None:
        key = ("detach", volume.pv, node)
        self.scheduler.schedule(
            key, self.detach_delay, lambda: self.reactor.run(key, lambda: self._detach(volume, node))
        )

    def _volumes(self, pod: Obj) -> list[CsiVolume]:
        store = self.reactor.storage.store
        namespace = str(pod["metadata"].get("namespace", ""))
        result = []
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (
                (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if isinstance(volume, dict)
                else None
            )
            pvc = store.get(PVCS, namespace, str(claim)) if claim else None
            pv_name = ((pvc.obj.get("spec") or {}).get("volumeName") if pvc is not None else None) or ""
            pv = store.get(PVS, "", str(pv_name)) if pv_name else None
            csi = ((pv.obj.get("spec") or {}).get("csi") if pv is not None else None) or {}
            if csi.get("driver") and csi.get("volumeHandle"):
                result.append(CsiVolume(str(pv_name), str(csi["driver"]), str(csi["volumeHandle"])))
        return result

    def _attach_pod(self, namespace: str, name: str) -> None:
        stored = self.reactor.storage.store.get(PODS, namespace, name)
        if stored is None:
            return
        node = str((stored.obj.get("spec") or {}).get("nodeName") or "")
        for volume in self._volumes(stored.obj):
            self.scheduler.cancel(("detach", volume.pv, node))
            self._ensure_attachment(volume, node)
            self._update_node(node, volume, attach=True)

    def _ensure_attachment(self, volume: CsiVolume, node: str) -> None:
        storage = self.reactor.storage
        rt = storage.registry.by_storage(ATTACHMENTS)
        if rt is None:
            return
        name = attachment_name(volume, node)
        if storage.store.get(ATTACHMENTS, "", name) is None:
            body = {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttachment",
                "metadata": {"name": name},
                "spec": {
                    "attacher": volume.driver,
                    "nodeName": node,
                    "source": {"persistentVolumeName": volume.pv},
                },
            }
            storage.create(rt, body)
        current = storage.store.get(ATTACHMENTS, "", name)
        if current is not None and not (current.obj.get("status") or {}).get("attached"):
            storage.guaranteed_update(
                rt,
                "",
                name,
                lambda o: {**o, "status": {**(o.get("status") or {}), "attached": True}},
                subresource="status",
            )

    def _update_node(self, node: str, volume: CsiVolume, *, attach: bool) -> None:
        storage = self.reactor.storage
        rt = storage.registry.by_storage(NODES)
        if rt is None or storage.store.get(NODES, "", node) is None:
            return
        unique = volume.unique_name

        def change(obj: Obj) -> Obj:
            status = dict(obj.get("status") or {})
            attached = [v for v in status.get("volumesAttached") or [] if attach or v.get("name") != unique]
            in_use = [v for v in status.get("volumesInUse") or [] if attach or v != unique]
            if attach and all(v.get("name") != unique for v in attached):
                attached.append({"name": unique, "devicePath": ""})
            if attach and unique not in in_use:
                in_use.append(unique)
            status["volumesAttached"] = attached
            status["volumesInUse"] = in_use
            return {**obj, "status": status}

        try:
            storage.guaranteed_update(rt, "", node, change, subresource="status")
        except ApiStatusError as err:
            log.warning("attachdetach_node_update_failed", node=node, error=err.message)

    def _detach(self, volume: CsiVolume, node: str) -> None:
        store = self.reactor.storage.store
        for stored in store.items(PODS):
            if (stored.obj.get("spec") or {}).get("nodeName") == node and volume in self._volumes(stored.obj):
                return
        self._update_node(node, volume, attach=False)
        rt = self.reactor.storage.registry.by_storage(ATTACHMENTS)
        name = attachment_name(volume, node)
        if rt is not None and store.get(ATTACHMENTS, "", name) is not None:
            self.reactor.storage.delete(rt, "", name)

"""Pod garbage collection: pods bound to a node that no longer exists are force-deleted
(kube-controller-manager's pod garbage collector).

Guarantees: a pod whose ``spec.nodeName`` names a missing node is deleted with
``gracePeriodSeconds=0`` once ``delay`` clock seconds have passed and the node is still missing
(the upstream quarantine is 40 s; the default here is 2 s). Pods with finalizers stay
terminating until the finalizers are removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from mcm.emulator.errors import ApiStatusError
from mcm.emulator.store import Obj

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.store import Change

__all__ = ["PodGC"]

log = structlog.get_logger(__name__)

PODS = "pods"
NODES = "nodes"


class PodGC:
    """Deletes orphaned pods (their node is gone) after ``delay`` seconds."""

    def __init__(self, reactor: Reactor, scheduler: Scheduler) -> None:
        self.reactor = reactor
        self.scheduler = scheduler
        self.enabled = True
        self.delay = 2.0
        reactor.add_handler(self._on_change)

    def start(self) -> None:
        with self.reactor.storage.store.lock:
            for stored in self.reactor.storage.store.items(PODS):
                self._consider(stored.obj)

    def _on_change(self, change: Change) -> None:
        if not self.enabled:
            return
        if change.resource == PODS and change.type != "DELETED":
            self._consider(change.new.obj)
        elif change.resource == NODES and change.type == "DELETED":
            node = change.key[1]
            for stored in self.reactor.storage.store.items(PODS):
                if (stored.obj.get("spec") or {}).get("nodeName") == node:
                    self._consider(stored.obj)

    def _orphaned(self, pod: Obj) -> bool:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return False
        return self.reactor.storage.store.get(NODES, "", str(node)) is None

    def _consider(self, pod: Obj) -> None:
        if not self._orphaned(pod):
            return
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("deletionGracePeriodSeconds"):
            return
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        key = ("podgc", namespace, name)
        self.scheduler.schedule_once(
            key, self.delay, lambda: self.reactor.run(key, lambda: self._collect(namespace, name))
        )

    def _collect(self, namespace: str, name: str) -> None:
        storage = self.reactor.storage
        stored = storage.store.get(PODS, namespace, name)
        rt = storage.registry.by_storage(PODS)
        if not self.enabled or stored is None or rt is None or not self._orphaned(stored.obj):
            return
        try:
            storage.delete(rt, namespace, name, {"gracePeriodSeconds": 0})
            log.info("podgc_deleted_orphan", namespace=namespace, name=name)
        except ApiStatusError as err:
            if err.code != 404:
                log.warning("podgc_delete_failed", namespace=namespace, name=name, error=err.message)

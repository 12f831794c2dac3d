"""CRD lifecycle: serving established CRDs, and the cleanup finalizer on deletion
(apiextensions-apiserver's finalizer controller).

Guarantees:

- Serving established CRDs (routes, discovery) is the emulator's own commit hook; this
  controller only keeps the controllers' UID index in step when a CRD's data is dropped.
- A CRD with ``deletionTimestamp`` loses every custom object of its resource, each with its own
  DELETED event and regardless of the objects' finalizers; then its finalizer
  ``customresourcecleanup.apiextensions.k8s.io`` is removed, which deletes the CRD.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from mcm.emulator.crdvalidation import CLEANUP_FINALIZER
from mcm.emulator.registry import CRD_STORAGE_KEY
from mcm.emulator.store import Obj

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor
    from mcm.emulator.store import Change

__all__ = ["CrdController"]

log = structlog.get_logger(__name__)


class CrdController:
    """Serves established CRDs and runs the CRD cleanup finalizer."""

    def __init__(self, reactor: Reactor) -> None:
        self.reactor = reactor
        self.enabled = True
        reactor.add_handler(self._on_change)

    def start(self) -> None:
        """Resume cleanups of CRDs that were already being deleted."""
        storage = self.reactor.storage
        with storage.store.lock:
            for stored in storage.store.items(CRD_STORAGE_KEY):
                if stored.obj["metadata"].get("deletionTimestamp"):
                    name = str(stored.obj["metadata"]["name"])
                    self.reactor.defer(("crd-cleanup", name), lambda n=name: self._cleanup(n))  # type: ignore[misc]
            self.reactor.flush()

    def _on_change(self, change: Change) -> None:
        if change.resource != CRD_STORAGE_KEY:
            return
        crd = change.new.obj
        name = str(crd["metadata"]["name"])
        if change.type == "DELETED":
            self.reactor.index.forget_resource(_storage_key(crd))
            return
        if crd["metadata"].get("deletionTimestamp") and self.enabled:
            self.reactor.defer(("crd-cleanup", name), lambda: self._cleanup(name))

    def _cleanup(self, name: str) -> None:
        storage = self.reactor.storage
        current = storage.store.get(CRD_STORAGE_KEY, "", name)
        if current is None or not current.obj["metadata"].get("deletionTimestamp"):
            return
        crd = current.obj
        if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return
        self._delete_instances(crd)
        rt = storage.registry.by_storage(CRD_STORAGE_KEY)
        if rt is None:
            return

        def without_finalizer(obj: Obj) -> Obj:
            finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != CLEANUP_FINALIZER]
            return {**obj, "metadata": {**obj["metadata"], "finalizers": finalizers}}

        storage.guaranteed_update(rt, "", name, without_finalizer)
        log.info("crd_cleaned_up", crd=name)

    def _delete_instances(self, crd: Obj) -> None:
        key = _storage_key(crd)
        store = self.reactor.storage.store
        for stored in store.items(key):
            store.commit(key, "DELETED", stored.obj, stored)


def _storage_key(crd: Obj) -> str:
    spec = crd.get("spec") or {}
    return f"{(spec.get('names') or {}).get('plural', '')}.{spec.get('group', '')}"

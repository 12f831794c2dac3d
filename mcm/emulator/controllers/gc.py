"""Garbage collector: ownerReferences with background, foreground and orphan propagation (spec §2.14).

Guarantees:

- **Background**: when an object is removed, each dependent whose every ``ownerReferences[].uid``
  is now gone is deleted (itself with background propagation, so chains cascade). Dependents
  that still have a live owner are left alone. Dependents are only collected when an owner is
  removed; an object created with an owner that never existed is kept (deviation: the real
  collector deletes it too).
- **Foreground**: an owner being deleted with finalizer ``foregroundDeletion`` gets its dependents
  that have ``blockOwnerDeletion: true`` deleted (foreground), and keeps the finalizer until none
  of them is left; then the finalizer is removed and the owner goes. Its other dependents are
  collected in the background afterwards.
- **Orphan**: an owner being deleted with finalizer ``orphan`` has its reference removed from every
  dependent, then loses the finalizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from mcm.emulator.controllers.base import ObjectRef
from mcm.emulator.errors import ApiStatusError

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor
    from mcm.emulator.store import Change, Stored

__all__ = ["FOREGROUND", "ORPHAN", "GarbageCollector"]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _owner_uids(obj: Obj) -> list[str]:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")]


class GarbageCollector:
    """Reacts to deletions and to owners waiting on the ``orphan``/``foregroundDeletion`` finalizers."""

    def __init__(self, reactor: Reactor) -> None:
        self.reactor = reactor
        self.enabled = True
        reactor.add_handler(self._on_change)

    def _ref(self, change: Change) -> ObjectRef:
        namespace, name = change.key
        return ObjectRef(change.resource, namespace, name)

    def _on_change(self, change: Change) -> None:
        if not self.enabled:
            return
        obj = change.new.obj
        uid = str(obj["metadata"].get("uid") or "")
        if change.type == "DELETED":
            for dependent in self.reactor.index.dependents_of(uid):
                self._defer_collect(dependent)
        elif self._waiting_finalizers(obj):
            self._defer_owner(self._ref(change))
        previous = change.old.obj if change.old is not None else obj
        for owner_uid in set(_owner_uids(obj)) | set(_owner_uids(previous)):
            owner = self.reactor.index.objects.get(owner_uid)
            if owner is not None:
                self._defer_owner(owner)

    def _defer_collect(self, ref: ObjectRef) -> None:
        self.reactor.defer(("gc-collect", ref), lambda: self._collect(ref))

    def _defer_owner(self, ref: ObjectRef) -> None:
        self.reactor.defer(("gc-owner", ref), lambda: self._sync_owner(ref))

    @staticmethod
    def _waiting_finalizers(obj: Obj) -> bool:
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        return bool(meta.get("deletionTimestamp")) and (ORPHAN in finalizers or FOREGROUND in finalizers)

    def _stored(self, ref: ObjectRef) -> Stored | None:
        return self.reactor.storage.store.get(ref.resource, ref.namespace, ref.name)

    def _delete(self, ref: ObjectRef, policy: str) -> None:
        rt = self.reactor.rt(ref.resource)
        if rt is None:
            return
        try:
            self.reactor.storage.delete(rt, ref.namespace, ref.name, {"propagationPolicy": policy})
            log.info(
                "gc_deleted", resource=ref.resource, namespace=ref.namespace, name=ref.name, policy=policy
            )
        except ApiStatusError as err:
            if err.code != 404:
                log.warning("gc_delete_failed", resource=ref.resource, name=ref.name, error=err.message)

    def _collect(self, ref: ObjectRef) -> None:
        stored = self._stored(ref)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        owners = _owner_uids(stored.obj)
        if owners and all(uid not in self.reactor.index.objects for uid in owners):
            self._delete(ref, "Background")

    def _sync_owner(self, ref: ObjectRef) -> None:
        stored = self._stored(ref)
        if stored is None or not self._waiting_finalizers(stored.obj):
            return
        finalizers = stored.obj["metadata"].get("finalizers") or []
        uid = str(stored.obj["metadata"].get("uid") or "")
        if ORPHAN in finalizers:
            self._orphan_dependents(uid)
            self._remove_finalizer(ref, ORPHAN)
            return
        if FOREGROUND in finalizers and not self._blocking_dependents(uid):
            self._remove_finalizer(ref, FOREGROUND)

    def _orphan_dependents(self, uid: str) -> None:
        for dependent in self.reactor.index.dependents_of(uid):
            rt = self.reactor.rt(dependent.resource)
            if rt is None:
                continue

            def strip(obj: Obj) -> Obj:
                refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                meta = {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}
                if refs:
                    meta["ownerReferences"] = refs
                return {**obj, "metadata": meta}

            try:
                self.reactor.storage.guaranteed_update(rt, dependent.namespace, dependent.name, strip)
            except ApiStatusError as err:
                if err.code != 404:
                    log.warning("gc_orphan_failed", name=dependent.name, error=err.message)

    def _blocking_dependents(self, uid: str) -> list[ObjectRef]:
        """Dependents that block the owner; those not yet deleting are deleted (foreground)."""
        blocking = []
        for dependent in self.reactor.index.dependents_of(uid):
            stored = self._stored(dependent)
            if stored is None:
                continue
            refs = stored.obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == uid and r.get("blockOwnerDeletion") is True for r in refs):
                continue
            blocking.append(dependent)
            if not stored.obj["metadata"].get("deletionTimestamp"):
                self._delete(dependent, "Foreground")
        return [d for d in blocking if self._stored(d) is not None]

    def _remove_finalizer(self, ref: ObjectRef, finalizer: str) -> None:
        rt = self.reactor.rt(ref.resource)
        if rt is None:
            return

        def without(obj: Obj) -> Obj:
            remaining = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
            return {**obj, "metadata": {**obj["metadata"], "finalizers": remaining}}

        try:
            self.reactor.storage.guaranteed_update(rt, ref.namespace, ref.name, without)
        except ApiStatusError as err:
            if err.code != 404:
                log.warning("gc_finalizer_removal_failed", name=ref.name, error=err.message)

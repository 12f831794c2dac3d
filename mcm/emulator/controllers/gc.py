"""Garbage collector: ownerReferences with background, foreground and orphan propagation
(kube-controller-manager's garbage collector).

Modelled on kube-controller-manager's collector (``pkg/controller/garbagecollector``).

Guarantees:

- **Owner lookup**: an owner reference is looked up by key — its apiVersion and kind, its name,
  in the dependent's namespace (cluster-wide for a cluster-scoped kind) — and the UIDs compared.
  It is *solid* when that object exists with the reference's UID, *waiting* when that owner is
  being deleted in the foreground, *dangling* when there is no such object or it has another UID.
  A reference that cannot be looked up (its kind or version is not served, or a cluster-scoped
  object names a namespaced owner) leaves its object alone, as the real collector does while it
  cannot map the kind.
- **Collection** (upstream ``attemptToDeleteItem``): an object with a solid owner is kept and
  loses its dangling and waiting references (one update); an object without one is deleted — in
  the foreground when an owner is waiting and the object has dependents of its own, else with the
  propagation its ``orphan``/``foregroundDeletion`` finalizer asks for, else in the background,
  so chains cascade. Objects being deleted are left to finish.
- An object is checked when one of its owners is removed, and when a create or update adds an
  owner reference that does not resolve to a live owner (upstream's "virtual" owner node): a
  dependent made for an owner that is already gone, or never existed, is deleted. The check costs
  one key lookup per added reference; nothing is scanned.
- **Foreground**: an owner being deleted with finalizer ``foregroundDeletion`` has each dependent
  that blocks it (``blockOwnerDeletion: true``) collected as above, and keeps the finalizer until
  none blocks it any more; then the finalizer is removed and the owner goes. Its other
  dependents are collected in the background afterwards.
- **Orphan**: an owner being deleted with finalizer ``orphan`` has its reference removed from every
  dependent, then loses the finalizer.
- Every effect is an ordinary write through the storage, so watchers see normal events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from mcm.emulator.controllers.base import ObjectRef
from mcm.emulator.errors import ApiStatusError
from mcm.emulator.store import Obj

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor
    from mcm.emulator.store import Change, Stored

__all__ = ["FOREGROUND", "ORPHAN", "GarbageCollector"]

log = structlog.get_logger(__name__)

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
SOLID, WAITING, DANGLING = "solid", "waiting", "dangling"


def _owner_refs(obj: Obj) -> list[Obj]:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, dict) and r.get("uid")]


def _owner_uids(obj: Obj) -> list[str]:
    return [str(r["uid"]) for r in _owner_refs(obj)]


def _added_refs(change: Change) -> list[Obj]:
    """The owner references a create or update adds (by UID, as upstream's graph builder diffs)."""
    refs = _owner_refs(change.new.obj)
    if change.old is None or not refs:
        return refs
    before = set(_owner_uids(change.old.obj))
    return [r for r in refs if str(r["uid"]) not in before]


@dataclass
class OwnerStates:
    """An object's owner UIDs sorted by what the live lookup found."""

    solid: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)


class GarbageCollector:
    """Collects dependents whose owners are gone and serves the ``orphan``/``foregroundDeletion``
    finalizers of owners being deleted."""

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
        else:
            if self._waiting_finalizers(obj):
                self._defer_owner(self._ref(change))
            if self._adds_dangling_owner(change):
                self._defer_collect(self._ref(change))
        previous = change.old.obj if change.old is not None else obj
        for owner_uid in set(_owner_uids(obj)) | set(_owner_uids(previous)):
            owner = self.reactor.index.objects.get(owner_uid)
            if owner is not None:
                self._defer_owner(owner)

    def _adds_dangling_owner(self, change: Change) -> bool:
        if change.new.obj["metadata"].get("deletionTimestamp"):
            return False
        namespace = change.key[0]
        return any(self._owner_state(ref, namespace) == DANGLING for ref in _added_refs(change))

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

    # ------------------------------------------------------------------ owner lookup

    def _owner_location(self, owner: Obj, namespace: str) -> ObjectRef | None:
        """Where the owner a reference names is stored; None when it cannot be looked up."""
        group, _, version = str(owner.get("apiVersion") or "").rpartition("/")
        registry = self.reactor.storage.registry
        rt = registry.by_kind(group, str(owner.get("kind") or ""))
        if rt is None or registry.lookup(group, version, rt.resource) is None:
            return None
        if rt.namespaced and not namespace:
            return None
        return ObjectRef(rt.storage_key, namespace if rt.namespaced else "", str(owner.get("name") or ""))

    def _owner_state(self, owner: Obj, namespace: str) -> str | None:
        """SOLID, WAITING or DANGLING by a lookup of the named owner; None when there is none to do."""
        where = self._owner_location(owner, namespace)
        if where is None:
            return None
        stored = self._stored(where)
        if stored is None or str(stored.obj["metadata"].get("uid") or "") != str(owner["uid"]):
            return DANGLING
        meta = stored.obj["metadata"]
        if meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or []):
            return WAITING
        return SOLID

    def _classify(self, obj: Obj, namespace: str) -> OwnerStates | None:
        """Every owner reference of ``obj`` looked up; None when one of them cannot be."""
        states = OwnerStates()
        for owner in _owner_refs(obj):
            state = self._owner_state(owner, namespace)
            if state is None:
                return None
            getattr(states, state).append(str(owner["uid"]))
        return states

    # ------------------------------------------------------------------ collection

    def _collect(self, ref: ObjectRef) -> None:
        """Upstream's ``attemptToDeleteItem`` for one object: keep, trim its references, or delete."""
        stored = self._stored(ref)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        states = self._classify(stored.obj, ref.namespace)
        if states is None:
            return
        if states.solid:
            if states.dangling or states.waiting:
                self._remove_owner_refs(ref, {*states.dangling, *states.waiting})
            return
        if not (states.waiting or states.dangling):
            return
        uid = str(stored.obj["metadata"].get("uid") or "")
        if states.waiting and self.reactor.index.dependents.get(uid):
            self._delete(ref, "Foreground")
        else:
            self._delete(ref, self._propagation(stored.obj))

    @staticmethod
    def _propagation(obj: Obj) -> str:
        """The policy an object's own finalizers ask for (upstream honours them), else Background."""
        finalizers = obj["metadata"].get("finalizers") or []
        if ORPHAN in finalizers:
            return "Orphan"
        if FOREGROUND in finalizers:
            return "Foreground"
        return "Background"

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

    def _remove_owner_refs(self, ref: ObjectRef, uids: set[str]) -> None:
        """Drop the references to ``uids`` from one object (the key goes when none is left)."""
        rt = self.reactor.rt(ref.resource)
        if rt is None:
            return

        def strip(obj: Obj) -> Obj:
            refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") not in uids]
            meta = {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}
            if refs:
                meta["ownerReferences"] = refs
            return {**obj, "metadata": meta}

        try:
            self.reactor.storage.guaranteed_update(rt, ref.namespace, ref.name, strip)
            log.info(
                "gc_removed_owner_references", resource=ref.resource, namespace=ref.namespace, name=ref.name
            )
        except ApiStatusError as err:
            if err.code != 404:
                log.warning("gc_owner_reference_removal_failed", name=ref.name, error=err.message)

    # ------------------------------------------------------------------ owners being deleted

    def _sync_owner(self, ref: ObjectRef) -> None:
        stored = self._stored(ref)
        if stored is None or not self._waiting_finalizers(stored.obj):
            return
        finalizers = stored.obj["metadata"].get("finalizers") or []
        uid = str(stored.obj["metadata"].get("uid") or "")
        if ORPHAN in finalizers:
            for dependent in self.reactor.index.dependents_of(uid):
                self._remove_owner_refs(dependent, {uid})
            self._remove_finalizer(ref, ORPHAN)
            return
        if FOREGROUND in finalizers and not self._blocking_dependents(uid):
            self._remove_finalizer(ref, FOREGROUND)

    def _blocks(self, dependent: ObjectRef, uid: str) -> bool:
        stored = self._stored(dependent)
        return stored is not None and any(
            r.get("uid") == uid and r.get("blockOwnerDeletion") is True for r in _owner_refs(stored.obj)
        )

    def _blocking_dependents(self, uid: str) -> list[ObjectRef]:
        """Dependents that still block the owner after each was collected (upstream's
        ``processDeletingDependentsItem``): deleted, or kept without the reference."""
        blocking = [d for d in self.reactor.index.dependents_of(uid) if self._blocks(d, uid)]
        for dependent in blocking:
            self._collect(dependent)
        return [d for d in blocking if self._blocks(d, uid)]

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

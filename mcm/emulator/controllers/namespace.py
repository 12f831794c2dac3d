"""Namespace lifecycle: the default namespaces, and finalization of deleted namespaces
(kube-controller-manager's namespace controller).

Guarantees:

- :meth:`NamespaceController.ensure_defaults` creates ``default``, ``kube-system``,
  ``kube-public`` and ``kube-node-lease`` if they are missing.
- A namespace with ``deletionTimestamp`` has every namespaced object in it deleted through the
  normal delete path (so finalizers and graceful pod deletion are honoured). Once it is empty,
  its ``spec.finalizers`` are emptied (the ``finalize`` subresource) and it is removed, unless
  ``metadata.finalizers`` keep it. Work resumes whenever something in the namespace changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from mcm.emulator.errors import ApiStatusError
from mcm.emulator.store import Obj

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor
    from mcm.emulator.registry import ResourceType
    from mcm.emulator.store import Change

__all__ = ["DEFAULT_NAMESPACES", "NamespaceController"]

log = structlog.get_logger(__name__)

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NAMESPACES = "namespaces"


class NamespaceController:
    """Deletes the content of terminating namespaces, then the namespaces themselves."""

    def __init__(self, reactor: Reactor) -> None:
        self.reactor = reactor
        self.enabled = True
        reactor.add_handler(self._on_change)

    def ensure_defaults(self) -> None:
        storage = self.reactor.storage
        rt = storage.registry.resource("", NAMESPACES)
        if rt is None:
            return
        for name in DEFAULT_NAMESPACES:
            if storage.get(rt, "", name) is None:
                try:
                    storage.create(rt, {"metadata": {"name": name}})
                except ApiStatusError as err:
                    if err.code != 409:
                        raise

    def start(self) -> None:
        self.ensure_defaults()
        storage = self.reactor.storage
        with storage.store.lock:
            for stored in storage.store.items(NAMESPACES):
                if stored.obj["metadata"].get("deletionTimestamp"):
                    self._enqueue(str(stored.obj["metadata"]["name"]))
            self.reactor.flush()

    def _on_change(self, change: Change) -> None:
        if not self.enabled:
            return
        meta = change.new.obj["metadata"]
        if change.resource == NAMESPACES:
            if change.type != "DELETED" and meta.get("deletionTimestamp"):
                self._enqueue(str(meta["name"]))
            return
        namespace = meta.get("namespace")
        if not namespace:
            return
        stored = self.reactor.storage.store.get(NAMESPACES, "", str(namespace))
        if stored is not None and stored.obj["metadata"].get("deletionTimestamp"):
            self._enqueue(str(namespace))

    def _enqueue(self, name: str) -> None:
        self.reactor.defer(("namespace", name), lambda: self._sync(name))

    def _namespaced_types(self) -> list[ResourceType]:
        seen: set[str] = set()
        result = []
        for rt in self.reactor.storage.registry.all():
            if rt.namespaced and rt.storage_key not in seen:
                seen.add(rt.storage_key)
                result.append(rt)
        return result

    def _sync(self, name: str) -> None:
        storage = self.reactor.storage
        current = storage.store.get(NAMESPACES, "", name)
        if current is None or not current.obj["metadata"].get("deletionTimestamp"):
            return
        types = self._namespaced_types()
        for rt in types:
            for stored in storage.store.items(rt.storage_key, name):
                if not stored.obj["metadata"].get("deletionTimestamp"):
                    self._delete(rt, name, str(stored.obj["metadata"]["name"]))
        if not any(storage.store.items(rt.storage_key, name) for rt in types):
            self._finalize(name)

    def _delete(self, rt: ResourceType, namespace: str, name: str) -> None:
        try:
            self.reactor.storage.delete(rt, namespace, name, {"propagationPolicy": "Background"})
        except ApiStatusError as err:
            if err.code != 404:
                log.warning(
                    "namespace_content_delete_failed", namespace=namespace, name=name, error=err.message
                )

    def _finalize(self, name: str) -> None:
        storage = self.reactor.storage
        rt = storage.registry.resource("", NAMESPACES)
        current = storage.store.get(NAMESPACES, "", name)
        if rt is None or current is None:
            return
        if (current.obj.get("spec") or {}).get("finalizers"):

            def finalized(obj: Obj) -> Obj:
                return {**obj, "spec": {**(obj.get("spec") or {}), "finalizers": []}}

            storage.guaranteed_update(rt, "", name, finalized, subresource="finalize")
        current = storage.store.get(NAMESPACES, "", name)
        if current is not None and not current.obj["metadata"].get("finalizers"):
            storage.delete(rt, "", name)
            log.info("namespace_finalized", namespace=name)

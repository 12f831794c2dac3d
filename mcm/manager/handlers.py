"""Informer event handlers of the manager: which change puts which key into which queue
(upstream v0.47.0 ``pkg/controller/machineset.go``, ``deployment.go`` and ``controller.go``).

Handlers only enqueue and note expectations: they read the caches and never call the API
server (upstream resolved a MachineSet's deployment with a live GET from its handlers). Delete
handlers accept tombstones. Keys are ``namespace/name``; the overshoot queue has the single key
``""``.

- Machine added: its MachineSet (creation observed) or, for an orphan, every MachineSet whose
  non-empty selector matches; the overshoot check. Updated (new resourceVersion): its old and
  new MachineSet, or the matching ones when an orphan's labels changed; a machine being
  deleted counts as a deletion. Deleted: its MachineSet (deletion observed) *and* that set's
  MachineDeployment (upstream v0.47.0 bound this to a handler that ignored machines, so a
  deployment never heard of deleted machines).
- MachineSet added or deleted: itself and its deployment (or, for an orphan, every deployment
  whose non-empty selector matches). Updated: itself unless only its status changed (its own
  status writes no longer wake it); its old and new deployment on every change (a status
  change moves the deployment's roll-out).
- MachineDeployment added or deleted: itself. Updated: itself unless only its status changed;
  a change of its ``freeze`` label also wakes its MachineSets, which may create again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcm.manager import constants as k
from mcm.manager.context import Deps
from mcm.manager.owners import controller_of, label_map, matches, selector_of
from mcm.runtime import objects as o
from mcm.runtime.cache.keys import DeletedFinalStateUnknown

__all__ = ["MACHINE_DEPLOYMENT_QUEUE", "MACHINE_SET_QUEUE", "OVERSHOOTING_QUEUE", "EventHandlers"]

MACHINE_SET_QUEUE = "machineset"
MACHINE_DEPLOYMENT_QUEUE = "machinedeployment"
OVERSHOOTING_QUEUE = "machinesafetyovershooting"

Obj = Mapping[str, Any]


def _unwrap(obj: Any) -> Obj | None:
    if isinstance(obj, DeletedFinalStateUnknown):
        obj = obj.obj
    return obj if isinstance(obj, Mapping) else None


def _key(obj: Obj) -> str:
    return f"{o.namespace_of(obj)}/{o.name_of(obj)}"


def _rv(obj: Obj) -> object:
    return o.meta(obj).get("resourceVersion")


def _status_only(old: Obj, new: Obj) -> bool:
    """A write that changed nothing but the status (a resync has an unchanged resourceVersion)."""
    if _rv(old) == _rv(new):
        return False
    old_meta, new_meta = o.meta(old), o.meta(new)
    fields = ("generation", "labels", "annotations", "finalizers", "deletionTimestamp", "ownerReferences")
    return all(old_meta.get(f) == new_meta.get(f) for f in fields) and old.get("spec") == new.get("spec")


class EventHandlers:
    """Handlers bound to the manager's queues; see the module docstring.

    Threads: each method runs on the listener thread the informer starts for its registration,
    never on a worker. What a handler must not do: call the API server, wait on anything, or
    change the object it is given (the cache's); it reads the caches, notes expectations and
    enqueues keys.
    """

    def __init__(self, deps: Deps, enqueue: Callable[[str, str, float], None]) -> None:
        self.deps = deps
        self._enqueue = enqueue

    def _add(self, queue: str, obj: Obj) -> None:
        self._enqueue(queue, _key(obj), 0.0)

    # --- owner lookups in the caches ----------------------------------------------------------

    def _owner(self, obj: Obj, kind: str) -> Obj | None:
        ref = controller_of(obj)
        if ref is None:
            return None
        return self._resolve(ref, kind)

    def _resolve(self, ref: Mapping[str, Any], kind: str) -> Obj | None:
        if ref.get("kind") != kind:
            return None
        cache = self.deps.machine_sets if kind == k.KIND_MACHINE_SET else self.deps.machine_deployments
        owner = cache.get(str(ref.get("name", "")))
        return owner if owner is not None and o.meta(owner).get("uid") == ref.get("uid") else None

    def _selecting(self, obj: Obj, owners: list[Obj]) -> list[Obj]:
        if not o.labels_of(obj):
            return []
        found = []
        for owner in owners:
            selector = selector_of(owner)
            if selector is not None and not selector.empty() and matches(selector, obj):
                found.append(owner)
        return found

    # --- Machines ---------------------------------------------------------------------------------

    def machine_added(self, obj: Any) -> None:
        """Machine added. Machine informer's listener thread; only reads the caches and enqueues."""
        machine = _unwrap(obj)
        if machine is None:
            return
        self._enqueue(OVERSHOOTING_QUEUE, "", 0.0)
        if o.deletion_timestamp(machine):
            self._machine_gone(machine)
            return
        if controller_of(machine) is not None:
            machine_set = self._owner(machine, k.KIND_MACHINE_SET)
            if machine_set is not None:
                self.deps.expectations.creation_observed(_key(machine_set))
                self._add(MACHINE_SET_QUEUE, machine_set)
            return
        for machine_set in self._selecting(machine, self.deps.machine_sets.list()):
            self._add(MACHINE_SET_QUEUE, machine_set)

    def machine_updated(self, old: Any, new: Any) -> None:
        """Machine updated. Machine informer's listener thread; only reads the caches and enqueues."""
        if not isinstance(old, Mapping) or not isinstance(new, Mapping) or _rv(old) == _rv(new):
            return
        labels_changed = label_map(old) != label_map(new)
        if o.deletion_timestamp(new):
            self._machine_gone(new)
            if labels_changed:
                self._machine_gone(old)
            return
        old_ref, new_ref = controller_of(old), controller_of(new)
        if old_ref != new_ref and old_ref is not None:
            previous = self._resolve(old_ref, k.KIND_MACHINE_SET)
            if previous is not None:
                self._add(MACHINE_SET_QUEUE, previous)
        if new_ref is not None:
            machine_set = self._resolve(new_ref, k.KIND_MACHINE_SET)
            if machine_set is not None:
                self._add(MACHINE_SET_QUEUE, machine_set)
            return
        if labels_changed or old_ref != new_ref:
            for machine_set in self._selecting(new, self.deps.machine_sets.list()):
                self._add(MACHINE_SET_QUEUE, machine_set)

    def _machine_gone(self, machine: Obj) -> Obj | None:
        machine_set = self._owner(machine, k.KIND_MACHINE_SET)
        if machine_set is None:
            return None
        self.deps.expectations.deletion_observed(_key(machine_set), _key(machine))
        self._add(MACHINE_SET_QUEUE, machine_set)
        return machine_set

    def machine_deleted(self, obj: Any) -> None:
        """Machine deleted (or its tombstone). Machine informer's listener thread; only reads the
        caches and enqueues."""
        machine = _unwrap(obj)
        if machine is None:
            return
        machine_set = self._machine_gone(machine)
        deployment = self._owner(machine_set, k.KIND_MACHINE_DEPLOYMENT) if machine_set is not None else None
        if deployment is not None:
            self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)

    # --- MachineSets ------------------------------------------------------------------------------

    def machine_set_added(self, obj: Any) -> None:
        """MachineSet added. MachineSet informer's listener thread; only reads the caches and enqueues."""
        machine_set = _unwrap(obj)
        if machine_set is None:
            return
        self._add(MACHINE_SET_QUEUE, machine_set)
        self._wake_deployments(machine_set)

    def machine_set_updated(self, old: Any, new: Any) -> None:
        """MachineSet updated. MachineSet informer's listener thread; only reads the caches and
        enqueues."""
        if not isinstance(old, Mapping) or not isinstance(new, Mapping):
            return
        if not _status_only(old, new):
            self._add(MACHINE_SET_QUEUE, new)
        if _rv(old) == _rv(new):
            return
        old_ref, new_ref = controller_of(old), controller_of(new)
        if old_ref != new_ref and old_ref is not None:
            previous = self._resolve(old_ref, k.KIND_MACHINE_DEPLOYMENT)
            if previous is not None:
                self._add(MACHINE_DEPLOYMENT_QUEUE, previous)
        if new_ref is not None:
            deployment = self._resolve(new_ref, k.KIND_MACHINE_DEPLOYMENT)
            if deployment is not None:
                self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)
            return
        if label_map(old) != label_map(new) or old_ref != new_ref:
            for deployment in self._selecting(new, self.deps.machine_deployments.list()):
                self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)

    def machine_set_deleted(self, obj: Any) -> None:
        """MachineSet deleted (or its tombstone). MachineSet informer's listener thread; only reads
        the caches and enqueues."""
        machine_set = _unwrap(obj)
        if machine_set is None:
            return
        self._add(MACHINE_SET_QUEUE, machine_set)
        deployment = self._owner(machine_set, k.KIND_MACHINE_DEPLOYMENT)
        if deployment is not None:
            self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)

    def _wake_deployments(self, machine_set: Obj) -> None:
        if controller_of(machine_set) is not None:
            deployment = self._owner(machine_set, k.KIND_MACHINE_DEPLOYMENT)
            if deployment is not None:
                self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)
            return
        for deployment in self._selecting(machine_set, self.deps.machine_deployments.list()):
            self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)

    # --- MachineDeployments ----------------------------------------------------------------------

    def machine_deployment_added_or_deleted(self, obj: Any) -> None:
        """MachineDeployment added or deleted. MachineDeployment informer's listener thread; only
        enqueues."""
        deployment = _unwrap(obj)
        if deployment is not None:
            self._add(MACHINE_DEPLOYMENT_QUEUE, deployment)

    def machine_deployment_updated(self, old: Any, new: Any) -> None:
        """MachineDeployment updated. MachineDeployment informer's listener thread; only reads the
        caches and enqueues."""
        if not isinstance(old, Mapping) or not isinstance(new, Mapping):
            return
        if not _status_only(old, new):
            self._add(MACHINE_DEPLOYMENT_QUEUE, new)
        if o.label(old, k.LABEL_FREEZE) != o.label(new, k.LABEL_FREEZE):
            for machine_set in self.deps.machine_sets.controlled_by(o.meta(new).get("uid", "")):
                self._add(MACHINE_SET_QUEUE, machine_set)

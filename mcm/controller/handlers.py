"""Informer event handlers: which change puts which key into which queue (upstream
``NewController``'s handlers, as at HEAD).

One key spelling per kind: ``ns/name`` for Machines, MachineClasses and Secrets, the bare name
for Nodes. Delete handlers accept tombstones (:class:`DeletedFinalStateUnknown`) everywhere.
HEAD rules: Machine updates that do not change ``metadata.generation`` (status-only writes) are
ignored unless the preserve annotation changed; deleting machines go to ``machinetermination``;
Node events feed the ``node`` queue and, for relevant changes, the machine's queue.

Handlers only enqueue: they read the informer caches and never call an API server or a driver
(upstream deletes a Machine from its Node handlers; mcm leaves that to the node queue, whose
worker retries a failed request). A deleted Node is enqueued as
:func:`~mcm.controller.node.deleted_node_key`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller.context import Deps
from mcm.controller.health import conditions_changed
from mcm.controller.node import (
    NODE_FINALIZER_GRACE,
    MultipleMachines,
    deleted_node_key,
    is_not_managed,
    machine_for_node,
)
from mcm.driver import Code
from mcm.runtime import objects as o
from mcm.runtime.cache.keys import DeletedFinalStateUnknown
from mcm.runtime.cache.mutation_cache import MutationCache

__all__ = ["ORPHAN_SCAN_COALESCE_PERIOD", "Enqueue", "EventHandlers"]

log = structlog.get_logger(__name__)

ORPHAN_SCAN_COALESCE_PERIOD = 1.0
"""Seconds between a machine deletion (or an ``OutOfRange`` operation) and the orphan-VM scan it
triggers. The delaying queue keeps one pending key, so a burst of deletions costs one scan per
period instead of one full scan of every class per deletion (upstream enqueues at once)."""

Enqueue = Callable[[str, str, float], None]
"""``enqueue(queue_name, key, after)``."""

_IN_PLACE_LABELS = (c.LABEL_CANDIDATE_FOR_UPDATE, c.LABEL_SELECTED_FOR_UPDATE)


def _unwrap(obj: Any) -> Mapping[str, Any] | None:
    if isinstance(obj, DeletedFinalStateUnknown):
        obj = obj.obj
    return obj if isinstance(obj, Mapping) else None


def _key(obj: Mapping[str, Any]) -> str:
    return f"{o.namespace_of(obj)}/{o.name_of(obj)}"


class EventHandlers:
    """Handlers bound to one controller's queues (``enqueue``) and :class:`Deps`.

    Threads: the controller registers them inline (``mcm.runtime.cache.processor_listener``), so
    each method runs on the thread of the informer it was registered with, right after that
    informer updated its cache: events in order, never on a worker. What every handler must not
    do: call an API server or a driver, sleep or wait on a lock another thread holds across a call
    (it would stall every later event of that informer, for every handler), add or remove an
    informer's handlers, mutate the object it is given (it is the cache's), or write to
    :class:`Deps` state; it reads the caches and enqueues keys. An exception is reported by the
    informer and the next event is still delivered.
    """

    def __init__(
        self,
        deps: Deps,
        enqueue: Enqueue,
        mutations: MutationCache | None = None,
        node_mutations: MutationCache | None = None,
    ) -> None:
        self.deps = deps
        self.enqueue = enqueue
        self.mutations = mutations
        """The cache of the controller's Machine writes: told what the informer delivered, so it
        drops the writes the informer has caught up with (its one exception to "only enqueue")."""
        self.node_mutations = node_mutations
        """The same for the controller's Node writes."""

    def _class_key(self, name: str) -> str:
        return f"{self.deps.namespace}/{name}"

    # --- Secrets and MachineClasses -----------------------------------------------------------

    def secret_event(self, obj: Any) -> None:
        """Secret added or deleted: enqueue it. Secret informer's thread; only enqueues."""
        secret = _unwrap(obj)
        if secret is not None:
            self.enqueue("secret", _key(secret), 0.0)

    def _class_secret_refs(self, machine_class: Mapping[str, Any]) -> list[str]:
        refs = []
        for field in ("secretRef", "credentialsSecretRef"):
            ref = o.sub(machine_class, field)
            if ref.get("name"):
                refs.append(f"{ref.get('namespace') or self.deps.namespace}/{ref['name']}")
        return refs if o.sub(machine_class, "secretRef") else []

    def class_added_or_deleted(self, obj: Any) -> None:
        """MachineClass added or deleted: enqueue it and its Secrets. MachineClass informer's
        thread; only reads the object and enqueues."""
        machine_class = _unwrap(obj)
        if machine_class is None:
            return
        self.enqueue("machineclass", _key(machine_class), 0.0)
        for ref in self._class_secret_refs(machine_class):
            self.enqueue("secret", ref, 0.0)

    def class_updated(self, old: Any, new: Any) -> None:
        """MachineClass updated: enqueue it and the Secrets it stopped or started referring to.
        MachineClass informer's thread; only reads the objects and enqueues."""
        self.enqueue("machineclass", _key(new), 0.0)
        old_refs, new_refs = self._class_secret_refs(old), self._class_secret_refs(new)
        for ref in set(old_refs) ^ set(new_refs):
            self.enqueue("secret", ref, 0.0)

    # --- Machines -----------------------------------------------------------------------------

    def _route_machine(self, machine: Mapping[str, Any]) -> None:
        queue = "machinetermination" if o.deletion_timestamp(machine) else "machine"
        self.enqueue(queue, _key(machine), 0.0)

    def machine_added(self, obj: Any) -> None:
        """Machine added: its queue (termination when deleting) and its class. Machine
        informer's thread; only reads the object and enqueues."""
        machine = _unwrap(obj)
        if machine is None:
            return
        self._route_machine(machine)
        self._enqueue_class_of(machine)

    def machine_updated(self, old: Any, new: Any) -> None:
        """Machine updated: re-queued when spec, metadata or deletion changed; an ``OutOfRange``
        operation schedules an orphan scan. Machine informer's thread; only reads the
        objects and enqueues (and lets the mutation cache drop what ``new`` caught up with)."""
        if not isinstance(old, Mapping) or not isinstance(new, Mapping):
            return
        if self.mutations is not None:
            self.mutations.observe(new)
        old_desc = o.text(old, "status", "lastOperation", "description")
        new_desc = o.text(new, "status", "lastOperation", "description")
        out_of_range = Code.OutOfRange.name
        if out_of_range not in old_desc and out_of_range in new_desc:
            self.enqueue("machinesafetyorphanvms", "", ORPHAN_SCAN_COALESCE_PERIOD)
        if self._spec_or_metadata_changed(old, new):
            self._route_machine(new)

    @staticmethod
    def _spec_or_metadata_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        if o.meta(old).get("generation") != o.meta(new).get("generation"):
            return True
        if o.deletion_timestamp(old) != o.deletion_timestamp(new):
            return True
        preserve = c.ANNOTATION_PRESERVE
        return o.annotation(old, preserve) != o.annotation(new, preserve)

    def machine_deleted(self, obj: Any) -> None:
        """Machine deleted (or its tombstone): termination queue, its class, an orphan scan.
        Machine informer's thread; only reads the object and enqueues."""
        machine = _unwrap(obj)
        if self.mutations is not None:
            self.mutations.forget(obj)
        self.enqueue("machinesafetyorphanvms", "", ORPHAN_SCAN_COALESCE_PERIOD)
        if machine is None:
            return
        self.enqueue("machinetermination", _key(machine), 0.0)
        self._enqueue_class_of(machine)

    def _enqueue_class_of(self, machine: Mapping[str, Any]) -> None:
        if o.text(machine, "spec", "class", "kind") == c.MACHINE_CLASS_KIND:
            name = o.text(machine, "spec", "class", "name")
            if name:
                self.enqueue("machineclass", self._class_key(name), 0.0)

    # --- Nodes --------------------------------------------------------------------------------

    def node_added(self, obj: Any) -> None:
        """Node added, unless it is not managed: its Machine's queue when the Node's conditions
        differ from the Machine's (upstream v0.47.0 ``addNodeToMachine``; the machine's
        reconcile then writes the node template, which carries the node finalizer), and the
        node queue, which looks at the finalizer once the grace is over; a Node that is deleting,
        that has no such Machine, or that arrives while the controller is frozen goes to the node
        queue at once (HEAD ``addNode``). Node informer's thread; only reads the Machine cache
        (an index lookup) and enqueues."""
        node = _unwrap(obj)
        if node is None or is_not_managed(node):
            return
        machine = None if o.deletion_timestamp(node) or self.deps.frozen() else self._machine_of(node)
        if machine is None or not _conditions_news(machine, node):
            self.enqueue("node", o.name_of(node), 0.0)
            return
        self._route_machine(machine)
        self.enqueue("node", o.name_of(node), NODE_FINALIZER_GRACE)

    def _machine_of(self, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
        try:
            return machine_for_node(self.deps, o.name_of(node))
        except MultipleMachines as err:
            log.error("node_machine_lookup_failed", node=o.name_of(node), error=str(err))
            return None

    def node_updated(self, old: Any, new: Any) -> None:
        """Node updated: the node queue (deleting, or its finalizer missing) and, for a relevant
        change, its Machine's queue. Node informer's thread; reads the Machine cache
        (an index lookup) and enqueues, never calls the API (it lets the node mutation cache drop
        what ``new`` caught up with)."""
        if self.node_mutations is not None:
            self.node_mutations.observe(new)
        if not isinstance(old, Mapping) or not isinstance(new, Mapping) or is_not_managed(new):
            return
        machine = self._machine_of(new)
        if machine is None:
            return
        if o.deletion_timestamp(new):
            self.enqueue("node", o.name_of(new), 0.0)
            return
        if c.NODE_FINALIZER not in o.finalizers(new):
            self.enqueue("node", o.name_of(new), 0.0)
        if self._relevant_node_change(old, new, machine):
            self._route_machine(machine)

    @staticmethod
    def _relevant_node_change(
        old: Mapping[str, Any], new: Mapping[str, Any], machine: Mapping[str, Any]
    ) -> bool:
        if _has_taint(old, c.TAINT_CRITICAL_COMPONENTS_NOT_READY) != _has_taint(
            new, c.TAINT_CRITICAL_COMPONENTS_NOT_READY
        ):
            return True
        old_labels, new_labels = o.labels_of(old), o.labels_of(new)
        if any(key in new_labels and key not in old_labels for key in _IN_PLACE_LABELS):
            return True
        if old_labels.get(c.LABEL_UPDATE_RESULT) != new_labels.get(c.LABEL_UPDATE_RESULT):
            return True
        if _conditions_news(machine, new):
            return True
        return o.annotation(old, c.ANNOTATION_PRESERVE) != o.annotation(new, c.ANNOTATION_PRESERVE)

    def node_deleted(self, obj: Any) -> None:
        """Node deleted (or its tombstone): its deleted-node key, carrying the Node's providerID,
        on the node queue, whose worker deletes the Machine unless that providerID is another
        VM's. Node informer's thread; never deletes anything itself."""
        if self.node_mutations is not None:
            self.node_mutations.forget(obj)
        node = _unwrap(obj)
        if node is None or is_not_managed(node):
            return
        if self._machine_of(node) is not None:
            provider_id = o.text(node, "spec", "providerID")
            self.enqueue("node", deleted_node_key(o.name_of(node), provider_id), 0.0)


def _conditions_news(machine: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The Node's conditions differ from those the Machine holds, and the Machine is neither in
    CrashLoopBackOff nor Terminating (HEAD ``updateNode``'s condition rule)."""
    phase = o.text(machine, "status", "currentStatus", "phase")
    if phase in (c.PHASE_CRASH_LOOP_BACK_OFF, c.PHASE_TERMINATING):
        return False
    return conditions_changed(o.conditions(machine), o.conditions(node))


def _has_taint(node: Mapping[str, Any], key: str) -> bool:
    taints = o.sub(node, "spec").get("taints")
    return isinstance(taints, list) and any(isinstance(t, Mapping) and t.get("key") == key for t in taints)

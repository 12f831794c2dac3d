"""The node loop (upstream HEAD ``node.go``): node finalizer and Node → Machine.

- ``reconcile_node_key`` (queue ``node``): a Node of a non-deleting machine gets the node
  finalizer (merge patch of the sorted set, carrying the cached ``resourceVersion`` so a stale
  copy is refused instead of dropping another writer's finalizer). The finalizer of a Node
  younger than :data:`NODE_FINALIZER_GRACE` is left to the machine's reconcile, which is
  enqueued: its node-template write carries the finalizer (``nodesync``), so a new Node costs
  one write, not two; past the grace the node loop patches it in. A deleting Node triggers
  deletion of its Machine. The key :func:`deleted_node_key` (``deleted/<name>/<providerID>``; a
  Node name never holds a ``/``) says the informer saw the Node deleted, and with which
  ``spec.providerID`` (from the deleted object or its tombstone): its Machine is deleted unless
  a Node of that name is back in the cache, or that providerID is not the machine's.
- ``machine_for_node``: the one cached Machine whose ``node`` label names the Node.
- ``trigger_machine_deletion``: DELETE the Machine unless it is already deleting.

All API calls happen here, in the node queue's workers; the informer handlers only enqueue.
A failed request is retried after ShortRetry (a conflict after ConflictRetry), never raised.
Nodes carrying the not-managed-by-mcm annotation are ignored everywhere, and so is a Node whose
``spec.providerID`` is set and is not its machine's (``provider_ids_disagree``): a ``node`` label
is written by whoever may write Machines, so it alone never makes a Node the machine's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller.context import Deps
from mcm.controller.indexes import machines_by_node
from mcm.runtime import objects as o
from mcm.runtime.client.errors import RequestError, is_conflict, is_not_found
from mcm.runtime.errors import TransientError
from mcm.runtime.worker import DONE, Result

__all__ = [
    "DELETED_NODE_PREFIX",
    "NODE_FINALIZER_GRACE",
    "MultipleMachines",
    "deleted_node_key",
    "is_not_managed",
    "machine_for_node",
    "provider_id_disagrees",
    "provider_ids_disagree",
    "reconcile_node_key",
    "trigger_machine_deletion",
]

log = structlog.get_logger(__name__)


DELETED_NODE_PREFIX = "deleted/"
"""Node queue keys of Nodes the informer saw deleted."""


NODE_FINALIZER_GRACE = 60.0
"""Seconds after a Node's creation during which its finalizer is left to the machine's node
template write (see the module docstring)."""


class MultipleMachines(TransientError):
    """More than one machine claims the node."""


def deleted_node_key(node_name: str, provider_id: str = "") -> str:
    """The node queue key that asks for the deletion of the Machine of a deleted Node whose
    ``spec.providerID`` was ``provider_id``."""
    return f"{DELETED_NODE_PREFIX}{node_name}/{provider_id}"


def _split_deleted_node_key(rest: str) -> tuple[str, str]:
    """Node name and providerID of a deleted-node key without its prefix."""
    name, _, provider_id = rest.partition("/")
    return name, provider_id


def is_not_managed(node: Mapping[str, Any]) -> bool:
    return o.annotation(node, c.ANNOTATION_NOT_MANAGED_BY_MCM) is not None


def provider_ids_disagree(machine: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The Node carries a ``spec.providerID`` and the machine does not carry the same one (a
    different one, or none): the Node is not the machine's VM. A machine without a providerID
    cannot claim a Node that has one, or clearing ``spec.providerID`` before relabelling would
    get round the check. A Node without a providerID is trusted by the label (upstream)."""
    return provider_id_disagrees(machine, o.text(node, "spec", "providerID"))


def provider_id_disagrees(machine: Mapping[str, Any], node_provider_id: str) -> bool:
    """:func:`provider_ids_disagree` for a Node known only by its providerID (a deleted one)."""
    return bool(node_provider_id) and o.text(machine, "spec", "providerID") != node_provider_id


def foreign_node_message(machine: Mapping[str, Any], node: Mapping[str, Any], left_alone: str) -> str:
    """The Warning Event text for a Node whose providerID is not the machine's."""
    return c.MSG_NODE_PROVIDER_ID_MISMATCH.format(
        node=o.name_of(node),
        node_provider_id=o.text(node, "spec", "providerID"),
        provider_id=o.text(machine, "spec", "providerID"),
        left_alone=left_alone,
    )


def machine_for_node(deps: Deps, node_name: str) -> Mapping[str, Any] | None:
    """The machine labelled ``node=<node_name>``; ``None`` if none; raises if several."""
    matches = machines_by_node(deps, node_name)
    if len(matches) > 1:
        raise MultipleMachines(f"multiple machines matching node {node_name!r}")
    return matches[0] if matches else None


def trigger_machine_deletion(deps: Deps, machine: Mapping[str, Any]) -> RequestError | None:
    """DELETE ``machine`` unless it is deleting already; the failed request's error, if any."""
    if o.deletion_timestamp(machine):
        return None
    try:
        deps.writers.machines.delete(o.name_of(machine), namespace=o.namespace_of(machine) or deps.namespace)
    except RequestError as err:
        return None if is_not_found(err) else err
    log.info("machine_deleted_for_node", machine=o.name_of(machine))
    return None


def reconcile_node_key(deps: Deps, key: str) -> Result:
    nodes, writer = deps.listers.nodes, deps.writers.nodes
    if nodes is None or writer is None:
        return DONE
    if key.startswith(DELETED_NODE_PREFIX):
        return reconcile_deleted_node(deps, *_split_deleted_node_key(key[len(DELETED_NODE_PREFIX) :]))
    node = o.cached(nodes, key)
    if node is None:
        return DONE
    if is_not_managed(node):
        return DONE
    try:
        machine = machine_for_node(deps, key)
    except MultipleMachines as err:
        log.error("node_machine_lookup_failed", node=key, error=str(err))
        return Result.after(c.SHORT_RETRY)
    if machine is None:
        return DONE
    if provider_ids_disagree(machine, node):
        log.warning("node_provider_id_mismatch", node=key, machine=o.name_of(machine))
        return DONE
    if o.deletion_timestamp(node):
        return _delete_machine_of_node(deps, key, machine)
    if o.deletion_timestamp(machine) or c.NODE_FINALIZER in o.finalizers(node):
        return DONE
    wait = finalizer_left_to_machine(deps, node)
    if wait is not None:
        deps.enqueue_machine(f"{o.namespace_of(machine)}/{o.name_of(machine)}", 0.0)
        return Result.after(wait)
    return add_node_finalizer(deps, node)


def finalizer_left_to_machine(deps: Deps, node: Mapping[str, Any]) -> float | None:
    """Seconds the node loop leaves a new Node's finalizer to its machine's reconcile (whose
    node-template write carries it), or ``None`` when it writes it now: the controller is frozen
    (machine reconciles wait), or the Node is older than :data:`NODE_FINALIZER_GRACE` (or its
    creation time does not parse). A machine whose reconcile writes no Node within the grace
    (no phase yet, an invalid spec) gets the finalizer from the node loop's next pass."""
    if deps.frozen():
        return None
    created = o.parse_time(o.meta(node).get("creationTimestamp"))
    if created is None:
        return None
    age = deps.clock.now().timestamp() - created.timestamp()
    left = NODE_FINALIZER_GRACE - max(age, 0.0)
    return left if left > 0 else None


def add_node_finalizer(deps: Deps, node: Mapping[str, Any]) -> Result:
    """Merge-patch the node finalizer into the cached Node's finalizers, with its resourceVersion."""
    assert deps.writers.nodes is not None
    name = o.name_of(node)
    metadata = {
        "finalizers": sorted({*o.finalizers(node), c.NODE_FINALIZER}),
        "resourceVersion": o.meta(node).get("resourceVersion"),
    }
    try:
        deps.writers.nodes.patch(name, {"metadata": metadata})
    except RequestError as err:
        if is_not_found(err):
            return DONE
        if is_conflict(err):
            log.debug("node_finalizer_conflict", node=name)
            return Result.after(c.CONFLICT_RETRY)
        log.warning("node_finalizer_failed", node=name, error=err.message)
        return Result.after(c.SHORT_RETRY)
    return DONE


def reconcile_deleted_node(deps: Deps, node_name: str, provider_id: str = "") -> Result:
    """The informer saw the Node deleted with ``spec.providerID`` ``provider_id``: delete its
    Machine, unless the Node is back or that providerID is not the machine's (a relabelled
    Machine must not lose its own VM because another VM's Node went away)."""
    assert deps.listers.nodes is not None
    node = o.cached(deps.listers.nodes, node_name)
    if node is not None and not o.deletion_timestamp(node):
        log.info("deleted_node_is_back", node=node_name)
        return DONE
    try:
        machine = machine_for_node(deps, node_name)
    except MultipleMachines as err:
        log.error("node_machine_lookup_failed", node=node_name, error=str(err))
        return Result.after(c.SHORT_RETRY)
    if machine is None:
        return DONE
    if provider_id_disagrees(machine, provider_id):
        log.warning("deleted_node_provider_id_mismatch", node=node_name, machine=o.name_of(machine))
        return DONE
    return _delete_machine_of_node(deps, node_name, machine)


def _delete_machine_of_node(deps: Deps, node_name: str, machine: Mapping[str, Any]) -> Result:
    failed = trigger_machine_deletion(deps, machine)
    if failed is None:
        return DONE
    log.warning("machine_delete_for_node_failed", node=node_name, error=failed.message)
    return Result.after(c.SHORT_RETRY)

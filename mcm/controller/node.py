"""The node loop (HEAD, safety-class-secret-node-drain.md §4.7): node finalizer and Node → Machine.

- ``reconcile_node_key`` (queue ``node``): a Node of a non-deleting machine gets the node
  finalizer (merge patch of the sorted set); a deleting Node triggers deletion of its Machine.
- ``machine_for_node``: the one cached Machine whose ``node`` label names the Node.
- ``trigger_machine_deletion``: DELETE the Machine unless it is already deleting.

Nodes carrying the not-managed-by-mcm annotation are ignored everywhere, and so is a Node whose
``spec.providerID`` disagrees with its machine's (``provider_ids_disagree``): a ``node`` label is
written by whoever may write Machines, so it alone never makes a Node the machine's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller import objects as o
from mcm.controller.context import Deps
from mcm.controller.indexes import machines_by_node
from mcm.runtime.client.errors import ApiError, is_not_found
from mcm.runtime.worker import DONE, Result

__all__ = [
    "MultipleMachines",
    "is_not_managed",
    "machine_for_node",
    "provider_ids_disagree",
    "reconcile_node_key",
    "trigger_machine_deletion",
]

log = structlog.get_logger(__name__)


class MultipleMachines(Exception):
    """More than one machine claims the node."""


def is_not_managed(node: Mapping[str, Any]) -> bool:
    return o.annotation(node, c.ANNOTATION_NOT_MANAGED_BY_MCM) is not None


def provider_ids_disagree(machine: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Both carry a ``spec.providerID`` and they differ: the Node is not the machine's VM."""
    machine_id = o.text(machine, "spec", "providerID")
    node_id = o.text(node, "spec", "providerID")
    return bool(machine_id and node_id and machine_id != node_id)


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


def trigger_machine_deletion(deps: Deps, machine: Mapping[str, Any]) -> ApiError | None:
    """DELETE ``machine`` unless it is deleting already; the API error, if any."""
    if o.deletion_timestamp(machine):
        return None
    try:
        deps.writers.machines.delete(o.name_of(machine), namespace=o.namespace_of(machine) or deps.namespace)
    except ApiError as err:
        return None if is_not_found(err) else err
    log.info("machine_deleted_for_node", machine=o.name_of(machine))
    return None


def reconcile_node_key(deps: Deps, key: str) -> Result:
    nodes, writer = deps.listers.nodes, deps.writers.nodes
    if nodes is None or writer is None:
        return DONE
    try:
        node = nodes.get(key)
    except ApiError as err:
        if is_not_found(err):
            return DONE
        raise
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
        failed = trigger_machine_deletion(deps, machine)
        return Result.after(c.SHORT_RETRY) if failed is not None else DONE
    if o.deletion_timestamp(machine) or c.NODE_FINALIZER in o.finalizers(node):
        return DONE
    try:
        writer.patch(key, {"metadata": {"finalizers": sorted({*o.finalizers(node), c.NODE_FINALIZER})}})
    except ApiError as err:
        if is_not_found(err):
            return DONE
        log.warning("node_finalizer_failed", node=key, error=err.message)
        return Result.after(c.SHORT_RETRY)
    return DONE

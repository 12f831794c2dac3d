"""Node-side sync (upstream ``machine_util.go``, as at HEAD): the machine's node template onto its Node.

``sync_node_templates`` applies ``spec.nodeTemplate`` annotations, labels and taints as
upstream's ``syncMachineNodeTemplates`` does (keys recorded in the last-applied annotation and
gone from the template are removed; managed keys edited by hand are reverted; keys never
managed are left alone) and, in the same Node write, the ``node.gardener.cloud/machine-name``
label (``syncMachineNameToNode``) and, for a Node that is not deleting and not marked
not-managed, the node finalizer (so a new Node gets it with this write rather than a patch of
its own from the node loop, which leaves it to this write while the Node is new). Nothing to
change → no write. mcm: a Node whose
``spec.providerID`` is set and is not the machine's is not written (Warning Event), so the
``node`` label of a Machine cannot put labels or taints on another VM's Node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller.common import machine_node, record_warning, record_write_failure
from mcm.controller.context import Deps
from mcm.controller.node import foreign_node_message, is_not_managed, provider_ids_disagree
from mcm.controller.status import write_object
from mcm.runtime import objects as o
from mcm.runtime.objects import Obj
from mcm.runtime.worker import Result

__all__ = ["sync_annotations_or_labels", "sync_node_templates", "sync_taints"]

log = structlog.get_logger(__name__)


def sync_annotations_or_labels(
    node_values: dict[str, str], template: Mapping[str, str], last_applied: Mapping[str, str]
) -> bool:
    """Apply ``template`` onto ``node_values`` in place; ``True`` if anything changed."""
    changed = False
    for key in last_applied:
        if key not in template and key in node_values:
            del node_values[key]
            changed = True
    for key, value in template.items():
        if node_values.get(key) != value:
            node_values[key] = value
            changed = True
    return changed


def _taint_key(taint: Mapping[str, Any]) -> tuple[str, str]:
    return str(taint.get("key", "")), str(taint.get("effect", ""))


def sync_taints(
    node_taints: list[Obj], template: list[Obj], last_applied: list[Obj]
) -> tuple[list[Obj], bool]:
    """The node's taints with the template applied (keyed by key and effect) and whether they changed."""
    current = {_taint_key(t): t for t in node_taints}
    wanted = {_taint_key(t): t for t in template}
    changed = False
    for key in {_taint_key(t) for t in last_applied} - wanted.keys():
        if current.pop(key, None) is not None:
            changed = True
    for key, taint in wanted.items():
        if current.get(key) != taint:
            current[key] = dict(taint)
            changed = True
    return (list(current.values()), True) if changed else (node_taints, False)


def _template(machine: Mapping[str, Any]) -> Mapping[str, Any]:
    return o.sub(machine, "spec", "nodeTemplate")


def _last_applied(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    raw = o.annotations_of(node).get(c.ANNOTATION_LAST_APPLIED_ALT)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


def _str_map(value: object) -> dict[str, str]:
    return {str(k): v for k, v in value.items() if isinstance(v, str)} if isinstance(value, Mapping) else {}


def _taints(value: object) -> list[Obj]:
    return [dict(t) for t in value if isinstance(t, Mapping)] if isinstance(value, list) else []


def _encode_template(template: Mapping[str, Any]) -> str:
    metadata = dict(o.sub(template, "metadata"))
    metadata.setdefault("creationTimestamp", None)
    return json.dumps(
        {"metadata": metadata, "spec": dict(o.sub(template, "spec"))}, separators=(",", ":"), sort_keys=True
    )


def desired_node(machine: Mapping[str, Any], node: Mapping[str, Any]) -> Obj | None:
    """The Node after the sync (``None`` if the last-applied record cannot be parsed)."""
    last = _last_applied(node)
    if last is None:
        return None
    template = _template(machine)
    new = o.clone(node)
    metadata = new.setdefault("metadata", {})
    annotations = _str_map(metadata.get("annotations"))
    labels = _str_map(metadata.get("labels"))
    changed = sync_annotations_or_labels(
        annotations,
        _str_map(o.sub(template, "metadata").get("annotations")),
        _str_map(o.sub(last, "metadata").get("annotations")),
    )
    changed |= sync_annotations_or_labels(
        labels,
        _str_map(o.sub(template, "metadata").get("labels")),
        _str_map(o.sub(last, "metadata").get("labels")),
    )
    taints, taints_changed = sync_taints(
        _taints(o.sub(node, "spec").get("taints")),
        _taints(o.sub(template, "spec").get("taints")),
        _taints(o.sub(last, "spec").get("taints")),
    )
    if taints_changed:
        new.setdefault("spec", {})["taints"] = taints
    if changed or taints_changed or not isinstance(o.meta(node).get("annotations"), Mapping):
        annotations[c.ANNOTATION_LAST_APPLIED_ALT] = _encode_template(template)
    labels[c.LABEL_NODE_MACHINE_NAME] = o.name_of(machine)
    metadata["annotations"] = annotations
    metadata["labels"] = labels
    if _takes_finalizer(machine, node):
        metadata["finalizers"] = sorted({*o.finalizers(node), c.NODE_FINALIZER})
    return new


def _takes_finalizer(machine: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    return (
        c.NODE_FINALIZER not in o.finalizers(node)
        and not o.deletion_timestamp(node)
        and not o.deletion_timestamp(machine)
        and not is_not_managed(node)
    )


def sync_node_templates(deps: Deps, machine: Mapping[str, Any]) -> Result | None:
    """Write the Node if the template or the machine-name label differs; ``None`` = go on."""
    writer = deps.writers.nodes
    if writer is None:
        return None
    node = machine_node(deps, machine)
    if node is None or isinstance(node, Result):
        return node
    if provider_ids_disagree(machine, node):
        message = foreign_node_message(machine, node, "no template or label is written to it")
        record_warning(deps, machine, "NodeProviderIDMismatch", message)
        return None
    new = desired_node(machine, node)
    if new is None:
        record_warning(
            deps, machine, "NodeSyncFailed", "cannot parse the last applied node template annotation"
        )
        return Result.after(c.SHORT_RETRY)
    write = write_object(writer, node, new)
    if not write.ok:
        record_write_failure(deps, machine, "NodeSyncFailed", f"Node UPDATE failed: {write.error}", write)
        return Result.after(write.retry(c.SHORT_RETRY))
    return None

"""What a roll-out writes on Nodes (upstream v0.47.0 ``pkg/controller/deployment_rolling.go``
``taintNodesBackingMachineSets``, ``annotateNodesBackingMachineSets``,
``removeAutoscalerAnnotationsIfRequired``; ``deployment_rollback.go``
``removeTaintNodesBackingMachineSet``).

- Old MachineSets' nodes get the taint ``deployment.machine.sapcloud.io/prefer-no-schedule=True:
  PreferNoSchedule`` (new pods go to the new machines), then the set gets the annotation of the
  same key; a set that has the annotation is skipped. Removing it (rollback to that set, or the
  roll-out completing on it) takes the taint off its nodes, then the annotation off the set.
- During a roll-out, every node of the deployment gets ``cluster-autoscaler.kubernetes.io/
  scale-down-disabled=true`` and ``…-by-mcm=true``, and loses both at the end (only nodes that
  carry the ``-by-mcm`` key: a user's own annotation is kept).

A machine's Node is the one its ``node`` label names. The machines of a set are those it
controls, read from the cache: unlike upstream, these helpers never adopt or release anything.
Without a target cluster nothing is done. Whether a Node needs a write is judged on the cached
Node; the write starts from a fresh read with its ``resourceVersion``; a conflict is retried
(up to five times) on another fresh read. Node writes go to up to 16 Nodes at once (upstream:
one after the other); a failure on one Node is logged and the others are still done; removing
the CA annotations then reports the first failure (upstream stopped there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.context import Deps
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.surge import status_int
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, RequestError, is_conflict, is_not_found
from mcm.runtime.workqueue.parallelizer import parallelize_until

__all__ = [
    "CA_ANNOTATIONS",
    "PREFER_NO_SCHEDULE_TAINT",
    "annotate_nodes",
    "remove_ca_annotations",
    "remove_taint",
    "scaled_to_zero",
    "taint_old_sets",
]

log = structlog.get_logger(__name__)

PREFER_NO_SCHEDULE_TAINT: Mapping[str, str] = {
    "key": k.ANNOTATION_PREFER_NO_SCHEDULE,
    "value": k.TAINT_PREFER_NO_SCHEDULE_VALUE,
    "effect": k.TAINT_EFFECT_PREFER_NO_SCHEDULE,
}
CA_ANNOTATIONS: Mapping[str, str] = {
    c.ANNOTATION_CA_SCALE_DOWN_DISABLED: k.CA_SCALE_DOWN_DISABLED_VALUE,
    c.ANNOTATION_CA_SCALE_DOWN_DISABLED_BY_MCM: k.CA_SCALE_DOWN_DISABLED_VALUE,
}
CONFLICT_ATTEMPTS = 5
PARALLEL_NODE_WRITES = 16
"""Node writes of one taint or annotation step in flight at once (upstream wrote one after the
other: the first pass of a roll-out of 1,000 machines held its worker for seconds)."""

NodeChange = Callable[[Mapping[str, Any]], dict[str, Any] | None]
"""The changed Node (a new dict; the parts it changes are copies, the rest is shared with the
given Node, which is never changed), or ``None`` when there is nothing to change."""


def scaled_to_zero(machine_sets: Sequence[Mapping[str, Any] | None]) -> bool:
    """No set wants or has machines (upstream required all five counters of one set to be
    non-zero before it counted as not scaled to zero)."""
    return all(
        ms is None or (replicas_of(ms) == 0 and status_int(ms, "replicas") == 0) for ms in machine_sets
    )


def _node_names(deps: Deps, machine_set: Mapping[str, Any]) -> list[str]:
    machines = deps.machines.controlled_by(o.meta(machine_set).get("uid", ""))
    return [name for m in machines if (name := o.label(m, c.LABEL_NODE))]


def change_node(deps: Deps, name: str, change: NodeChange) -> None:
    """Apply ``change`` to Node ``name``. The cached copy says whether anything is to change
    (most Nodes of a roll-out pass need nothing: no request); a change is made on a fresh read,
    as upstream reads before each write (the machine controller writes a new Node as it
    registers, and the cache may not have that write yet), and read again after a conflict. A
    missing Node is nothing to do."""
    client = deps.clients.nodes
    cached = deps.node(name)
    if client is None or cached is None or change(cached) is None:
        return
    for attempt in range(CONFLICT_ATTEMPTS):
        try:
            updated = change(client.get(name))
            if updated is None:
                return
            client.update(updated)
            return
        except ApiError as err:
            if is_not_found(err):
                return
            if not is_conflict(err) or attempt == CONFLICT_ATTEMPTS - 1:
                raise


def _with_taints(node: Mapping[str, Any], taints: list[dict[str, Any]]) -> dict[str, Any]:
    return {**node, "spec": {**o.sub(node, "spec"), "taints": taints}}


def _with_annotations(node: Mapping[str, Any], annotations: dict[str, Any]) -> dict[str, Any]:
    return {**node, "metadata": {**o.meta(node), "annotations": annotations}}


def _taints_of(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in o.sub(node, "spec").get("taints") or [] if isinstance(t, Mapping)]


def _add_taint(taint: Mapping[str, str]) -> NodeChange:
    def change(node: Mapping[str, Any]) -> dict[str, Any] | None:
        taints = _taints_of(node)
        same = [t for t in taints if t.get("key") == taint["key"] and t.get("effect") == taint["effect"]]
        if same and same[0].get("value") == taint["value"]:
            return None
        return _with_taints(node, [t for t in taints if t not in same] + [dict(taint)])

    return change


def _remove_taint(taint: Mapping[str, str]) -> NodeChange:
    def change(node: Mapping[str, Any]) -> dict[str, Any] | None:
        taints = _taints_of(node)
        kept = [
            t for t in taints if not (t.get("key") == taint["key"] and t.get("effect") == taint["effect"])
        ]
        return None if len(kept) == len(taints) else _with_taints(node, kept)

    return change


def _each_node(deps: Deps, names: list[str], change: NodeChange, what: str) -> RequestError | None:
    """``change`` on every Node of ``names`` that needs it (judged on the cache), up to
    :data:`PARALLEL_NODE_WRITES` at once; a failure is logged and the others go on. The first
    failure (in ``names`` order), if any."""
    needed = [name for name in names if (node := deps.node(name)) is not None and change(node) is not None]
    errors: list[RequestError | None] = [None] * len(needed)

    def one(index: int) -> None:
        try:
            change_node(deps, needed[index], change)
        except RequestError as err:  # an error answer or a broken connection: never a crash
            log.warning("node_update_failed", node=needed[index], change=what, error=str(err))
            errors[index] = err

    parallelize_until(None, min(len(needed), PARALLEL_NODE_WRITES), len(needed), one)
    return next((err for err in errors if err is not None), None)


def _set_annotation(p: DeploymentPass, machine_set: Mapping[str, Any], value: str | None) -> None:
    updated = o.clone(machine_set)
    annotations = updated.setdefault("metadata", {}).setdefault("annotations", {})
    if value is None:
        annotations.pop(k.ANNOTATION_PREFER_NO_SCHEDULE, None)
    else:
        annotations[k.ANNOTATION_PREFER_NO_SCHEDULE] = value
    p.write_set(updated)


def taint_old_sets(p: DeploymentPass, old: Sequence[Mapping[str, Any]]) -> None:
    """Taint the nodes of old sets not yet marked, then mark them (failures are logged)."""
    if p.deps.clients.nodes is None:
        return
    for machine_set in old:
        if o.annotation(machine_set, k.ANNOTATION_PREFER_NO_SCHEDULE) is not None:
            continue
        _each_node(p.deps, _node_names(p.deps, machine_set), _add_taint(PREFER_NO_SCHEDULE_TAINT), "taint")
        try:
            _set_annotation(p, machine_set, k.TAINT_PREFER_NO_SCHEDULE_VALUE)
        except ApiError as err:
            log.warning(
                "machine_set_taint_annotation_failed", machine_set=o.name_of(machine_set), error=str(err)
            )


def remove_taint(p: DeploymentPass, machine_set: Mapping[str, Any]) -> None:
    """Take the PreferNoSchedule taint off the set's nodes and the annotation off the set."""
    if o.annotation(machine_set, k.ANNOTATION_PREFER_NO_SCHEDULE) is None:
        log.info("no_taint_to_remove", machine_set=o.name_of(machine_set))
        return
    if p.deps.clients.nodes is None:
        return
    _each_node(p.deps, _node_names(p.deps, machine_set), _remove_taint(PREFER_NO_SCHEDULE_TAINT), "untaint")
    current = next(
        (ms for ms in p.machine_sets if o.meta(ms).get("uid") == o.meta(machine_set).get("uid")), machine_set
    )
    _set_annotation(p, current, None)


def _annotations(node: Mapping[str, Any]) -> dict[str, Any]:
    """The Node's annotations as they are (entries of any type kept)."""
    value = o.meta(node).get("annotations")
    return dict(value) if isinstance(value, Mapping) else {}


def _add_annotations(node: Mapping[str, Any]) -> dict[str, Any] | None:
    annotations = _annotations(node)
    if all(annotations.get(key) == value for key, value in CA_ANNOTATIONS.items()):
        return None
    return _with_annotations(node, {**annotations, **CA_ANNOTATIONS})


def _remove_annotations(node: Mapping[str, Any]) -> dict[str, Any] | None:
    annotations = _annotations(node)
    if c.ANNOTATION_CA_SCALE_DOWN_DISABLED_BY_MCM not in annotations:
        return None
    return _with_annotations(node, {k: v for k, v in annotations.items() if k not in CA_ANNOTATIONS})


def annotate_nodes(p: DeploymentPass, machine_sets: Sequence[Mapping[str, Any] | None]) -> None:
    """Put the CA scale-down-disabled annotations on every node of ``machine_sets``."""
    if p.deps.clients.nodes is None:
        return
    for machine_set in machine_sets:
        if machine_set is not None:
            _each_node(p.deps, _node_names(p.deps, machine_set), _add_annotations, "ca-annotate")


def remove_ca_annotations(p: DeploymentPass, machine_sets: Sequence[Mapping[str, Any] | None]) -> None:
    """Remove the CA annotations this manager put on the nodes of ``machine_sets``; every Node is
    tried, and the first failure is raised (upstream stopped at it)."""
    if p.deps.clients.nodes is None:
        return
    names = [name for ms in machine_sets if ms is not None for name in _node_names(p.deps, ms)]
    error = _each_node(p.deps, names, _remove_annotations, "ca-unannotate")
    if error is not None:
        raise error

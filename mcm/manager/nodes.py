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
Node (through the mutation cache, so the manager's own last write counts). Then:

- The autoscaler annotations are a JSON merge patch of ``metadata.annotations`` naming only the
  two keys (``"true"`` to add, ``null`` to remove): no read before it, no ``resourceVersion``, so
  it never conflicts and leaves every other field and key as the API server has it (upstream
  v0.47.0 ``pkg/controller/controller_utils.go`` ``AddOrUpdateAnnotationOnNode`` and
  ``RemoveAnnotationsOffNode`` GET the Node and PUT it whole, retrying on conflict).
- The taint is a read-modify-write: a fresh read (GET), the whole ``spec.taints`` list written
  back with that read's ``resourceVersion`` (PUT), a conflict retried (up to five times) on
  another fresh read, as upstream ``pkg/util/nodeops/taints.go`` does. A merge patch would
  replace the whole list and could drop a taint another writer added meanwhile.

Node writes go to up to 16 Nodes at once (upstream: one after the other); a failure on one Node
is logged and the others are still done; removing the CA annotations then reports the first
failure (upstream stopped there). A missing Node is nothing to do.
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
    "change_node",
    "patch_annotations",
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
AnnotationChange = Mapping[str, str | None]
"""Annotation keys to set (to the value) or to remove (``None``)."""


def scaled_to_zero(machine_sets: Sequence[Mapping[str, Any] | None]) -> bool:
    """No set wants or has machines (upstream required all five counters of one set to be
    non-zero before it counted as not scaled to zero)."""
    return all(
        ms is None or (replicas_of(ms) == 0 and status_int(ms, "replicas") == 0) for ms in machine_sets
    )


def _node_names(deps: Deps, machine_set: Mapping[str, Any]) -> list[str]:
    machines = deps.machines.controlled_by(o.meta(machine_set).get("uid", ""))
    return [name for m in machines if (name := o.label(m, c.LABEL_NODE))]


def patch_annotations(deps: Deps, name: str, annotations: AnnotationChange) -> None:
    """Set or remove ``annotations`` on Node ``name`` with one JSON merge patch of
    ``metadata.annotations`` that names only those keys. Without a read before it and without a
    ``resourceVersion`` it cannot conflict, and every key and field it does not name stays as
    the API server has it, whoever wrote it last. A missing Node is nothing to do."""
    client = deps.clients.nodes
    if client is None:
        return
    try:
        client.patch(name, {"metadata": {"annotations": dict(annotations)}}, kind="merge")
    except ApiError as err:
        if not is_not_found(err):
            raise


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


def _each_node(
    deps: Deps,
    names: list[str],
    needs: Callable[[Mapping[str, Any]], bool],
    write: Callable[[str], None],
    what: str,
) -> RequestError | None:
    """``write`` every Node of ``names`` that ``needs`` it (judged on the cache), up to
    :data:`PARALLEL_NODE_WRITES` at once; a failure is logged and the others go on. The first
    failure (in ``names`` order), if any."""
    needed = [name for name in names if (node := deps.node(name)) is not None and needs(node)]
    errors: list[RequestError | None] = [None] * len(needed)

    def one(index: int) -> None:
        try:
            write(needed[index])
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


def _each_node_change(deps: Deps, names: list[str], change: NodeChange, what: str) -> None:
    _each_node(
        deps, names, lambda node: change(node) is not None, lambda name: change_node(deps, name, change), what
    )


def taint_old_sets(p: DeploymentPass, old: Sequence[Mapping[str, Any]]) -> None:
    """Taint the nodes of old sets not yet marked, then mark them (failures are logged)."""
    if p.deps.clients.nodes is None:
        return
    for machine_set in old:
        if o.annotation(machine_set, k.ANNOTATION_PREFER_NO_SCHEDULE) is not None:
            continue
        names = _node_names(p.deps, machine_set)
        _each_node_change(p.deps, names, _add_taint(PREFER_NO_SCHEDULE_TAINT), "taint")
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
    names = _node_names(p.deps, machine_set)
    _each_node_change(p.deps, names, _remove_taint(PREFER_NO_SCHEDULE_TAINT), "untaint")
    current = next(
        (ms for ms in p.machine_sets if o.meta(ms).get("uid") == o.meta(machine_set).get("uid")), machine_set
    )
    _set_annotation(p, current, None)


def _annotations(node: Mapping[str, Any]) -> dict[str, Any]:
    """The Node's annotations as they are (entries of any type kept)."""
    value = o.meta(node).get("annotations")
    return dict(value) if isinstance(value, Mapping) else {}


def _lacks_ca_annotations(node: Mapping[str, Any]) -> bool:
    annotations = _annotations(node)
    return any(annotations.get(key) != value for key, value in CA_ANNOTATIONS.items())


def _has_ca_annotations_by_mcm(node: Mapping[str, Any]) -> bool:
    return c.ANNOTATION_CA_SCALE_DOWN_DISABLED_BY_MCM in _annotations(node)


_REMOVE_CA_ANNOTATIONS: AnnotationChange = dict.fromkeys(CA_ANNOTATIONS)


def annotate_nodes(p: DeploymentPass, machine_sets: Sequence[Mapping[str, Any] | None]) -> None:
    """Put the CA scale-down-disabled annotations on every node of ``machine_sets``."""
    if p.deps.clients.nodes is None:
        return
    for machine_set in machine_sets:
        if machine_set is not None:
            _each_node(
                p.deps,
                _node_names(p.deps, machine_set),
                _lacks_ca_annotations,
                lambda name: patch_annotations(p.deps, name, CA_ANNOTATIONS),
                "ca-annotate",
            )


def remove_ca_annotations(p: DeploymentPass, machine_sets: Sequence[Mapping[str, Any] | None]) -> None:
    """Remove the CA annotations this manager put on the nodes of ``machine_sets``; every Node is
    tried, and the first failure is raised (upstream stopped at it)."""
    if p.deps.clients.nodes is None:
        return
    names = [name for ms in machine_sets if ms is not None for name in _node_names(p.deps, ms)]
    error = _each_node(
        p.deps,
        names,
        _has_ca_annotations_by_mcm,
        lambda name: patch_annotations(p.deps, name, _REMOVE_CA_ANNOTATIONS),
        "ca-unannotate",
    )
    if error is not None:
        raise error

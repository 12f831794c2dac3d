"""A MachineDeployment's new and old MachineSets (upstream v0.47.0
``pkg/controller/deployment_sync.go`` ``getAllMachineSetsAndSyncRevision``, ``getNewMachineSet``,
``addHashKeyToISAndMachines``; ``deployment_util.go`` ``FindNewMachineSet``, ``FindOldMachineSets``).

- The *new* set is the oldest (then by name) whose template equals the deployment's
  (:func:`~mcm.manager.templates.equal_ignore_hash`); every other claimed set is *old*.
- An existing new set is brought up to date in place: the deployment's annotations, the next
  revision, ``minReadySeconds``, ``nodeTemplate``, the machine configuration and ``class.kind``
  (one Update of the set; the deployment is left for the next pass, as upstream does). When the
  set is current, the deployment gets its revision annotation and, with a progress deadline, a
  ``Progressing``/``FoundNewMachineSet`` condition.
- A new set is created only when asked (roll-outs and rollbacks): named after the template hash
  (:mod:`mcm.manager.templates`), labelled, selected and templated with
  ``machine-template-hash``, controlled by the deployment, sized by
  :func:`~mcm.manager.surge.new_set_replicas`, annotated with revision and desired/max
  replicas. The deployment's revision annotation is written with an Update in the same pass
  (upstream sent it with a status write, which drops annotations, so it lagged a pass). A name
  taken by a set with another template (or another owner) raises ``status.collisionCount``.
- A set without ``machine-template-hash`` in its selector (made by a very old manager) gets the
  label back-filled one step per pass — template, machines, then labels and selector — and the
  pass stops with a short requeue in between (upstream polled for up to two minutes, holding a
  worker).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager import gotypes
from mcm.manager.conditions import MD_CONDITIONS, conditions_of, find, new_condition, set_condition
from mcm.manager.deployment_pass import DeploymentPass, PassAborted
from mcm.manager.owners import controller_ref, is_controlled_by
from mcm.manager.propagation import config_equal, configuration_of
from mcm.manager.replicas import is_active
from mcm.manager.revisions import max_revision, set_deployment_revision, set_new_set_annotations
from mcm.manager.surge import max_surge, new_set_replicas
from mcm.manager.templates import compute_hash, equal_ignore_hash, machine_set_name
from mcm.manager.validation import replicas_of
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_already_exists, is_not_found

__all__ = ["by_creation", "find_new_set", "find_old_sets", "sets_and_sync_revision"]

log = structlog.get_logger(__name__)

_EPOCH = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)
_HASH = c.LABEL_MACHINE_TEMPLATE_HASH


def by_creation(machine_set: Mapping[str, Any]) -> tuple[_dt.datetime, str]:
    """Sort key: oldest first, then by name."""
    return o.parse_time(o.meta(machine_set).get("creationTimestamp")) or _EPOCH, o.name_of(machine_set)


def _template(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return o.sub(obj, "spec", "template")


def find_new_set(
    deployment: Mapping[str, Any], machine_sets: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    for machine_set in sorted(machine_sets, key=by_creation):
        if equal_ignore_hash(_template(machine_set), _template(deployment)):
            return machine_set
    return None


def find_old_sets(
    deployment: Mapping[str, Any], machine_sets: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """``(old sets with replicas, all old sets)``."""
    new = find_new_set(deployment, machine_sets)
    new_uid = o.meta(new).get("uid") if new is not None else None
    old = [ms for ms in machine_sets if new is None or o.meta(ms).get("uid") != new_uid]
    return [ms for ms in old if replicas_of(ms) != 0], old


def _collision_count(deployment: Mapping[str, Any]) -> int | None:
    value = o.sub(deployment, "status").get("collisionCount")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _with_hash_label(obj: dict[str, Any], *path: str, value: str) -> None:
    target = obj
    for key in path:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise ValueError(f"{'.'.join(path)} is not an object")
    target[_HASH] = value


def _backfill_step(p: DeploymentPass, machine_set: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """One step of giving a legacy set the hash label; the done set, or ``None`` (in progress)."""
    template = o.clone(_template(machine_set))
    template.get("metadata", {}).get("labels", {}).pop(_HASH, None)
    value = str(compute_hash(template, _collision_count(p.deployment)))
    if o.labels_of(_template(machine_set)).get(_HASH) != value:
        updated = o.clone(machine_set)
        _with_hash_label(updated, "spec", "template", "metadata", "labels", value=value)
        p.write_set(updated)
        return None
    if (o.sub(machine_set, "status").get("observedGeneration") or 0) < (
        o.meta(machine_set).get("generation") or 0
    ):
        return None
    pending = False
    for machine in p.machine_map.get(o.meta(machine_set).get("uid", ""), []):
        if is_active(machine) and o.label(machine, _HASH) != value:
            labelled = o.clone(machine)
            _with_hash_label(labelled, "metadata", "labels", value=value)
            p.deps.clients.machines.update(labelled, namespace=o.namespace_of(machine))
            pending = True
    if pending or (o.sub(machine_set, "status").get("fullyLabeledReplicas") or 0) != replicas_of(machine_set):
        return None
    updated = o.clone(machine_set)
    _with_hash_label(updated, "metadata", "labels", value=value)
    _with_hash_label(updated, "spec", "selector", "matchLabels", value=value)
    return p.write_set(updated)


def _sync_hash_labels(p: DeploymentPass) -> None:
    in_progress = []
    for machine_set in list(p.machine_sets):
        if _HASH in (o.sub(machine_set, "spec", "selector").get("matchLabels") or {}):
            continue
        if _backfill_step(p, machine_set) is None:
            in_progress.append(o.name_of(machine_set))
    if in_progress:
        raise PassAborted(
            f"labelling machine sets with {_HASH}: {', '.join(in_progress)}", k.HASH_BACKFILL_POLL
        )


def sets_and_sync_revision(
    p: DeploymentPass, *, create: bool
) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """``(new set or None, all old sets)``, the new set brought up to date or created."""
    _sync_hash_labels(p)
    _, old = find_old_sets(p.deployment, p.machine_sets)
    new_revision = max_revision(old) + 1
    existing = find_new_set(p.deployment, p.machine_sets)
    if existing is not None:
        return _sync_existing(p, existing, new_revision), old
    if not create:
        return None, old
    return _create(p, old, new_revision), old


def _sync_template_fields(deployment: Mapping[str, Any], machine_set: dict[str, Any]) -> bool:
    """Copy nodeTemplate, machine configuration, class kind and minReadySeconds; whether any changed."""
    d_spec, spec = (
        o.sub(deployment, "spec", "template", "spec"),
        machine_set["spec"]["template"].setdefault("spec", {}),
    )
    changed = False
    if not gotypes.semantic_equal_json(
        gotypes.NODE_TEMPLATE_SPEC, d_spec.get("nodeTemplate"), spec.get("nodeTemplate")
    ):
        spec.pop("nodeTemplate", None)
        if isinstance(d_spec.get("nodeTemplate"), Mapping):
            spec["nodeTemplate"] = o.clone(d_spec["nodeTemplate"])
        changed = True
    if not config_equal(d_spec, spec):
        for key in gotypes.MACHINE_CONFIGURATION_KEYS:
            spec.pop(key, None)
        spec.update(o.clone(configuration_of(d_spec)))
        changed = True
    if o.text(d_spec, "class", "kind") != o.text(spec, "class", "kind"):
        spec.setdefault("class", {})["kind"] = o.text(d_spec, "class", "kind")
        changed = True
    min_ready = o.sub(deployment, "spec").get("minReadySeconds")
    if machine_set["spec"].get("minReadySeconds") != min_ready:
        machine_set["spec"].pop("minReadySeconds", None)
        if min_ready is not None:
            machine_set["spec"]["minReadySeconds"] = min_ready
        changed = True
    return changed


def _has_deadline(deployment: Mapping[str, Any]) -> bool:
    return o.sub(deployment, "spec").get("progressDeadlineSeconds") is not None


def _sync_existing(p: DeploymentPass, existing: Mapping[str, Any], new_revision: int) -> Mapping[str, Any]:
    updated = o.clone(existing)
    updated.setdefault("spec", {}).setdefault("template", {})
    annotations_changed = set_new_set_annotations(p.deployment, updated, new_revision, None)
    if _sync_template_fields(p.deployment, updated) or annotations_changed:
        return p.write_set(updated)
    deployment = o.clone(p.deployment)
    revision_changed = set_deployment_revision(
        deployment, o.annotation(existing, k.ANNOTATION_REVISION) or ""
    )
    if revision_changed:
        p.update(deployment)
    status = o.clone(o.sub(p.deployment, "status"))
    conditions = conditions_of(status, MD_CONDITIONS)
    if _has_deadline(p.deployment) and find(conditions, k.CONDITION_PROGRESSING) is None:
        message = k.MSG_FOUND_NEW_MS.format(name=o.name_of(existing))
        condition = new_condition(
            p.deps.clock,
            k.CONDITION_PROGRESSING,
            k.TRUE,
            k.REASON_FOUND_NEW_MS,
            message,
            with_update_time=True,
        )
        p.update_status({**status, MD_CONDITIONS: set_condition(conditions, condition)})
    return existing


def _new_set_object(p: DeploymentPass, old: Sequence[Mapping[str, Any]], new_revision: int) -> dict[str, Any]:
    d = p.deployment
    template = o.clone(_template(d))
    value = str(compute_hash(template, _collision_count(d)))
    _with_hash_label(template, "metadata", "labels", value=value)
    selector = o.clone(o.sub(d, "spec", "selector"))
    _with_hash_label(selector, "matchLabels", value=value)
    spec: dict[str, Any] = {"replicas": 0, "selector": selector, "template": template}
    if o.sub(d, "spec").get("minReadySeconds") is not None:
        spec["minReadySeconds"] = o.sub(d, "spec")["minReadySeconds"]
    new_set: dict[str, Any] = {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND_MACHINE_SET,
        "metadata": {
            "name": machine_set_name(p.name, value),
            "namespace": p.namespace,
            "ownerReferences": [controller_ref(d, k.KIND_MACHINE_DEPLOYMENT)],
            "labels": dict(o.labels_of(template)),
        },
        "spec": spec,
    }
    spec["replicas"] = new_set_replicas(d, [*old, new_set], new_set)
    replicas = replicas_of(d)
    set_new_set_annotations(d, new_set, new_revision, (replicas, replicas + max_surge(d)))
    return new_set


def _create(p: DeploymentPass, old: Sequence[Mapping[str, Any]], new_revision: int) -> Mapping[str, Any]:
    new_set = _new_set_object(p, old, new_revision)
    try:
        created = p.deps.clients.machine_sets.create(new_set, namespace=p.namespace)
    except ApiError as err:
        if is_already_exists(err):
            return p.add_set(_existing_or_collision(p, new_set))
        _creation_failed(p, o.name_of(new_set), err)
        raise
    log.info("machine_set_created", machine_deployment=p.name, machine_set=o.name_of(created))
    replicas = replicas_of(created)
    if replicas > 0:
        p.event(
            k.EVENT_NORMAL,
            k.EVENT_SCALING_MACHINE_SET,
            k.MSG_SCALED_UP_NEW.format(name=o.name_of(created), replicas=replicas),
        )
    _record_new_revision(p, created, str(new_revision))
    return p.add_set(created)


def _existing_or_collision(p: DeploymentPass, new_set: Mapping[str, Any]) -> Mapping[str, Any]:
    """The set that has the new set's name, if it is ours with our template; else a collision."""
    name = o.name_of(new_set)
    found = p.deps.machine_sets.get(name)
    if found is None:
        found = p.deps.clients.machine_sets.get(name, namespace=p.namespace)
    if is_controlled_by(found, p.deployment) and equal_ignore_hash(_template(p.deployment), _template(found)):
        return found
    status = o.clone(o.sub(p.deployment, "status"))
    status["collisionCount"] = (_collision_count(p.deployment) or 0) + 1
    p.update_status(status)
    log.info(
        "machine_set_name_collision",
        machine_deployment=p.name,
        machine_set=name,
        collision_count=status["collisionCount"],
    )
    raise PassAborted(f"machine set name {name} is taken", c.CONFLICT_RETRY)


def _creation_failed(p: DeploymentPass, name: str, err: ApiError) -> None:
    message = k.MSG_FAILED_MS_CREATE.format(name=name, err=err)
    if _has_deadline(p.deployment):
        status = o.clone(o.sub(p.deployment, "status"))
        condition = new_condition(
            p.deps.clock,
            k.CONDITION_PROGRESSING,
            k.FALSE,
            k.REASON_FAILED_MS_CREATE,
            message,
            with_update_time=True,
        )
        status[MD_CONDITIONS] = set_condition(conditions_of(status, MD_CONDITIONS), condition)
        try:
            p.update_status(status)
        except ApiError as write_error:
            if not is_not_found(write_error):
                log.error(
                    "machine_deployment_status_write_failed",
                    machine_deployment=p.name,
                    error=str(write_error),
                )
    p.event(k.EVENT_WARNING, k.REASON_FAILED_MS_CREATE, message)


def _record_new_revision(p: DeploymentPass, created: Mapping[str, Any], revision: str) -> None:
    deployment = o.clone(p.deployment)
    if set_deployment_revision(deployment, revision):
        p.update(deployment)
    if not _has_deadline(p.deployment):
        return
    status = o.clone(o.sub(p.deployment, "status"))
    message = k.MSG_NEW_MS_CREATED.format(name=o.name_of(created))
    condition = new_condition(
        p.deps.clock, k.CONDITION_PROGRESSING, k.TRUE, k.REASON_NEW_MS_CREATED, message, with_update_time=True
    )
    p.update_status({**status, MD_CONDITIONS: set_condition(conditions_of(status, MD_CONDITIONS), condition)})

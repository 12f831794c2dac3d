"""Rollback through ``spec.rollbackTo`` (upstream v0.47.0 ``pkg/controller/deployment_rollback.go``).

Revision 0 means the previous one (:func:`~mcm.manager.revisions.last_revision`). The set with
that revision gives the deployment its template back (labels without
``machine-template-hash``) and its annotations (the deployment keeps its own revision,
desired/max replicas and other not-copied ones); its nodes lose the PreferNoSchedule taint.
In every outcome ``spec.rollbackTo`` is cleared with one Update of the deployment. Events:
``DeploymentRollback`` ("Rolled back deployment "d" to revision N"), or Warnings
``DeploymentRollbackTemplateUnchanged`` and ``DeploymentRollbackRevisionNotFound``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.manager import constants as k
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.newset import sets_and_sync_revision
from mcm.manager.nodes import remove_taint
from mcm.manager.revisions import last_revision, revision_of, set_deployment_annotations_to
from mcm.manager.templates import equal_ignore_hash
from mcm.runtime import objects as o

__all__ = ["rollback"]

log = structlog.get_logger(__name__)


def _clear_rollback_to(p: DeploymentPass, deployment: dict[str, Any]) -> None:
    deployment.setdefault("spec", {}).pop("rollbackTo", None)
    p.update(deployment)


def _to_template(p: DeploymentPass, machine_set: Mapping[str, Any], revision: int) -> None:
    deployment = o.clone(p.deployment)
    template = o.sub(deployment, "spec", "template")
    if equal_ignore_hash(template, o.sub(machine_set, "spec", "template")):
        p.event(k.EVENT_WARNING, k.EVENT_ROLLBACK_UNCHANGED, k.MSG_ROLLBACK_UNCHANGED.format(name=p.name))
        _clear_rollback_to(p, deployment)
        return
    restored = o.clone(o.sub(machine_set, "spec", "template"))
    labels = restored.get("metadata", {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(c.LABEL_MACHINE_TEMPLATE_HASH, None)
    deployment["spec"]["template"] = restored
    set_deployment_annotations_to(deployment, machine_set)
    _clear_rollback_to(p, deployment)
    log.info("rolled_back", machine_deployment=p.name, revision=revision)
    p.event(k.EVENT_NORMAL, k.EVENT_ROLLBACK_DONE, k.MSG_ROLLBACK_DONE.format(name=p.name, revision=revision))


def rollback(p: DeploymentPass) -> None:
    """One rollback pass (see the module docstring)."""
    new_set, old = sets_and_sync_revision(p, create=True)
    all_sets = [ms for ms in p.currents([*old, new_set]) if ms is not None]
    revision = o.sub(p.deployment, "spec", "rollbackTo").get("revision") or 0
    if revision == 0:
        revision = last_revision(all_sets)
        if revision == 0:
            p.event(k.EVENT_WARNING, k.EVENT_ROLLBACK_NOT_FOUND, k.MSG_ROLLBACK_NO_LAST)
            _clear_rollback_to(p, o.clone(p.deployment))
            return
    for machine_set in all_sets:
        if revision_of(machine_set) == revision:
            remove_taint(p, machine_set)
            _to_template(p, p.current(machine_set) or machine_set, revision)
            return
    p.event(k.EVENT_WARNING, k.EVENT_ROLLBACK_NOT_FOUND, k.MSG_ROLLBACK_NOT_FOUND)
    _clear_rollback_to(p, o.clone(p.deployment))

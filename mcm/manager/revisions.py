"""Revisions and the annotations a MachineDeployment keeps on its MachineSets (upstream v0.47.0
``pkg/controller/deployment_util.go``: ``MaxRevision``, ``LastRevision``,
``SetNewMachineSetAnnotations``, ``SetReplicasAnnotations``, ``copyMachineDeploymentAnnotationsToMachineSet``,
``SetMachineDeploymentAnnotationsTo``).

Guarantees:

- A missing ``deployment.kubernetes.io/revision`` counts as 0; an unparsable one is skipped.
  :func:`last_revision` is the second highest (equal to the highest when two sets share it).
- :func:`set_new_set_annotations` copies every deployment annotation except
  :data:`~mcm.manager.constants.ANNOTATIONS_NOT_COPIED` onto the new set (copied annotations
  are never removed), raises its revision to the new one, and appends the old revision to
  ``deployment.kubernetes.io/revision-history`` only when the revision really changed (upstream
  appended it whenever any annotation, node template or configuration changed, so the history
  filled with duplicates). A set whose revision does not parse is left alone.
- Functions change the dict they are given (a copy the caller owns) and say whether they did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from mcm.manager import constants as k
from mcm.runtime import objects as o

__all__ = [
    "last_revision",
    "max_revision",
    "revision_of",
    "set_deployment_annotations_to",
    "set_deployment_revision",
    "set_new_set_annotations",
    "set_replicas_annotations",
]

log = structlog.get_logger(__name__)

_INT = re.compile(r"^[+-]?\d+$")


def _parse_int(value: str) -> int | None:
    return int(value) if _INT.match(value) else None


def revision_of(obj: Mapping[str, Any]) -> int | None:
    """The revision annotation (0 when absent, ``None`` when it does not parse)."""
    value = o.annotation(obj, k.ANNOTATION_REVISION)
    return 0 if value is None else _parse_int(value)


def _revisions(machine_sets: Iterable[Mapping[str, Any] | None]) -> list[int]:
    found = []
    for machine_set in machine_sets:
        if machine_set is None:
            continue
        value = revision_of(machine_set)
        if value is None:
            log.info("machine_set_revision_unparsable", machine_set=o.name_of(machine_set))
            continue
        found.append(value)
    return found


def max_revision(machine_sets: Iterable[Mapping[str, Any] | None]) -> int:
    return max([0, *_revisions(machine_sets)])


def last_revision(machine_sets: Iterable[Mapping[str, Any] | None]) -> int:
    highest = second = 0
    for value in _revisions(machine_sets):
        if value >= highest:
            highest, second = value, highest
        elif value > second:
            second = value
    return second


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {}
    annotations: dict[str, str] = meta["annotations"]
    return annotations


def set_replicas_annotations(machine_set: dict[str, Any], desired: int, maximum: int) -> bool:
    """Write ``desired-replicas`` and ``max-replicas``; whether either changed."""
    annotations, changed = _annotations(machine_set), False
    for key, value in (
        (k.ANNOTATION_DESIRED_REPLICAS, str(desired)),
        (k.ANNOTATION_MAX_REPLICAS, str(maximum)),
    ):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def _copy_deployment_annotations(deployment: Mapping[str, Any], machine_set: dict[str, Any]) -> bool:
    annotations, changed = _annotations(machine_set), False
    for key, value in o.annotations_of(deployment).items():
        if key in k.ANNOTATIONS_NOT_COPIED or annotations.get(key) == value:
            continue
        annotations[key] = value
        changed = True
    return changed


def set_new_set_annotations(
    deployment: Mapping[str, Any],
    machine_set: dict[str, Any],
    new_revision: int,
    replicas: tuple[int, int] | None,
) -> bool:
    """Annotations of the new set (see the module docstring); ``replicas`` (desired, max) are
    written too for a set about to be created."""
    changed = _copy_deployment_annotations(deployment, machine_set)
    annotations = _annotations(machine_set)
    old = annotations.get(k.ANNOTATION_REVISION)
    old_value = 0 if old is None else _parse_int(old)
    if old_value is None:
        log.warning("machine_set_revision_unparsable", machine_set=o.name_of(machine_set), revision=old)
        return False
    if old_value < new_revision:
        annotations[k.ANNOTATION_REVISION] = str(new_revision)
        changed = True
        if old is not None:
            history = annotations.get(k.ANNOTATION_REVISION_HISTORY, "")
            annotations[k.ANNOTATION_REVISION_HISTORY] = f"{history},{old}" if history else old
    if replicas is not None and set_replicas_annotations(machine_set, *replicas):
        changed = True
    return changed


def set_deployment_revision(deployment: dict[str, Any], revision: str) -> bool:
    annotations = _annotations(deployment)
    if annotations.get(k.ANNOTATION_REVISION) == revision:
        return False
    annotations[k.ANNOTATION_REVISION] = revision
    return True


def set_deployment_annotations_to(deployment: dict[str, Any], machine_set: Mapping[str, Any]) -> None:
    """Rollback: keep the deployment's own not-copied annotations, take the set's others."""
    kept = {key: v for key, v in o.annotations_of(deployment).items() if key in k.ANNOTATIONS_NOT_COPIED}
    kept.update(
        {key: v for key, v in o.annotations_of(machine_set).items() if key not in k.ANNOTATIONS_NOT_COPIED}
    )
    deployment.setdefault("metadata", {})["annotations"] = kept

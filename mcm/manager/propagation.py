"""Template fields a MachineSet copies onto the machines it already has (upstream v0.47.0
``pkg/controller/machineset_util.go`` ``syncMachinesNodeTemplates``, ``syncMachinesConfig``,
``syncMachinesClassKind``).

These fields never trigger a roll-out (template equality ignores them); a change reaches every
machine in place:

- ``spec.nodeTemplate`` and the machine configuration (``drainTimeout``, ``healthTimeout``,
  ``creationTimeout``, ``inPlaceUpdateTimeout``, ``machinePreserveTimeout``,
  ``disableHealthTimeout``, ``maxEvictRetries``, ``nodeConditions``) onto *active* machines
  (not ``Failed``, not ``Terminating``) when they differ semantically (durations compared by
  value, a nil map equal to an empty one);
- ``spec.class.kind`` onto every claimed machine.

Each machine that needs it gets one Update, built from a copy of the cached machine with its
``resourceVersion`` (upstream changed the shared cache object in place and wrote that); a
conflict ends the pass and the MachineSet is looked at again shortly. Error texts are upstream's
(``error in updating nodeTemplateSpec to machine "m": …``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from mcm.manager import constants as k
from mcm.manager import gotypes
from mcm.manager.context import Deps
from mcm.manager.replicas import is_active
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_conflict
from mcm.runtime.errors import TransientError

__all__ = ["PropagationError", "config_equal", "configuration_of", "propagate_template"]

log = structlog.get_logger(__name__)


class PropagationError(TransientError):
    """Copying template fields onto a machine failed."""


def configuration_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The machine configuration keys set in a Machine spec (nulls left out)."""
    return {key: spec[key] for key in gotypes.MACHINE_CONFIGURATION_KEYS if spec.get(key) is not None}


def _comparable(value: object) -> object:
    if isinstance(value, str):
        try:
            return gotypes.parse_go_duration_ns(value)
        except gotypes.Unreproducible:
            return value
    return value


def config_equal(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """Whether two specs carry the same machine configuration (durations by value)."""
    a, b = configuration_of(left), configuration_of(right)
    if a == b:
        return True
    return a.keys() == b.keys() and all(_comparable(a[key]) == _comparable(b[key]) for key in a)


def _changes(template_spec: Mapping[str, Any], machine: Mapping[str, Any]) -> list[str]:
    """Which of ``nodeTemplate``, ``config``, ``classKind`` must be copied onto ``machine``."""
    spec = o.sub(machine, "spec")
    changes = []
    if is_active(machine):
        if not gotypes.semantic_equal_json(
            gotypes.NODE_TEMPLATE_SPEC, template_spec.get("nodeTemplate"), spec.get("nodeTemplate")
        ):
            changes.append("nodeTemplate")
        if not config_equal(template_spec, spec):
            changes.append("config")
    if o.text(template_spec, "class", "kind") != o.text(spec, "class", "kind"):
        changes.append("classKind")
    return changes


def _apply(
    template_spec: Mapping[str, Any], machine: Mapping[str, Any], changes: list[str]
) -> dict[str, Any]:
    updated = o.clone(machine)
    spec = updated.setdefault("spec", {})
    if "nodeTemplate" in changes:
        spec.pop("nodeTemplate", None)
        node_template = template_spec.get("nodeTemplate")
        if isinstance(node_template, Mapping):
            spec["nodeTemplate"] = o.clone(node_template)
    if "config" in changes:
        for key in gotypes.MACHINE_CONFIGURATION_KEYS:
            spec.pop(key, None)
        spec.update(o.clone(configuration_of(template_spec)))
    if "classKind" in changes:
        spec.setdefault("class", {})["kind"] = o.text(template_spec, "class", "kind")
    return updated


_ERRORS = {"nodeTemplate": k.ERR_NODE_TEMPLATE, "config": k.ERR_MACHINE_CONFIG, "classKind": k.ERR_CLASS_KIND}


def propagate_template(
    deps: Deps, machine_set: Mapping[str, Any], machines: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Copy the fields onto ``machines``; the machines as they are now (updated ones replaced)."""
    template_spec = o.sub(machine_set, "spec", "template", "spec")
    result: list[Mapping[str, Any]] = []
    for machine in machines:
        changes = _changes(template_spec, machine)
        if not changes:
            result.append(machine)
            continue
        try:
            updated = deps.clients.machines.update(
                _apply(template_spec, machine, changes), namespace=o.namespace_of(machine)
            )
        except ApiError as err:
            if is_conflict(err):
                raise
            raise PropagationError(_ERRORS[changes[0]].format(name=o.name_of(machine), err=err)) from err
        log.info("machine_template_fields_updated", machine=o.name_of(machine), fields=changes)
        result.append(updated)
    return result

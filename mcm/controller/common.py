"""Helpers shared by the machine loops: events, effective per-machine values, driver requests.

Events: one on the Machine for every phase change (Normal) and every failed step (Warning),
with short CamelCase reasons. Messages are built from descriptions that never hold secret data.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import API_VERSION, MachineClass
from mcm.controller.classmemo import class_dict
from mcm.controller.context import Deps
from mcm.controller.status import Write, write_status
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.client.errors import ApiError
from mcm.runtime.objects import Obj
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING
from mcm.runtime.worker import Result

__all__ = [
    "FlowInputs",
    "creation_timeout",
    "drain_timeout",
    "health_timeout",
    "machine_node",
    "max_evict_retries",
    "node_condition_types",
    "phase_of",
    "record_normal",
    "record_warning",
    "record_write_failure",
    "write_status_or_retry",
]

log = structlog.get_logger(__name__)


def machine_node(deps: Deps, machine: Mapping[str, Any]) -> dict[str, Any] | Result | None:
    """The cached Node the machine's ``node`` label names; ``None`` without a target cluster, a
    label or such a Node; a short retry (logged) when the cache cannot answer."""
    nodes = deps.listers.nodes
    name = o.label(machine, c.LABEL_NODE) or ""
    if nodes is None or not name:
        return None
    try:
        return o.cached(nodes, name)
    except ApiError as err:
        log.error("node_lookup_failed", machine=object_key(machine), error=str(err))
        return Result.after(c.SHORT_RETRY)


def phase_of(machine: Mapping[str, Any]) -> str:
    return o.text(machine, "status", "currentStatus", "phase")


def _event_object(machine: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Machine", "metadata": dict(o.meta(machine))}


def record_normal(deps: Deps, machine: Mapping[str, Any], reason: str, message: str) -> None:
    if deps.recorder is not None:
        deps.recorder.event(_event_object(machine), EVENT_TYPE_NORMAL, reason, message)


def record_warning(deps: Deps, machine: Mapping[str, Any], reason: str, message: str) -> None:
    log.warning("machine_step_failed", machine=object_key(machine), reason=reason, message=message)
    if deps.recorder is not None:
        deps.recorder.event(_event_object(machine), EVENT_TYPE_WARNING, reason, message)


@dataclass(frozen=True)
class FlowInputs:
    """What one pass of the creation or deletion flow hands every step: the MachineClass, the
    secret data for the driver, and the class as a dict (for metric labels)."""

    machine_class: MachineClass
    secret_data: Mapping[str, bytes]
    class_dict: Mapping[str, Any]

    @classmethod
    def of(cls, machine_class: MachineClass, secret_data: Mapping[str, bytes]) -> FlowInputs:
        return cls(machine_class, secret_data, class_dict(machine_class))


def write_status_or_retry(deps: Deps, machine: Mapping[str, Any], status: Mapping[str, Any]) -> Obj | Result:
    """Write ``status`` (skipped when unchanged); the stored machine, or after a failed write its
    retry (a Warning ``StatusUpdateFailed`` Event unless the failure was a conflict)."""
    write = write_status(deps.writers.machines, machine, status)
    if not write.ok:
        message = f"Machine/status UPDATE failed: {write.error}"
        record_write_failure(deps, machine, "StatusUpdateFailed", message, write)
        return Result.after(write.retry(c.SHORT_RETRY))
    return write.obj


def record_write_failure(
    deps: Deps, machine: Mapping[str, Any], reason: str, message: str, write: Write
) -> None:
    """A failed write's Warning Event; none for a conflict, which is routine: it is logged and
    the next pass (``CONFLICT_RETRY`` later) writes from fresh data."""
    if write.conflict:
        log.debug("write_conflict_retried", machine=object_key(machine), reason=reason)
        return
    record_warning(deps, machine, reason, message)


def _spec_duration(machine: Mapping[str, Any], field: str) -> float | None:
    value = o.parse_go_duration(o.sub(machine, "spec").get(field))
    return value if value is not None and value >= 0 else None


def creation_timeout(deps: Deps, machine: Mapping[str, Any]) -> float:
    """Annotation ``effective-creation-timeout``, else ``spec.creationTimeout``, else the flag."""
    annotated = o.parse_go_duration(o.annotations_of(machine).get(c.ANNOTATION_EFFECTIVE_CREATION_TIMEOUT))
    if annotated is not None and annotated >= 0:
        return annotated
    spec = _spec_duration(machine, "creationTimeout")
    return spec if spec is not None else deps.options.machine_creation_timeout


def health_timeout(deps: Deps, machine: Mapping[str, Any]) -> float:
    spec = _spec_duration(machine, "healthTimeout")
    return spec if spec is not None else deps.options.machine_health_timeout


def drain_timeout(deps: Deps, machine: Mapping[str, Any]) -> float:
    spec = _spec_duration(machine, "drainTimeout")
    return spec if spec is not None else deps.options.machine_drain_timeout


def max_evict_retries(deps: Deps, machine: Mapping[str, Any]) -> int:
    value = o.sub(machine, "spec").get("maxEvictRetries")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return deps.options.machine_max_evict_retries


def node_condition_types(deps: Deps, machine: Mapping[str, Any]) -> list[str]:
    """``spec.nodeConditions`` when set (even empty), else the flag; split on commas, no trimming."""
    value = o.sub(machine, "spec").get("nodeConditions")
    text = value if isinstance(value, str) else deps.options.node_conditions
    return text.split(",")


def elapsed_since(deps: Deps, timestamp: object) -> float | None:
    """Seconds from ``timestamp`` (RFC 3339) to now; ``None`` if it does not parse."""
    when = o.parse_time(timestamp)
    return None if when is None else (now(deps) - when).total_seconds()


def now(deps: Deps) -> _dt.datetime:
    return deps.clock.now().astimezone(_dt.UTC)

"""Machine, class, secret and node builders for the table tests (upstream test-suite shapes)."""

from __future__ import annotations

import base64
from typing import Any

from mcm.apis.machine import constants as c
from mcm.runtime.clock import FakeClock

from .fakes import NS, ts


def condition(kind: str, status: str, clock: FakeClock | None = None, ago: float = 0.0) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": kind, "status": status}
    if clock is not None:
        cond["lastTransitionTime"] = ts(clock, ago)
    return cond


HEALTHY = [
    {"type": "Ready", "status": "True"},
    {"type": "DiskPressure", "status": "False"},
    {"type": "MemoryPressure", "status": "False"},
    {"type": "NetworkUnavailable", "status": "False"},
]


def mk_machine(
    clock: FakeClock,
    name: str = "machine-0",
    *,
    phase: str | None = None,
    description: str | None = None,
    state: str = c.STATE_PROCESSING,
    op_type: str = c.OPERATION_DELETE,
    provider_id: str | None = None,
    node: str | None = None,
    finalizer: bool = True,
    deleting_ago: float | None = None,
    created_ago: float = 0.0,
    phase_ago: float = 0.0,
    conditions: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    class_name: str = "class-0",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "creationTimestamp": ts(clock, created_ago),
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if node is not None:
        metadata["labels"][c.LABEL_NODE] = node
    if finalizer:
        metadata["finalizers"] = [c.MCM_FINALIZER]
    if deleting_ago is not None:
        metadata["deletionTimestamp"] = ts(clock, deleting_ago)
    spec: dict[str, Any] = {"class": {"kind": "MachineClass", "name": class_name}}
    if provider_id is not None:
        spec["providerID"] = provider_id
    status: dict[str, Any] = {}
    if phase is not None:
        status["currentStatus"] = {"phase": phase, "lastUpdateTime": ts(clock, phase_ago)}
    if description is not None:
        status["lastOperation"] = {
            "description": description,
            "state": state,
            "type": op_type,
            "lastUpdateTime": ts(clock, phase_ago),
        }
    if conditions is not None:
        status["conditions"] = conditions
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def mk_class(
    name: str = "class-0", *, finalizer: bool = True, secret: str = "secret-0", deleting: bool = False
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS}
    if finalizer:
        metadata["finalizers"] = [c.MCM_FINALIZER]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": metadata,
        "providerSpec": {},
        "secretRef": {"name": secret, "namespace": NS},
        "provider": "fake",
    }


def mk_secret(name: str = "secret-0", finalizers: list[str] | None = None, **data: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS}
    if finalizers is not None:
        metadata["finalizers"] = finalizers
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": encoded}


def mk_node(name: str, conditions: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {},
        "status": {},
    }
    if conditions is not None:
        node["status"]["conditions"] = conditions
    for key, value in extra.items():
        node.setdefault(key, {}).update(value)
    return node

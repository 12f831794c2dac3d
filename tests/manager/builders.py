"""Objects for the manager's tests: MachineDeployments, MachineSets, Machines, Nodes."""

from __future__ import annotations

from typing import Any

from mcm.apis.machine import constants as c

from .fakes import NS

API = "machine.sapcloud.io/v1alpha1"


def template(
    labels: dict[str, str] | None = None, class_name: str = "class-a", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels if labels is not None else {"name": "pool"}},
        "spec": {"class": {"kind": "MachineClass", "name": class_name}, **spec},
    }


def deployment(
    name: str = "pool",
    replicas: int = 3,
    *,
    strategy: str = "RollingUpdate",
    max_surge: Any = 1,
    max_unavailable: Any = 0,
    labels: dict[str, str] | None = None,
    class_name: str = "class-a",
    **spec: Any,
) -> dict[str, Any]:
    selector_labels = labels if labels is not None else {"name": name}
    strategy_spec: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        strategy_spec["rollingUpdate"] = {"maxSurge": max_surge, "maxUnavailable": max_unavailable}
    return {
        "apiVersion": API,
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector_labels)},
            "template": template(dict(selector_labels), class_name),
            "strategy": strategy_spec,
            **spec,
        },
    }


def machine_set(
    name: str = "set",
    replicas: int = 3,
    *,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    selector_labels = labels if labels is not None else {"name": name}
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "labels": dict(selector_labels)}
    if owner is not None:
        metadata["ownerReferences"] = [controller_ref(owner, "MachineDeployment")]
    return {
        "apiVersion": API,
        "kind": "MachineSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector_labels)},
            "template": template(dict(selector_labels)),
            **spec,
        },
    }


def controller_ref(owner: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def machine(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    phase: str = "",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "labels": labels if labels is not None else {"name": "set"},
    }
    if owner is not None:
        metadata["ownerReferences"] = [controller_ref(owner, "MachineSet")]
    if annotations:
        metadata["annotations"] = annotations
    body: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Machine",
        "metadata": metadata,
        "spec": {"class": {"kind": "MachineClass", "name": "class-a"}},
    }
    if phase:
        body["status"] = {"currentStatus": {"phase": phase}}
    return body


def node(name: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **metadata}, "spec": {}}


__all__ = ["NS", "c", "controller_ref", "deployment", "machine", "machine_set", "node", "template"]

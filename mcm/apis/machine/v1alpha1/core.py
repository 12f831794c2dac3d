"""Core Kubernetes sub-structures embedded in the machine API: node spec, taints, conditions,
addresses and secret references (``k8s.io/api/core/v1`` shapes, typed as far as mcm uses them).
"""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcm.apis.machine.v1alpha1.model import (
    BOOL,
    OPAQUE,
    STR,
    TIME,
    Model,
    json_field,
    list_of,
    object_of,
)

__all__ = ["NodeAddress", "NodeCondition", "NodeSpec", "SecretReference", "Taint"]


@dataclass(slots=True, kw_only=True)
class Taint(Model):
    """``corev1.Taint``; nodes match taints by key and effect."""

    key: str | None = json_field("key", STR)
    value: str | None = json_field("value", STR)
    effect: str | None = json_field("effect", STR)
    time_added: str | None = json_field("timeAdded", TIME)


@dataclass(slots=True, kw_only=True)
class NodeSpec(Model):
    """``corev1.NodeSpec`` as it appears in a machine's node template (only taints are synced)."""

    config_source: Any = json_field("configSource", OPAQUE)
    external_id: str | None = json_field("externalID", STR)
    pod_cidr: str | None = json_field("podCIDR", STR)
    pod_cidrs: list[str] | None = json_field("podCIDRs", list_of(STR))
    provider_id: str | None = json_field("providerID", STR)
    taints: list[Taint] | None = json_field("taints", list_of(object_of(Taint)))
    unschedulable: bool | None = json_field("unschedulable", BOOL)


@dataclass(slots=True, kw_only=True)
class NodeCondition(Model):
    """``corev1.NodeCondition``; a Machine mirrors its Node's conditions."""

    type: str | None = json_field("type", STR)
    status: str | None = json_field("status", STR)
    last_heartbeat_time: str | None = json_field("lastHeartbeatTime", TIME)
    last_transition_time: str | None = json_field("lastTransitionTime", TIME)
    reason: str | None = json_field("reason", STR)
    message: str | None = json_field("message", STR)


@dataclass(slots=True, kw_only=True)
class NodeAddress(Model):
    """``corev1.NodeAddress`` (``type`` such as ``InternalIP``, ``Hostname``)."""

    type: str | None = json_field("type", STR)
    address: str | None = json_field("address", STR)


@dataclass(slots=True, kw_only=True)
class SecretReference(Model):
    """``corev1.SecretReference``: a Secret by name and namespace."""

    name: str | None = json_field("name", STR)
    namespace: str | None = json_field("namespace", STR)

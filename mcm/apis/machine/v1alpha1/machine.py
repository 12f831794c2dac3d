"""The ``Machine`` kind: one VM and the Node it backs (HEAD schema; ``status.node`` is gone, the
``node`` label names the Node)."""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from mcm.apis.machine.v1alpha1.core import NodeAddress, NodeCondition, NodeSpec
from mcm.apis.machine.v1alpha1.meta import ListMeta, ObjectMeta
from mcm.apis.machine.v1alpha1.model import (
    BOOL,
    DURATION,
    INT,
    STR,
    TIME,
    Model,
    json_field,
    list_of,
    nested_field,
    object_of,
)
from mcm.apis.machine.v1alpha1.shared import ClassSpec, LastOperation

__all__ = [
    "API_VERSION",
    "CurrentStatus",
    "Machine",
    "MachineList",
    "MachineSpec",
    "MachineStatus",
    "MachineTemplateSpec",
    "NodeTemplateSpec",
]

API_VERSION = "machine.sapcloud.io/v1alpha1"
"""``apiVersion`` of every kind in this package."""


@dataclass(slots=True, kw_only=True)
class NodeTemplateSpec(Model):
    """Annotations, labels (``metadata``) and taints (``spec.taints``) kept on the backing Node."""

    metadata: ObjectMeta = nested_field("metadata", ObjectMeta)
    spec: NodeSpec = nested_field("spec", NodeSpec)


@dataclass(slots=True, kw_only=True)
class MachineSpec(Model):
    """Desired state of a machine; the timeout and retry fields override the controller flags.

    Durations are Go duration strings (``"20m0s"``); ``None`` means "use the flag default".
    """

    class_: ClassSpec = nested_field("class", ClassSpec)
    provider_id: str | None = json_field("providerID", STR)
    node_template: NodeTemplateSpec = nested_field("nodeTemplate", NodeTemplateSpec)
    drain_timeout: str | None = json_field("drainTimeout", DURATION)
    health_timeout: str | None = json_field("healthTimeout", DURATION)
    creation_timeout: str | None = json_field("creationTimeout", DURATION)
    in_place_update_timeout: str | None = json_field("inPlaceUpdateTimeout", DURATION)
    machine_preserve_timeout: str | None = json_field("machinePreserveTimeout", DURATION)
    disable_health_timeout: bool | None = json_field("disableHealthTimeout", BOOL)
    max_evict_retries: int | None = json_field("maxEvictRetries", INT)
    node_conditions: str | None = json_field("nodeConditions", STR)


@dataclass(slots=True, kw_only=True)
class CurrentStatus(Model):
    """Phase of a machine and the time it last changed (the base of the timeouts)."""

    phase: str | None = json_field("phase", STR)
    timeout_active: bool | None = json_field("timeoutActive", BOOL)
    last_update_time: str | None = json_field("lastUpdateTime", TIME)
    preserve_expiry_time: str | None = json_field("preserveExpiryTime", TIME)


@dataclass(slots=True, kw_only=True)
class MachineStatus(Model):
    """Observed state of a machine."""

    addresses: list[NodeAddress] | None = json_field("addresses", list_of(object_of(NodeAddress)))
    conditions: list[NodeCondition] | None = json_field("conditions", list_of(object_of(NodeCondition)))
    last_operation: LastOperation = nested_field("lastOperation", LastOperation)
    current_status: CurrentStatus = nested_field("currentStatus", CurrentStatus)
    last_known_state: str | None = json_field("lastKnownState", STR)


@dataclass(slots=True, kw_only=True)
class Machine(Model):
    """``machine.sapcloud.io/v1alpha1`` ``Machine``."""

    KIND: ClassVar[str] = "Machine"

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ObjectMeta = nested_field("metadata", ObjectMeta)
    spec: MachineSpec = nested_field("spec", MachineSpec)
    status: MachineStatus = nested_field("status", MachineStatus)

    @classmethod
    def new(cls, name: str, namespace: str) -> Self:
        """A Machine with ``apiVersion``, ``kind``, name and namespace set."""
        metadata = ObjectMeta(name=name, namespace=namespace)
        return cls(api_version=API_VERSION, kind=cls.KIND, metadata=metadata)

    @property
    def node_name(self) -> str | None:
        """Name of the backing Node: the ``node`` label (HEAD has no ``status.node``)."""
        return self.metadata.label("node")


@dataclass(slots=True, kw_only=True)
class MachineList(Model):
    """``MachineList``."""

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ListMeta = nested_field("metadata", ListMeta)
    items: list[Machine] | None = json_field("items", list_of(object_of(Machine)))


@dataclass(slots=True, kw_only=True)
class MachineTemplateSpec(Model):
    """Metadata and spec given to machines created by a set or deployment."""

    metadata: ObjectMeta = nested_field("metadata", ObjectMeta)
    spec: MachineSpec = nested_field("spec", MachineSpec)

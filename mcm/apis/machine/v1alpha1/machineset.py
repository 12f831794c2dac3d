"""The ``MachineSet`` kind: a replicated set of identical machines (not reconciled by this binary,
typed so tools and tests can read and write it)."""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mcm.apis.machine.v1alpha1.machine import MachineTemplateSpec
from mcm.apis.machine.v1alpha1.meta import LabelSelector, ListMeta, ObjectMeta
from mcm.apis.machine.v1alpha1.model import (
    INT,
    STR,
    TIME,
    Model,
    json_field,
    list_of,
    nested_field,
    object_of,
)
from mcm.apis.machine.v1alpha1.shared import ClassSpec, LastOperation, MachineSummary

__all__ = ["MachineSet", "MachineSetCondition", "MachineSetList", "MachineSetSpec", "MachineSetStatus"]


@dataclass(slots=True, kw_only=True)
class MachineSetSpec(Model):
    """Desired state of a machine set."""

    replicas: int | None = json_field("replicas", INT)
    selector: LabelSelector | None = json_field("selector", object_of(LabelSelector))
    machine_class: ClassSpec = nested_field("machineClass", ClassSpec)
    template: MachineTemplateSpec = nested_field("template", MachineTemplateSpec)
    min_ready_seconds: int | None = json_field("minReadySeconds", INT)
    auto_preserve_failed_machine_max: int | None = json_field("autoPreserveFailedMachineMax", INT)


@dataclass(slots=True, kw_only=True)
class MachineSetCondition(Model):
    """A condition of a machine set (types ``ReplicaFailure``, ``Frozen``)."""

    type: str | None = json_field("type", STR)
    status: str | None = json_field("status", STR)
    last_transition_time: str | None = json_field("lastTransitionTime", TIME)
    reason: str | None = json_field("reason", STR)
    message: str | None = json_field("message", STR)


@dataclass(slots=True, kw_only=True)
class MachineSetStatus(Model):
    """Observed state of a machine set. The conditions live under the JSON key
    ``machineSetCondition`` (singular, as upstream)."""

    replicas: int | None = json_field("replicas", INT)
    fully_labeled_replicas: int | None = json_field("fullyLabeledReplicas", INT)
    ready_replicas: int | None = json_field("readyReplicas", INT)
    available_replicas: int | None = json_field("availableReplicas", INT)
    observed_generation: int | None = json_field("observedGeneration", INT)
    conditions: list[MachineSetCondition] | None = json_field(
        "machineSetCondition", list_of(object_of(MachineSetCondition))
    )
    last_operation: LastOperation = nested_field("lastOperation", LastOperation)
    failed_machines: list[MachineSummary] | None = json_field(
        "failedMachines", list_of(object_of(MachineSummary))
    )
    auto_preserve_failed_machine_count: int | None = json_field("autoPreserveFailedMachineCount", INT)


@dataclass(slots=True, kw_only=True)
class MachineSet(Model):
    """``machine.sapcloud.io/v1alpha1`` ``MachineSet``."""

    KIND: ClassVar[str] = "MachineSet"

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ObjectMeta = nested_field("metadata", ObjectMeta)
    spec: MachineSetSpec = nested_field("spec", MachineSetSpec)
    status: MachineSetStatus = nested_field("status", MachineSetStatus)


@dataclass(slots=True, kw_only=True)
class MachineSetList(Model):
    """``MachineSetList``."""

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ListMeta = nested_field("metadata", ListMeta)
    items: list[MachineSet] | None = json_field("items", list_of(object_of(MachineSet)))

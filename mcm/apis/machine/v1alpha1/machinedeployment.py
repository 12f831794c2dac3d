"""The ``MachineDeployment`` kind: declarative roll-outs of machine sets (not reconciled by this
binary, typed so tools and tests can read and write it)."""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mcm.apis.machine.v1alpha1.machine import MachineTemplateSpec
from mcm.apis.machine.v1alpha1.meta import LabelSelector, ListMeta, ObjectMeta
from mcm.apis.machine.v1alpha1.model import (
    BOOL,
    INT,
    INT_OR_STRING,
    STR,
    TIME,
    Model,
    json_field,
    list_of,
    nested_field,
    object_of,
)
from mcm.apis.machine.v1alpha1.shared import MachineSummary

__all__ = [
    "InPlaceUpdateMachineDeployment",
    "MachineDeployment",
    "MachineDeploymentCondition",
    "MachineDeploymentList",
    "MachineDeploymentSpec",
    "MachineDeploymentStatus",
    "MachineDeploymentStrategy",
    "RollbackConfig",
    "RollingUpdateMachineDeployment",
]


@dataclass(slots=True, kw_only=True)
class RollingUpdateMachineDeployment(Model):
    """Parameters of the ``RollingUpdate`` strategy (numbers or percentages)."""

    max_unavailable: int | str | None = json_field("maxUnavailable", INT_OR_STRING)
    max_surge: int | str | None = json_field("maxSurge", INT_OR_STRING)


@dataclass(slots=True, kw_only=True)
class InPlaceUpdateMachineDeployment(Model):
    """Parameters of the ``InPlaceUpdate`` strategy; ``orchestration_type`` is ``Auto`` or ``Manual``."""

    max_unavailable: int | str | None = json_field("maxUnavailable", INT_OR_STRING)
    max_surge: int | str | None = json_field("maxSurge", INT_OR_STRING)
    orchestration_type: str | None = json_field("orchestrationType", STR)


@dataclass(slots=True, kw_only=True)
class MachineDeploymentStrategy(Model):
    """How machines are replaced: ``Recreate``, ``RollingUpdate`` or ``InPlaceUpdate``."""

    type: str | None = json_field("type", STR)
    rolling_update: RollingUpdateMachineDeployment | None = json_field(
        "rollingUpdate", object_of(RollingUpdateMachineDeployment)
    )
    in_place_update: InPlaceUpdateMachineDeployment | None = json_field(
        "inPlaceUpdate", object_of(InPlaceUpdateMachineDeployment)
    )


@dataclass(slots=True, kw_only=True)
class RollbackConfig(Model):
    """Deprecated rollback request; revision 0 means the previous revision."""

    revision: int | None = json_field("revision", INT)


@dataclass(slots=True, kw_only=True)
class MachineDeploymentSpec(Model):
    """Desired state of a machine deployment (``template`` is required by the CRD)."""

    replicas: int | None = json_field("replicas", INT)
    selector: LabelSelector | None = json_field("selector", object_of(LabelSelector))
    template: MachineTemplateSpec = nested_field("template", MachineTemplateSpec)
    strategy: MachineDeploymentStrategy = nested_field("strategy", MachineDeploymentStrategy)
    min_ready_seconds: int | None = json_field("minReadySeconds", INT)
    revision_history_limit: int | None = json_field("revisionHistoryLimit", INT)
    paused: bool | None = json_field("paused", BOOL)
    rollback_to: RollbackConfig | None = json_field("rollbackTo", object_of(RollbackConfig))
    progress_deadline_seconds: int | None = json_field("progressDeadlineSeconds", INT)
    auto_preserve_failed_machine_max: int | None = json_field("autoPreserveFailedMachineMax", INT)


@dataclass(slots=True, kw_only=True)
class MachineDeploymentCondition(Model):
    """A condition of a machine deployment (``Available``, ``Progressing``, ``ReplicaFailure``,
    ``Frozen``)."""

    type: str | None = json_field("type", STR)
    status: str | None = json_field("status", STR)
    last_update_time: str | None = json_field("lastUpdateTime", TIME)
    last_transition_time: str | None = json_field("lastTransitionTime", TIME)
    reason: str | None = json_field("reason", STR)
    message: str | None = json_field("message", STR)


@dataclass(slots=True, kw_only=True)
class MachineDeploymentStatus(Model):
    """Observed state of a machine deployment."""

    observed_generation: int | None = json_field("observedGeneration", INT)
    replicas: int | None = json_field("replicas", INT)
    updated_replicas: int | None = json_field("updatedReplicas", INT)
    ready_replicas: int | None = json_field("readyReplicas", INT)
    available_replicas: int | None = json_field("availableReplicas", INT)
    unavailable_replicas: int | None = json_field("unavailableReplicas", INT)
    conditions: list[MachineDeploymentCondition] | None = json_field(
        "conditions", list_of(object_of(MachineDeploymentCondition))
    )
    collision_count: int | None = json_field("collisionCount", INT)
    failed_machines: list[MachineSummary] | None = json_field(
        "failedMachines", list_of(object_of(MachineSummary))
    )


@dataclass(slots=True, kw_only=True)
class MachineDeployment(Model):
    """``machine.sapcloud.io/v1alpha1`` ``MachineDeployment``."""

    KIND: ClassVar[str] = "MachineDeployment"

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ObjectMeta = nested_field("metadata", ObjectMeta)
    spec: MachineDeploymentSpec = nested_field("spec", MachineDeploymentSpec)
    status: MachineDeploymentStatus = nested_field("status", MachineDeploymentStatus)


@dataclass(slots=True, kw_only=True)
class MachineDeploymentList(Model):
    """``MachineDeploymentList``."""

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ListMeta = nested_field("metadata", ListMeta)
    items: list[MachineDeployment] | None = json_field("items", list_of(object_of(MachineDeployment)))

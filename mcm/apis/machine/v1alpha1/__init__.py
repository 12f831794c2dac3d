"""Typed models of ``machine.sapcloud.io/v1alpha1`` (HEAD schema).

Start with :class:`Machine` and :class:`MachineClass`. Every model decodes with
``from_dict(dict)`` and encodes with ``to_dict()``; the round trip is lossless and keeps unknown
fields (see :mod:`.model`). Times are RFC 3339 strings and durations Go duration strings,
exactly as the API server sent them.
"""

from mcm.apis.machine.v1alpha1.core import NodeAddress, NodeCondition, NodeSpec, SecretReference, Taint
from mcm.apis.machine.v1alpha1.machine import (
    API_VERSION,
    CurrentStatus,
    Machine,
    MachineList,
    MachineSpec,
    MachineStatus,
    MachineTemplateSpec,
    NodeTemplateSpec,
)
from mcm.apis.machine.v1alpha1.machineclass import MachineClass, MachineClassList, NodeTemplate
from mcm.apis.machine.v1alpha1.machinedeployment import (
    InPlaceUpdateMachineDeployment,
    MachineDeployment,
    MachineDeploymentCondition,
    MachineDeploymentList,
    MachineDeploymentSpec,
    MachineDeploymentStatus,
    MachineDeploymentStrategy,
    RollbackConfig,
    RollingUpdateMachineDeployment,
)
from mcm.apis.machine.v1alpha1.machineset import (
    MachineSet,
    MachineSetCondition,
    MachineSetList,
    MachineSetSpec,
    MachineSetStatus,
)
from mcm.apis.machine.v1alpha1.meta import (
    LabelSelector,
    LabelSelectorRequirement,
    ListMeta,
    ObjectMeta,
    OwnerReference,
)
from mcm.apis.machine.v1alpha1.model import Model
from mcm.apis.machine.v1alpha1.shared import ClassSpec, LastOperation, MachineSummary

__all__ = [
    "API_VERSION",
    "ClassSpec",
    "CurrentStatus",
    "InPlaceUpdateMachineDeployment",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LastOperation",
    "ListMeta",
    "Machine",
    "MachineClass",
    "MachineClassList",
    "MachineDeployment",
    "MachineDeploymentCondition",
    "MachineDeploymentList",
    "MachineDeploymentSpec",
    "MachineDeploymentStatus",
    "MachineDeploymentStrategy",
    "MachineList",
    "MachineSet",
    "MachineSetCondition",
    "MachineSetList",
    "MachineSetSpec",
    "MachineSetStatus",
    "MachineSpec",
    "MachineStatus",
    "MachineSummary",
    "MachineTemplateSpec",
    "Model",
    "NodeAddress",
    "NodeCondition",
    "NodeSpec",
    "NodeTemplate",
    "NodeTemplateSpec",
    "ObjectMeta",
    "OwnerReference",
    "RollbackConfig",
    "RollingUpdateMachineDeployment",
    "SecretReference",
    "Taint",
]

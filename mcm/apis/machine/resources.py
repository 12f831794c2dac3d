"""The ``machine.sapcloud.io/v1alpha1`` resources, declared once for clients and informers.

They match the CRDs in ``mcm/apis/machine/crds/`` (:func:`mcm.packaged.machine_crds`): plural,
kind, namespaced.
"""

from __future__ import annotations

from mcm.runtime.client.resources import Resource

__all__ = ["MACHINES", "MACHINE_CLASSES", "MACHINE_DEPLOYMENTS", "MACHINE_RESOURCES", "MACHINE_SETS"]

_GROUP = "machine.sapcloud.io"
_VERSION = "v1alpha1"

MACHINES = Resource(_GROUP, _VERSION, "machines", "Machine", namespaced=True)
MACHINE_CLASSES = Resource(_GROUP, _VERSION, "machineclasses", "MachineClass", namespaced=True)
MACHINE_SETS = Resource(_GROUP, _VERSION, "machinesets", "MachineSet", namespaced=True)
MACHINE_DEPLOYMENTS = Resource(_GROUP, _VERSION, "machinedeployments", "MachineDeployment", namespaced=True)

MACHINE_RESOURCES: tuple[Resource, ...] = (MACHINES, MACHINE_CLASSES, MACHINE_SETS, MACHINE_DEPLOYMENTS)
"""All four kinds, in dependency order (a Machine references a MachineClass)."""

"""The state one MachineDeployment pass works on: the deployment as last stored, the
MachineSets it controls and their machines.

Every write of the deployment goes through :class:`DeploymentPass`, which keeps ``deployment``
equal to what the API server returned, so a later write of the same pass starts from it
(upstream kept writing a copy its own earlier writes had made stale: the first pass of a new
deployment usually failed with a conflict). Guarantees: ``machine_sets`` holds each claimed set
once, replaced by its stored version after every write of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcm.manager import constants as k
from mcm.manager.context import Deps
from mcm.runtime import objects as o

__all__ = ["DeploymentPass", "PassAborted"]


class PassAborted(Exception):
    """The pass cannot go on now; look again after ``after`` seconds (not an error)."""

    def __init__(self, reason: str, after: float) -> None:
        super().__init__(reason)
        self.after = after


@dataclass
class DeploymentPass:
    """One pass over one MachineDeployment (see the module docstring)."""

    deps: Deps
    deployment: dict[str, Any]
    machine_sets: list[Mapping[str, Any]] = field(default_factory=list)
    machine_map: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    """MachineSet UID → the machines it controls that the deployment selector selects."""

    @property
    def name(self) -> str:
        return o.name_of(self.deployment)

    @property
    def namespace(self) -> str:
        return o.namespace_of(self.deployment)

    def update(self, deployment: Mapping[str, Any]) -> dict[str, Any]:
        """Write metadata and spec; the stored deployment becomes the current one."""
        stored = self.deps.clients.machine_deployments.update(dict(deployment), namespace=self.namespace)
        self.deployment = dict(stored)
        return self.deployment

    def update_status(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """Write the status subresource of the current deployment."""
        body = {**self.deployment, "status": dict(status)}
        stored = self.deps.clients.machine_deployments.update_status(body, namespace=self.namespace)
        self.deployment = dict(stored)
        return self.deployment

    def event(self, event_type: str, reason: str, message: str) -> None:
        self.deps.event(self.deployment, k.KIND_MACHINE_DEPLOYMENT, event_type, reason, message)

    def replace_set(self, machine_set: Mapping[str, Any]) -> Mapping[str, Any]:
        """Record the stored version of a set this pass wrote."""
        uid = o.meta(machine_set).get("uid")
        self.machine_sets = [machine_set if o.meta(ms).get("uid") == uid else ms for ms in self.machine_sets]
        return machine_set

    def current(self, machine_set: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The latest version this pass has of ``machine_set`` (``None`` stays ``None``)."""
        if machine_set is None:
            return None
        uid = o.meta(machine_set).get("uid")
        return next((ms for ms in self.machine_sets if o.meta(ms).get("uid") == uid), machine_set)

    def currents(self, machine_sets: list[Mapping[str, Any] | None]) -> list[Mapping[str, Any] | None]:
        return [self.current(ms) for ms in machine_sets]

    def add_set(self, machine_set: Mapping[str, Any]) -> Mapping[str, Any]:
        if all(o.meta(ms).get("uid") != o.meta(machine_set).get("uid") for ms in self.machine_sets):
            self.machine_sets.append(machine_set)
        return machine_set

    def write_set(self, machine_set: Mapping[str, Any]) -> Mapping[str, Any]:
        """Update a MachineSet (metadata and spec) and record its stored version."""
        stored = self.deps.clients.machine_sets.update(dict(machine_set), namespace=self.namespace)
        return self.replace_set(stored)

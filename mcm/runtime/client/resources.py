"""Resources by (group, version, resource): name each API resource once and derive its paths.

A :class:`Resource` knows its URL prefix (``/api/v1`` for the core group, ``/apis/<g>/<v>``
otherwise), whether it is namespaced, and its qualified name as the API server writes it in
error messages (``pods``, ``leases.coordination.k8s.io``). The constants below are the built-in
resources the controllers use; custom resources are declared the same way where their API lives.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BUILTIN_RESOURCES",
    "CONFIG_MAPS",
    "CUSTOM_RESOURCE_DEFINITIONS",
    "EVENTS",
    "EVENTS_V1",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PERSISTENT_VOLUMES",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "SECRETS",
    "VOLUME_ATTACHMENTS",
    "Resource",
    "builtin",
]


@dataclass(frozen=True)
class Resource:
    """One API resource. ``group`` is ``""`` for the core group."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        """``v1`` for the core group, ``<group>/<version>`` otherwise (an object's apiVersion)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def prefix(self) -> str:
        """URL prefix of the group version: ``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified_name(self) -> str:
        """``pods`` or ``machines.machine.sapcloud.io``, as in the server's error messages."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def __str__(self) -> str:
        return f"{self.qualified_name}/{self.version}"


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
PERSISTENT_VOLUME_CLAIMS = Resource(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True
)
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False)
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)

BUILTIN_RESOURCES: tuple[Resource, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    SECRETS,
    CONFIG_MAPS,
    EVENTS,
    PERSISTENT_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    EVENTS_V1,
    LEASES,
    POD_DISRUPTION_BUDGETS,
    VOLUME_ATTACHMENTS,
    CUSTOM_RESOURCE_DEFINITIONS,
)

_BY_QUALIFIED_NAME = {r.qualified_name: r for r in BUILTIN_RESOURCES}


def builtin(qualified_name: str) -> Resource:
    """Look up a built-in resource by qualified name (``pods``, ``leases.coordination.k8s.io``).

    Raises ``KeyError`` for names not in the table.
    """
    return _BY_QUALIFIED_NAME[qualified_name]

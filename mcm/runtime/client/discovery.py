"""Discovery: what the server serves (the port of client-go's ``DiscoveryClient`` reads we use).

Guarantees:

- :meth:`DiscoveryClient.server_groups` lists the legacy core group (name ``""``, version
  ``v1``) first, then the groups of ``/apis``, as client-go's ``ServerGroups`` does.
- :meth:`DiscoveryClient.server_resources_for_group_version` reads ``/api/v1`` for ``"v1"`` and
  ``/apis/<group>/<version>`` otherwise, and raises ``NotFound`` for an unserved group version.
- Nothing is cached: every call is one request through the cluster's throttled transport.
"""

from __future__ import annotations

from typing import Any

from mcm.runtime.client.transport import Transport
from mcm.runtime.client.types import Object

__all__ = ["DiscoveryClient"]


class DiscoveryClient:
    """Discovery reads over a cluster's transport."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def server_version(self) -> Object:
        """The ``/version`` document (``major``, ``minor``, ``gitVersion``, …)."""
        version: Object = self._transport.request("GET", "/version")
        return version

    def server_groups(self) -> list[Object]:
        """``APIGroup`` entries: the core group (name ``""``) first, then those of ``/apis``."""
        core: Object = self._transport.request("GET", "/api")
        groups: list[Object] = []
        versions = [v for v in core.get("versions") or [] if isinstance(v, str)]
        if versions:
            entries = [{"groupVersion": v, "version": v} for v in versions]
            groups.append({"name": "", "versions": entries, "preferredVersion": entries[0]})
        named: Object = self._transport.request("GET", "/apis")
        groups.extend(g for g in named.get("groups") or [] if isinstance(g, dict))
        return groups

    def preferred_version(self, group: str) -> str | None:
        """The preferred ``groupVersion`` of ``group`` (``"policy/v1"``), or None if not served."""
        for entry in self.server_groups():
            if entry.get("name") == group:
                preferred: dict[str, Any] = entry.get("preferredVersion") or {}
                gv = preferred.get("groupVersion")
                return gv if isinstance(gv, str) else None
        return None

    def server_resources_for_group_version(self, group_version: str) -> Object:
        """The ``APIResourceList`` of one group version (``"v1"``, ``"storage.k8s.io/v1"``)."""
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        resources: Object = self._transport.request("GET", path)
        return resources

    def has_resource(self, group_version: str, name: str, kind: str | None = None) -> bool:
        """Whether ``group_version`` serves resource ``name`` (e.g. ``pods/eviction``), of ``kind``."""
        listing = self.server_resources_for_group_version(group_version)
        for resource in listing.get("resources") or []:
            if not isinstance(resource, dict) or resource.get("name") != name:
                continue
            if kind is None or resource.get("kind") == kind:
                return True
        return False

"""Discovery, version and OpenAPI documents, generated from the registry (the
documents kube-apiserver serves at ``/api``, ``/apis``, ``/version`` and ``/openapi/v3``).

Guarantees:

- ``/apis`` lists every built-in group and every group of an Established CRD; preferred versions
  are the served ones. ``/api/v1`` lists ``pods/eviction`` as ``policy/v1 Eviction``; scale
  subresources are ``autoscaling/v1 Scale``.
- Documents are rebuilt only when the registry changes (cached by ``registry.generation``).
- ``/version`` says the emulator is Kubernetes :data:`KUBERNETES_VERSION`, with the fields a
  kube-apiserver of that release reports (emulation version = its own minor, minimum
  compatibility version = the minor before).
- ``/openapi/v3`` names one document per group-version; each holds one path item per kind with a
  ``patch`` operation carrying ``x-kubernetes-group-version-kind`` and a ``fieldValidation``
  parameter, which is what kubectl needs to send ``fieldValidation=Strict``.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from mcm.emulator.openapi import component_schemas
from mcm.emulator.registry import Registry, ResourceType
from mcm.emulator.store import Obj, encode

__all__ = ["KUBERNETES_VERSION", "Discovery"]

KUBERNETES_VERSION = "v1.37.2"
"""The Kubernetes release the emulator reports (``/version``, the OpenAPI ``info.version``): the
release of the real kube-apiserver its conformance tests (tests/conformance) hold it to, pinned
by envtest's Go module (``mcm/testing/envtest/gomodule/go.mod``). A test checks the two agree,
so version-gated behaviour and tests see one version."""

_SUB_VERBS = ["get", "patch", "update"]


def _entry(rt: ResourceType) -> Obj:
    entry: Obj = {
        "name": rt.resource,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def _sub_entries(rt: ResourceType) -> list[Obj]:
    entries: list[Obj] = []
    base = {"singularName": "", "namespaced": rt.namespaced}
    if rt.eviction:
        entries.append(
            {
                "name": f"{rt.resource}/eviction",
                **base,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }
        )
    if rt.finalize:
        entries.append({"name": f"{rt.resource}/finalize", **base, "kind": rt.kind, "verbs": ["update"]})
    if rt.scale is not None:
        entries.append(
            {
                "name": f"{rt.resource}/scale",
                **base,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": list(_SUB_VERBS),
            }
        )
    if rt.status:
        entries.append({"name": f"{rt.resource}/status", **base, "kind": rt.kind, "verbs": list(_SUB_VERBS)})
    return entries


class Discovery:
    """Encoded discovery documents for one registry."""

    def __init__(self, registry: Registry, git_version: str = KUBERNETES_VERSION) -> None:
        self.registry = registry
        self.git_version = git_version
        self._lock = threading.RLock()
        self._generation = -1
        self._cache: dict[str, bytes | None] = {}

    def _cached(self, key: str, build: Any) -> bytes | None:
        with self._lock:
            if self._generation != self.registry.generation:
                self._cache = {}
                self._generation = self.registry.generation
            if key not in self._cache:
                doc = build()
                self._cache[key] = None if doc is None else encode(doc)
            return self._cache[key]

    def version(self) -> bytes:
        """``/version``."""
        major, minor = self.git_version.lstrip("v").split(".")[:2]
        return encode(
            {
                "major": major,
                "minor": minor,
                "emulationMajor": major,
                "emulationMinor": minor,
                "minCompatibilityMajor": major,
                "minCompatibilityMinor": str(max(0, int(minor) - 1)),
                "gitVersion": self.git_version,
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.26.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )

    def api_versions(self, server_address: str) -> bytes:
        """``/api``."""
        return encode(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
            }
        )

    def _group(self, name: str, versions: list[str]) -> Obj:
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": entries, "preferredVersion": entries[0]}

    def group_list(self) -> bytes:
        """``/apis``."""

        def build() -> Obj:
            groups = [self._group(g, vs) for g, vs in self.registry.groups().items() if g]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

        result = self._cached("apis", build)
        assert result is not None
        return result

    def group(self, name: str) -> bytes | None:
        """``/apis/{group}`` or None if not served."""

        def build() -> Obj | None:
            versions = self.registry.groups().get(name)
            if not versions or not name:
                return None
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(name, versions)}

        return self._cached(f"group/{name}", build)

    def resource_list(self, group: str, version: str) -> bytes | None:
        """``/api/v1`` or ``/apis/{group}/{version}``, or None if not served."""

        def build() -> Obj | None:
            types = [rt for rt in self.registry.all() if rt.group == group and rt.version == version]
            if not types:
                return None
            resources: list[Obj] = []
            for rt in types:
                resources.append(_entry(rt))
                resources.extend(_sub_entries(rt))
            group_version = f"{group}/{version}" if group else version
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": resources,
            }

        return self._cached(f"resources/{group}/{version}", build)

    def _openapi_doc(self, group: str, version: str) -> Obj | None:
        types = [rt for rt in self.registry.all() if rt.group == group and rt.version == version]
        if not types:
            return None
        paths: Obj = {}
        prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        for rt in types:
            ns = "/namespaces/{namespace}" if rt.namespaced else ""
            gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
            operation = {
                "operationId": f"patch{rt.kind}",
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            }
            paths[f"{prefix}{ns}/{rt.resource}/{{name}}"] = {"patch": operation}
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": self.git_version},
            "paths": paths,
            "components": {"schemas": component_schemas(types)},
        }

    def openapi(self, subpath: str) -> bytes | None:
        """``/openapi/v3`` (``subpath`` empty) or one group-version document."""
        if subpath == "":

            def build_root() -> Obj:
                paths: Obj = {}
                for group, versions in self.registry.groups().items():
                    for version in versions:
                        key = f"apis/{group}/{version}" if group else f"api/{version}"
                        doc = self.openapi(key) or b""
                        digest = hashlib.sha512(doc).hexdigest()[:64].upper()
                        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
                return {"paths": paths}

            return self._cached("openapi", build_root)
        parts = subpath.split("/")
        if len(parts) == 2 and parts[0] == "api":
            group, version = "", parts[1]
        elif len(parts) == 3 and parts[0] == "apis":
            group, version = parts[1], parts[2]
        else:
            return None
        return self._cached(f"openapi/{subpath}", lambda: self._openapi_doc(group, version))

"""The served resource types: the built-in ones (:func:`builtin_types`) plus types defined by CRDs.

Guarantees:

- Every served group/version/resource maps to exactly one :class:`ResourceType`; lookups by path
  segments, by storage key and by group/kind are O(1).
- The table is replaced copy-on-write, so readers never see a half-applied change and need no
  lock. Writers (CRD establish/removal) run under the emulator lock.
- A CRD's types appear when its ``Established`` condition is True and disappear when the CRD is
  removed; ``generation`` increases on every change (discovery documents are cached by it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcm.emulator.deployments import DEPLOYMENT
from mcm.emulator.kinds import Strategy, custom_strategy, strategy_for
from mcm.emulator.services import ENDPOINTS, SERVICE, SERVICE_ACCOUNT

__all__ = ["ALL_VERBS", "Registry", "ResourceType", "ScaleSpec", "builtin_types", "types_from_crd"]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CRD_STORAGE_KEY = "customresourcedefinitions.apiextensions.k8s.io"


@dataclass(frozen=True)
class ScaleSpec:
    """Where the scale subresource reads and writes replicas."""

    spec_path: str = ".spec.replicas"
    status_path: str = ".status.replicas"
    selector_path: str | None = None


@dataclass(frozen=True)
class ResourceType:
    """One served resource of one group/version."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    strategy: Strategy
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False
    scale: ScaleSpec | None = None
    eviction: bool = False
    finalize: bool = False
    verbs: tuple[str, ...] = ALL_VERBS
    builtin: bool = True
    storage: str = ""
    served_from_crd: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def list_kind(self) -> str:
        """The list kind, ``<Kind>List``."""
        return f"{self.kind}List"

    @property
    def group_version(self) -> str:
        """``v1`` for the core group, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified_resource(self) -> str:
        """``pods`` or ``machines.machine.sapcloud.io``."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def qualified_kind(self) -> str:
        """``Node`` or ``Machine.machine.sapcloud.io``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def storage_key(self) -> str:
        """The key of this type's data in the store (shared by aliases such as events.k8s.io)."""
        return self.storage or self.qualified_resource


def _builtin(
    group: str, version: str, resource: str, kind: str, namespaced: bool, **extra: Any
) -> ResourceType:
    singular = extra.pop("singular", kind.lower())
    strategy = extra.pop("strategy", None) or (
        Strategy() if kind == "ConfigMap" else strategy_for(group, kind)
    )
    return ResourceType(
        group=group,
        version=version,
        resource=resource,
        kind=kind,
        namespaced=namespaced,
        strategy=strategy,
        singular=singular,
        **extra,
    )


def builtin_types() -> list[ResourceType]:
    """The built-in resources mcm uses (Namespaces, Nodes, Pods, PVs, PVCs, Events, Leases, Secrets,
    PDBs, VolumeAttachments, CRDs; plus ConfigMaps, Services, Endpoints, ServiceAccounts,
    the self-subject reviews and apps/v1 Deployments), grouped by API group in serving order."""
    return [
        *_core_types(),
        *_authorization_types(),
        *_authentication_types(),
        *_policy_types(),
        *_apps_types(),
        *_storage_types(),
        *_coordination_types(),
        *_events_types(),
        *_apiextensions_types(),
    ]


def _core_types() -> list[ResourceType]:
    """The core (``v1``) group."""
    no_dc = tuple(v for v in ALL_VERBS if v != "deletecollection")
    return [
        _builtin(
            "",
            "v1",
            "namespaces",
            "Namespace",
            False,
            short_names=("ns",),
            status=True,
            finalize=True,
            verbs=no_dc,
        ),
        _builtin("", "v1", "nodes", "Node", False, short_names=("no",), status=True),
        _builtin(
            "",
            "v1",
            "pods",
            "Pod",
            True,
            short_names=("po",),
            status=True,
            eviction=True,
            categories=("all",),
        ),
        _builtin("", "v1", "secrets", "Secret", True),
        _builtin("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
        _builtin(
            "", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",), strategy=SERVICE_ACCOUNT
        ),
        _builtin(
            "",
            "v1",
            "services",
            "Service",
            True,
            short_names=("svc",),
            status=True,
            categories=("all",),
            strategy=SERVICE,
        ),
        _builtin("", "v1", "endpoints", "Endpoints", True, short_names=("ep",), strategy=ENDPOINTS),
        *_core_volume_and_event_types(),
    ]


def _core_volume_and_event_types() -> list[ResourceType]:
    """The core group's volumes and Events."""
    return [
        _builtin(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            True,
            short_names=("pvc",),
            status=True,
        ),
        _builtin("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=("pv",), status=True),
        _builtin("", "v1", "events", "Event", True, short_names=("ev",)),
    ]


def _review(group: str, resource: str, kind: str) -> ResourceType:
    """A create-only, cluster-scoped self-subject review of ``group``."""
    return _builtin(group, "v1", resource, kind, False, verbs=("create",), strategy=Strategy())


def _authorization_types() -> list[ResourceType]:
    """``authorization.k8s.io``: the self-subject access and rules reviews."""
    return [
        _review("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
        _review("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    ]


def _authentication_types() -> list[ResourceType]:
    """``authentication.k8s.io``: the self-subject review."""
    return [_review("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview")]


def _policy_types() -> list[ResourceType]:
    """``policy``: PodDisruptionBudgets."""
    return [
        _builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            True,
            short_names=("pdb",),
            status=True,
        ),
    ]


def _apps_types() -> list[ResourceType]:
    """``apps``: Deployments, with the scale subresource."""
    return [
        _builtin(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            True,
            short_names=("deploy",),
            status=True,
            scale=ScaleSpec(),
            categories=("all",),
            strategy=DEPLOYMENT,
        ),
    ]


def _storage_types() -> list[ResourceType]:
    """``storage.k8s.io``: VolumeAttachments."""
    return [_builtin("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, status=True)]


def _coordination_types() -> list[ResourceType]:
    """``coordination.k8s.io``: Leases."""
    return [_builtin("coordination.k8s.io", "v1", "leases", "Lease", True)]


def _events_types() -> list[ResourceType]:
    """``events.k8s.io``: Events, sharing the core group's storage (listed after it, so the core
    type stays the storage key's owner)."""
    return [_builtin("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",), storage="events")]


def _apiextensions_types() -> list[ResourceType]:
    """``apiextensions.k8s.io``: CustomResourceDefinitions."""
    return [
        _builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            short_names=("crd", "crds"),
            status=True,
            categories=("api-extensions",),
        ),
    ]


def is_established(crd: Mapping[str, Any]) -> bool:
    """Whether the CRD's ``Established`` condition is True."""
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Established":
            return bool(condition.get("status") == "True")
    return False


def types_from_crd(crd: Mapping[str, Any]) -> list[ResourceType]:
    """One :class:`ResourceType` per served version of a CRD."""
    spec = crd.get("spec") or {}
    names = (crd.get("status") or {}).get("acceptedNames") or spec.get("names") or {}
    group = str(spec.get("group", ""))
    plural = str(names.get("plural", ""))
    kind = str(names.get("kind", ""))
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    schemas = {
        str(v.get("name")): (v.get("schema") or {}).get("openAPIV3Schema") or {}
        for v in spec.get("versions") or []
    }
    result: list[ResourceType] = []
    for version in versions:
        subresources = version.get("subresources") or {}
        has_status = "status" in subresources
        scale_spec = subresources.get("scale")
        scale = None
        if scale_spec is not None:
            scale = ScaleSpec(
                str(scale_spec.get("specReplicasPath", ".spec.replicas")),
                str(scale_spec.get("statusReplicasPath", ".status.replicas")),
                scale_spec.get("labelSelectorPath"),
            )
        result.append(
            ResourceType(
                group=group,
                version=str(version.get("name")),
                resource=plural,
                kind=kind,
                namespaced=namespaced,
                strategy=custom_strategy(schemas, has_status),
                singular=str(names.get("singular") or kind.lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status=has_status,
                scale=scale,
                builtin=False,
                storage=f"{plural}.{group}",
                served_from_crd=str((crd.get("metadata") or {}).get("name", "")),
                extra={
                    "printerColumns": version.get("additionalPrinterColumns") or [],
                    "openAPIV3Schema": schemas.get(str(version.get("name"))) or {},
                },
            )
        )
    return result


class Registry:
    """The table of served types; copy-on-write, readable without a lock."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._write_lock = threading.Lock()
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._builtin = list(types) or builtin_types()
        self._crd_types: dict[str, list[ResourceType]] = {}
        self.generation = 0
        self._rebuild()

    def _rebuild(self) -> None:
        table: dict[tuple[str, str, str], ResourceType] = {}
        by_kind: dict[tuple[str, str], ResourceType] = {}
        by_storage: dict[str, ResourceType] = {}
        for rt in [*self._builtin, *(t for ts in self._crd_types.values() for t in ts)]:
            table[(rt.group, rt.version, rt.resource)] = rt
            by_kind.setdefault((rt.group, rt.kind), rt)
            by_storage.setdefault(rt.storage_key, rt)
        self._by_path = table
        self._by_kind = by_kind
        self._by_storage = by_storage
        self.generation += 1

    def lookup(self, group: str, version: str, resource: str) -> ResourceType | None:
        """The type served at ``/apis/{group}/{version}/{resource}`` (core: group ``""``)."""
        return self._by_path.get((group, version, resource))

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        """The (first served) type of a group and kind."""
        return self._by_kind.get((group, kind))

    def by_storage(self, key: str) -> ResourceType | None:
        """The type whose data lives under the store key ``key``."""
        return self._by_storage.get(key)

    def resource(self, group: str, resource: str) -> ResourceType | None:
        """The preferred type of a group/resource, e.g. ``("", "pods")``."""
        for rt in self._by_path.values():
            if rt.group == group and rt.resource == resource:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        """Every served type, built-ins first."""
        return list(self._by_path.values())

    def groups(self) -> dict[str, list[str]]:
        """``group -> [versions]`` in serving order (core group included as ``""``)."""
        result: dict[str, list[str]] = {}
        for rt in self._by_path.values():
            versions = result.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return result

    def set_crd(self, crd: Mapping[str, Any]) -> bool:
        """Serve (or re-serve) the types of an established CRD; return whether the table changed."""
        name = str((crd.get("metadata") or {}).get("name", ""))
        types = types_from_crd(crd) if is_established(crd) else []
        with self._write_lock:
            if not types and name not in self._crd_types:
                return False
            if types:
                self._crd_types[name] = types
            else:
                self._crd_types.pop(name, None)
            self._rebuild()
        return True

    def remove_crd(self, name: str) -> list[ResourceType]:
        """Stop serving a CRD's types; return the removed types."""
        with self._write_lock:
            removed = self._crd_types.pop(name, [])
            if removed:
                self._rebuild()
        return removed

    def crd_types(self, name: str) -> list[ResourceType]:
        """The types currently served for a CRD."""
        return list(self._crd_types.get(name, []))

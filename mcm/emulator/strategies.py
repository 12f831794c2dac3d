"""Per-kind strategies: the small record of rules the write path applies to each kind
(kube-apiserver's per-kind ``rest.RESTCreateStrategy``/``RESTUpdateStrategy``).

A :class:`Strategy` is data plus a few pure functions; there is no class hierarchy. The server's
write path uses it as follows (create, update and patch alike):

1. on create: drop ``status`` if ``reset_status_on_create``;
2. ``normalize(obj)`` on every write: quantities become strings, ``metav1.Time`` fields are
   re-emitted in seconds with ``Z``, MicroTime fields are checked, custom objects are pruned to
   their schema (``prune`` gives the same result plus the dropped paths); raises
   :class:`~mcm.emulator.validation.DecodeError` (a ``ValueError``; → 400) for undecodable values;
3. ``defaults(obj)`` on every write; idempotent. Create-only parts (namespace finalizer, CRD
   establishment and cleanup finalizer) apply only while the status is unset, i.e. right after
   the create-time status reset;
4. ``admit_create(obj)`` on create only, after ``defaults``: the mutating admission plugins'
   create-time changes (``TaintNodesByCondition``: a new Node gets the
   ``node.kubernetes.io/not-ready:NoSchedule`` taint);
5. ``validate(new, old)`` (``old`` is None on create) → kind-specific field errors (→ 422);
   object metadata (names, labels, annotations, owner references) is the server's check.

Guarantees: all functions are pure and never mutate their input; built-in strategies follow the
real server's per-kind create, update, list and patch rules; any unknown (group, kind) gets the
generic custom-resource strategy.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcm.emulator import podspec
from mcm.emulator import schema as schemas
from mcm.emulator.crdvalidation import crd_defaults, crd_errors
from mcm.emulator.normalize import map_at, normalizer, time_map
from mcm.emulator.store import Obj
from mcm.emulator.validation import (
    DecodeError,
    FieldError,
    forbidden,
    invalid,
    label_errors,
    not_supported,
    qualified_name_errors,
    required,
    validate_int_or_percent,
)

__all__ = [
    "COMMON_SMP_LISTS",
    "DecodeError",
    "FieldError",
    "Strategy",
    "custom_strategy",
    "strategy_for",
]

FieldGetter = Callable[[Obj], "str | None"]

COMMON_SMP_LISTS: Mapping[str, str] = {
    "metadata.finalizers": "merge-primitive",
    "metadata.ownerReferences": "merge:uid",
}


def _identity(obj: Obj) -> Obj:
    return obj


def _no_pruning(obj: Obj) -> tuple[Obj, list[str]]:
    return obj, []


def _no_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    return []


@dataclass(frozen=True)
class Strategy:
    """The write rules of one kind. See the module docstring for when each function runs."""

    tracks_generation: Literal["none", "spec", "non_metadata"] = "none"
    """``spec``: +1 when ``spec`` changes; ``non_metadata``: +1 when anything outside metadata does."""
    status_subresource: bool = False
    """Main writes keep the stored status; status writes change only status."""
    reset_status_on_create: bool = False
    """Drop the status sent on create (before ``defaults``)."""
    unconditional_update: bool = True
    """A PUT without ``metadata.resourceVersion`` is allowed (else 422)."""
    create_on_update: bool = False
    """A PUT to a missing object creates it (Lease)."""
    return_deleted_object: bool = False
    """DELETE that removes at once answers with the object (else a ``Status`` Success)."""
    graceful_delete: Callable[[Obj, Obj], int | None] | None = None
    """``(obj, delete options) -> grace seconds`` for kinds with graceful deletion (pods)."""
    defaults: Callable[[Obj], Obj] = _identity
    admit_create: Callable[[Obj], Obj] = _identity
    """Create-time mutating admission (runs once, after ``defaults``)."""
    validate: Callable[[Obj, Obj | None], list[FieldError]] = _no_errors
    normalize: Callable[[Obj], Obj] = _identity
    prune: Callable[[Obj], tuple[Obj, list[str]]] = _no_pruning
    """Drop undeclared fields (custom objects) and report their paths (``spec.foo``)."""
    field_selectors: Mapping[str, FieldGetter] = field(default_factory=dict)
    """Kind-specific selectable fields; ``metadata.name``/``metadata.namespace`` are generic."""
    smp_lists: Mapping[str, str] = field(default_factory=lambda: dict(COMMON_SMP_LISTS))
    """List strategies for strategic merge patch (dotted path → atomic|merge-primitive|merge:<key>)."""
    smp_allowed: bool = True
    """False for custom objects: strategic merge patch answers 415."""


# --------------------------------------------------------------------------- helpers


def _get(obj: Mapping[str, Any], path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _string_field(path: str, default: str = "") -> FieldGetter:
    def getter(obj: Obj) -> str | None:
        value = _get(obj, path)
        if value is None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return getter


def _bool_field(path: str) -> FieldGetter:
    def getter(obj: Obj) -> str | None:
        return "true" if _get(obj, path) is True else "false"

    return getter


def _lists(**extra: str) -> dict[str, str]:
    return {**COMMON_SMP_LISTS, **{k.replace("__", "."): val for k, val in extra.items()}}


def _immutable_spec(new: Obj, old: Obj | None) -> list[FieldError]:
    if old is None or new.get("spec") == old.get("spec"):
        return []
    return [invalid("spec", new.get("spec"), "field is immutable")]


# --------------------------------------------------------------------------- pods


def _pod_validate(new: Obj, old: Obj | None) -> list[FieldError]:
    if old is None:
        return podspec.pod_spec_errors(new)
    return podspec.pod_update_errors(new, old)


def _pod_grace(obj: Obj, options: Obj) -> int | None:
    return podspec.pod_grace_period(obj, options)


_CONTAINER_QUANTITIES = (
    "spec.containers[].resources.limits",
    "spec.containers[].resources.requests",
    "spec.initContainers[].resources.limits",
    "spec.initContainers[].resources.requests",
    "spec.overhead",
)
_CONDITION_TIMES = ("status.conditions[].lastTransitionTime", "status.conditions[].lastProbeTime")

POD = Strategy(
    tracks_generation="spec",  # from v1.33 (KUBERNETES_VERSION): upstream updatePodGeneration
    status_subresource=True,
    reset_status_on_create=True,
    return_deleted_object=True,
    graceful_delete=_pod_grace,
    defaults=podspec.default_pod,
    validate=_pod_validate,
    normalize=normalizer(_CONTAINER_QUANTITIES, (*_CONDITION_TIMES, "status.startTime")),
    field_selectors={
        "spec.nodeName": _string_field("spec.nodeName"),
        "spec.restartPolicy": _string_field("spec.restartPolicy"),
        "spec.schedulerName": _string_field("spec.schedulerName"),
        "spec.serviceAccountName": _string_field("spec.serviceAccountName"),
        "spec.hostNetwork": _bool_field("spec.hostNetwork"),
        "status.phase": _string_field("status.phase"),
        "status.podIP": _string_field("status.podIP"),
        "status.nominatedNodeName": _string_field("status.nominatedNodeName"),
    },
    smp_lists=_lists(
        spec__containers="merge:name",
        spec__initContainers="merge:name",
        spec__ephemeralContainers="merge:name",
        spec__containers__env="merge:name",
        spec__initContainers__env="merge:name",
        spec__containers__ports="merge:containerPort",
        spec__initContainers__ports="merge:containerPort",
        spec__containers__volumeMounts="merge:mountPath",
        spec__initContainers__volumeMounts="merge:mountPath",
        spec__volumes="merge:name",
        spec__imagePullSecrets="merge:name",
        spec__tolerations="atomic",
        status__conditions="merge:type",
    ),
)

# --------------------------------------------------------------------------- nodes

_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _taint_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    taints = _get(new, "spec.taints")
    if taints is None:
        return []
    if not isinstance(taints, list):
        return [invalid("spec.taints", taints, "must be a list")]
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints):
        path = f"metadata.taints[{index}]"  # sic: kube-apiserver's validation names this path
        if not isinstance(taint, Mapping):
            errors.append(invalid(path, taint, "must be an object"))
            continue
        key, effect = str(taint.get("key") or ""), taint.get("effect")
        errors.extend(invalid(f"{path}.key", key, msg) for msg in qualified_name_errors(key))
        if not effect:
            errors.append(required(f"{path}.effect"))
        elif effect not in _TAINT_EFFECTS:
            errors.append(not_supported(f"{path}.effect", effect, _TAINT_EFFECTS))
        if (key, str(effect)) in seen:
            errors.append(
                FieldError(
                    "FieldValueDuplicate", path, "taints must be unique by key and effect pair", dict(taint)
                )
            )
        seen.add((key, str(effect)))
    return errors


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
"""What kube-apiserver's TaintNodesByCondition admission puts on every new Node (the node
lifecycle controller removes it once the Node is Ready)."""


def _taint_not_ready(obj: Obj) -> Obj:
    """TaintNodesByCondition: add :data:`NOT_READY_TAINT` unless the new Node has it already."""
    raw_spec = obj.get("spec")
    spec: dict[str, Any] = dict(raw_spec) if isinstance(raw_spec, Mapping) else {}
    raw_taints = spec.get("taints")
    if raw_taints is not None and not isinstance(raw_taints, list):
        return obj  # validation answers for it
    taints: list[Any] = list(raw_taints or [])
    for taint in taints:
        if isinstance(taint, Mapping) and (taint.get("key"), taint.get("effect")) == (
            NOT_READY_TAINT["key"],
            NOT_READY_TAINT["effect"],
        ):
            return obj
    return {**obj, "spec": {**spec, "taints": [*taints, dict(NOT_READY_TAINT)]}}


NODE = Strategy(
    status_subresource=True,
    admit_create=_taint_not_ready,
    validate=_taint_errors,
    normalize=normalizer(
        ("status.capacity", "status.allocatable"),
        (
            "status.conditions[].lastHeartbeatTime",
            "status.conditions[].lastTransitionTime",
            "spec.taints[].timeAdded",
        ),
    ),
    field_selectors={"spec.unschedulable": _bool_field("spec.unschedulable")},
    smp_lists=_lists(
        spec__taints="atomic",
        spec__podCIDRs="merge-primitive",
        status__conditions="merge:type",
        status__addresses="merge:type",
        status__volumesAttached="atomic",
        status__volumesInUse="atomic",
        status__images="atomic",
    ),
)

# --------------------------------------------------------------------------- secrets


def _secret_normalize(obj: Obj) -> Obj:
    data = obj.get("data")
    if data is not None and not isinstance(data, dict):
        raise DecodeError(
            "json: cannot unmarshal data into Go struct field Secret.data of type map[string][]uint8"
        )
    merged = dict(data or {})
    for key, value in merged.items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError(f"illegal base64 data at input byte 0 (data key {key!r})") from None
    string_data = obj.get("stringData")
    if isinstance(string_data, dict):
        for key, value in string_data.items():
            merged[key] = base64.b64encode(str(value).encode()).decode()
    result = {k: val for k, val in obj.items() if k != "stringData"}
    if data is not None or string_data:
        result["data"] = merged
    result.setdefault("type", "Opaque")
    return result


SECRET = Strategy(
    normalize=_secret_normalize,
    defaults=lambda obj: {**obj, "type": obj.get("type") or "Opaque"},
    field_selectors={"type": _string_field("type")},
)

# --------------------------------------------------------------------------- namespaces


def _namespace_defaults(obj: Obj) -> Obj:
    meta = dict(obj.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    if meta.get("name"):
        labels["kubernetes.io/metadata.name"] = meta["name"]
    meta["labels"] = labels
    spec = dict(obj.get("spec") or {})
    status = dict(obj.get("status") or {})
    if "phase" not in status:  # create: the status was reset
        spec.setdefault("finalizers", ["kubernetes"])
        status["phase"] = "Active"
    return {**obj, "metadata": meta, "spec": spec, "status": status}


NAMESPACE = Strategy(
    status_subresource=True,
    reset_status_on_create=True,
    return_deleted_object=True,
    defaults=_namespace_defaults,
    field_selectors={"status.phase": _string_field("status.phase")},
    smp_lists=_lists(status__conditions="merge:type"),
)

# --------------------------------------------------------------------------- volumes


def _pending_status(obj: Obj) -> Obj:
    status = dict(obj.get("status") or {})
    status.setdefault("phase", "Pending")
    return {**obj, "status": status}


PERSISTENT_VOLUME = Strategy(
    status_subresource=True,
    reset_status_on_create=True,
    return_deleted_object=True,
    defaults=_pending_status,
    normalize=normalizer(("spec.capacity",)),
)

PERSISTENT_VOLUME_CLAIM = Strategy(
    status_subresource=True,
    reset_status_on_create=True,
    return_deleted_object=True,
    defaults=_pending_status,
    normalize=normalizer(
        ("spec.resources.requests", "spec.resources.limits", "status.capacity", "status.allocatedResources"),
        _CONDITION_TIMES,
    ),
    smp_lists=_lists(status__conditions="merge:type"),
)


def _volume_attachment_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    errors = _immutable_spec(new, old)
    for name in ("attacher", "nodeName"):
        if not _get(new, f"spec.{name}"):
            errors.append(required(f"spec.{name}"))
    source = _get(new, "spec.source") or {}
    if (
        not isinstance(source, Mapping)
        or len([k for k in ("persistentVolumeName", "inlineVolumeSpec") if source.get(k)]) != 1
    ):
        errors.append(
            forbidden("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName")
        )
    return errors


VOLUME_ATTACHMENT = Strategy(
    status_subresource=True,
    reset_status_on_create=True,
    unconditional_update=False,
    return_deleted_object=True,
    defaults=lambda obj: {**obj, "status": {"attached": False, **(obj.get("status") or {})}},
    validate=_volume_attachment_errors,
)

# --------------------------------------------------------------------------- events and leases


def _event_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    involved = new.get("involvedObject")
    if not isinstance(involved, Mapping) or not involved:
        return [required("involvedObject")]
    namespace = str((new.get("metadata") or {}).get("namespace") or "")
    involved_namespace = str(involved.get("namespace") or "")
    # kube-apiserver: an event of a cluster-scoped object lives in "default" (or no namespace);
    # any other event lives in its object's namespace.
    if (involved_namespace or namespace not in ("", "default")) and involved_namespace != namespace:
        return [invalid("involvedObject.namespace", involved_namespace, "does not match event.namespace")]
    return []


_EVENT_SELECTORS = {
    **{
        f"involvedObject.{name}": _string_field(f"involvedObject.{name}")
        for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
    "reason": _string_field("reason"),
    "reportingComponent": _string_field("reportingComponent"),
    "source": _string_field("source.component"),
    "type": _string_field("type"),
}

EVENT = Strategy(
    validate=_event_errors,
    normalize=normalizer((), ("firstTimestamp", "lastTimestamp"), ("eventTime", "series.lastObservedTime")),
    field_selectors=_EVENT_SELECTORS,
)


def _events_v1_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    if old is not None:
        return []
    return [
        required(name)
        for name in ("eventTime", "reportingController", "reportingInstance", "action", "reason")
        if not new.get(name)
    ]


EVENTS_V1_EVENT = Strategy(
    validate=_events_v1_errors,
    normalize=normalizer(
        (), ("deprecatedFirstTimestamp", "deprecatedLastTimestamp"), ("eventTime", "series.lastObservedTime")
    ),
)


def _lease_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    duration = _get(new, "spec.leaseDurationSeconds")
    if duration is not None and (
        not isinstance(duration, int) or isinstance(duration, bool) or duration <= 0
    ):
        errors.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = _get(new, "spec.leaseTransitions")
    if transitions is not None and (
        not isinstance(transitions, int) or isinstance(transitions, bool) or transitions < 0
    ):
        errors.append(invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    return errors


LEASE = Strategy(
    unconditional_update=False,
    create_on_update=True,
    validate=_lease_errors,
    normalize=normalizer((), (), ("spec.acquireTime", "spec.renewTime")),
)

# --------------------------------------------------------------------------- PDBs

_UNHEALTHY_POLICIES = ["IfHealthyBudget", "AlwaysAllow"]
_ZERO_PDB_STATUS = {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}


def _pdb_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    spec = new.get("spec") or {}
    if not isinstance(spec, Mapping):
        return [invalid("spec", spec, "must be an object")]
    errors: list[FieldError] = []
    has_min, has_max = "minAvailable" in spec, "maxUnavailable" in spec
    if has_min and has_max:
        errors.append(invalid("spec", dict(spec), "minAvailable and maxUnavailable cannot be both set"))
    for name in ("minAvailable", "maxUnavailable"):
        if name in spec:
            errors.extend(validate_int_or_percent(spec[name], f"spec.{name}"))
    selector = spec.get("selector")
    if selector is not None:
        errors.extend(_selector_errors(selector, "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POLICIES:
        errors.append(not_supported("spec.unhealthyPodEvictionPolicy", policy, _UNHEALTHY_POLICIES))
    return errors


def _selector_errors(selector: Any, path: str) -> list[FieldError]:
    if not isinstance(selector, Mapping):
        return [invalid(path, selector, "must be a label selector object")]
    errors: list[FieldError] = []
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        return [invalid(f"{path}.matchLabels", labels, "must be a map")]
    errors.extend(label_errors(labels, f"{path}.matchLabels"))
    for index, expr in enumerate(selector.get("matchExpressions") or []):
        item = f"{path}.matchExpressions[{index}]"
        if not isinstance(expr, Mapping):
            errors.append(invalid(item, expr, "must be an object"))
            continue
        op = expr.get("operator")
        values = expr.get("values") or []
        if op in ("In", "NotIn") and not values:
            errors.append(required(f"{item}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            errors.append(
                forbidden(
                    f"{item}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errors.append(invalid(f"{item}.operator", op, "not a valid selector operator"))
    return errors


POD_DISRUPTION_BUDGET = Strategy(
    tracks_generation="spec",
    status_subresource=True,
    reset_status_on_create=True,
    unconditional_update=False,
    defaults=lambda obj: {**obj, "status": {**_ZERO_PDB_STATUS, **(obj.get("status") or {})}},
    validate=_pdb_errors,
    normalize=lambda obj: map_at(
        normalizer((), ("status.conditions[].lastTransitionTime",))(obj), "status.disruptedPods", time_map
    ),
    smp_lists=_lists(status__conditions="merge:type"),
)

# --------------------------------------------------------------------------- CRDs and custom objects

CUSTOM_RESOURCE_DEFINITION = Strategy(
    tracks_generation="spec",
    status_subresource=True,
    reset_status_on_create=True,
    unconditional_update=False,
    return_deleted_object=True,
    defaults=crd_defaults,
    validate=crd_errors,
    normalize=normalizer((), ("status.conditions[].lastTransitionTime",)),
)


def _schema_for(schema_by_version: Mapping[str, Mapping[str, Any]], obj: Obj) -> Mapping[str, Any] | None:
    version = str(obj.get("apiVersion") or "").rpartition("/")[2]
    found = schema_by_version.get(version)
    if found is None and len(schema_by_version) == 1:
        found = next(iter(schema_by_version.values()))
    return found


def custom_strategy(schema_by_version: Mapping[str, Mapping[str, Any]], status_subresource: bool) -> Strategy:
    """The strategy of a CRD-defined kind; ``schema_by_version`` maps a version to its openAPIV3Schema."""
    frozen = copy.deepcopy(dict(schema_by_version))

    def prune(obj: Obj) -> tuple[Obj, list[str]]:
        found = _schema_for(frozen, obj)
        return (obj, []) if found is None else schemas.prune(obj, found)

    def defaults(obj: Obj) -> Obj:
        # Called on what prune returned (storage's _prepare): a private copy, defaulted in place.
        found = _schema_for(frozen, obj)
        return obj if found is None else schemas.apply_defaults(obj, found, in_place=True)

    def validate(new: Obj, old: Obj | None) -> list[FieldError]:
        found = _schema_for(frozen, new)
        return [] if found is None else schemas.validate(new, found)

    return Strategy(
        tracks_generation="non_metadata",
        status_subresource=status_subresource,
        reset_status_on_create=status_subresource,
        unconditional_update=False,
        # No normalize: it runs on what prune returned, and pruning twice changes nothing.
        defaults=defaults,
        validate=validate,
        prune=prune,
        smp_allowed=False,
    )


GENERIC_CUSTOM = custom_strategy({}, status_subresource=False)

_BUILTINS: Mapping[tuple[str, str], Strategy] = {
    ("", "Pod"): POD,
    ("", "Node"): NODE,
    ("", "Secret"): SECRET,
    ("", "Namespace"): NAMESPACE,
    ("", "PersistentVolume"): PERSISTENT_VOLUME,
    ("", "PersistentVolumeClaim"): PERSISTENT_VOLUME_CLAIM,
    ("", "Event"): EVENT,
    ("events.k8s.io", "Event"): EVENTS_V1_EVENT,
    ("coordination.k8s.io", "Lease"): LEASE,
    ("policy", "PodDisruptionBudget"): POD_DISRUPTION_BUDGET,
    ("storage.k8s.io", "VolumeAttachment"): VOLUME_ATTACHMENT,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): CUSTOM_RESOURCE_DEFINITION,
}


def strategy_for(group: str, kind: str) -> Strategy:
    """The built-in strategy of ``(group, kind)``; unknown kinds get the generic custom strategy."""
    return _BUILTINS.get((group, kind), GENERIC_CUSTOM)

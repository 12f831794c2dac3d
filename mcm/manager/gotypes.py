"""A machine template as upstream v0.47.0's Go code sees it: decoded into its Go structs, printed
the way ``go-spew`` prints them, and compared the way ``apiequality.Semantic.DeepEqual`` does.

Upstream names a MachineDeployment's MachineSets and labels their machines with a hash of the
template (``pkg/controller/controller_utils.go`` ``ComputeHash`` at v0.47.0): the 32-bit FNV-1a
of ``spew.Sprintf("%#v", template)`` with ``SortKeys`` and ``DisableMethods``
(``pkg/util/hash/hash.go`` ``DeepHashObject``). That text is a dump of the Go value, so it
depends on the exact Go types: ``v1alpha1.MachineTemplateSpec`` of machine-controller-manager
v0.47.0 over ``k8s.io/api`` and ``k8s.io/apimachinery`` v0.22.9. :data:`MACHINE_TEMPLATE_SPEC`
spells those types out field by field, in declaration order.

Guarantees:

- :func:`decode` turns a template as JSON (a dict) into the value Go's ``encoding/json`` would
  produce: unknown keys are dropped, absent and ``null`` give Go zero values (``nil`` for
  pointers, slices and maps), an empty object or list gives an empty (non-nil) map or slice,
  durations are parsed with Go's ``time.ParseDuration`` rules (nanoseconds), the inline
  ``MachineConfiguration`` pointer is allocated as soon as one of its keys is present.
- :func:`spew` prints a decoded value byte for byte as go-spew v1.1.1 prints it with ``%#v``.
- What Go could not decode the same way raises :class:`Unreproducible`: a JSON value of the
  wrong type, or a set timestamp (``metav1.Time`` decodes into the process's local time zone,
  which spew then prints). Templates never carry timestamps in practice.
- :func:`semantic_equal` compares two decoded values as ``Semantic.DeepEqual`` does: pointers by
  what they point to, a nil map or slice equal to an empty one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MACHINE_CONFIGURATION_KEYS",
    "MACHINE_TEMPLATE_SPEC",
    "GoType",
    "Unreproducible",
    "decode",
    "parse_go_duration_ns",
    "semantic_equal",
    "spew",
]


class Unreproducible(ValueError):
    """The template holds something whose Go decoding this module does not reproduce."""


@dataclass(frozen=True)
class Scalar:
    """A string, integer or boolean kind; ``name`` is the Go type (``string``, ``types.UID``)."""

    name: str
    kind: str  # "string" | "int" | "bool"


@dataclass(frozen=True)
class Ptr:
    elem: GoType


@dataclass(frozen=True)
class Slice:
    elem: GoType


@dataclass(frozen=True)
class StringMap:
    """``map[string]string``, the only map kind in a machine template."""


@dataclass(frozen=True)
class Field:
    """A struct field: its Go name, its JSON key (``None``: embedded ``,inline``) and type."""

    name: str
    json: str | None
    type: GoType


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Time:
    """``metav1.Time`` (a struct around ``time.Time``); only the zero time is reproducible."""


@dataclass(frozen=True)
class Duration:
    """``metav1.Duration`` (a struct around ``time.Duration``), decoded from a Go duration string."""


GoType = Scalar | Ptr | Slice | StringMap | Struct | Time | Duration

_STRING = Scalar("string", "string")
_UID = Scalar("types.UID", "string")
_BOOL = Scalar("bool", "bool")
_INT64 = Scalar("int64", "int")
_INT32 = Scalar("int32", "int")


def _fields(*spec: tuple[str, str | None, GoType]) -> tuple[Field, ...]:
    return tuple(Field(name, key, kind) for name, key, kind in spec)


_OWNER_REFERENCE = Struct(
    "v1.OwnerReference",
    _fields(
        ("APIVersion", "apiVersion", _STRING),
        ("Kind", "kind", _STRING),
        ("Name", "name", _STRING),
        ("UID", "uid", _UID),
        ("Controller", "controller", Ptr(_BOOL)),
        ("BlockOwnerDeletion", "blockOwnerDeletion", Ptr(_BOOL)),
    ),
)

_MANAGED_FIELDS_ENTRY = Struct("v1.ManagedFieldsEntry", ())
"""Only ``nil`` or empty lists of it are reproducible (see :func:`_decode_slice`)."""

_OBJECT_META = Struct(
    "v1.ObjectMeta",
    _fields(
        ("Name", "name", _STRING),
        ("GenerateName", "generateName", _STRING),
        ("Namespace", "namespace", _STRING),
        ("SelfLink", "selfLink", _STRING),
        ("UID", "uid", _UID),
        ("ResourceVersion", "resourceVersion", _STRING),
        ("Generation", "generation", _INT64),
        ("CreationTimestamp", "creationTimestamp", Time()),
        ("DeletionTimestamp", "deletionTimestamp", Ptr(Time())),
        ("DeletionGracePeriodSeconds", "deletionGracePeriodSeconds", Ptr(_INT64)),
        ("Labels", "labels", StringMap()),
        ("Annotations", "annotations", StringMap()),
        ("OwnerReferences", "ownerReferences", Slice(_OWNER_REFERENCE)),
        ("Finalizers", "finalizers", Slice(_STRING)),
        ("ClusterName", "clusterName", _STRING),
        ("ManagedFields", "managedFields", Slice(_MANAGED_FIELDS_ENTRY)),
    ),
)

_TAINT = Struct(
    "v1.Taint",
    _fields(
        ("Key", "key", _STRING),
        ("Value", "value", _STRING),
        ("Effect", "effect", Scalar("v1.TaintEffect", "string")),
        ("TimeAdded", "timeAdded", Ptr(Time())),
    ),
)

_CONFIG_MAP_NODE_CONFIG_SOURCE = Struct(
    "v1.ConfigMapNodeConfigSource",
    _fields(
        ("Namespace", "namespace", _STRING),
        ("Name", "name", _STRING),
        ("UID", "uid", _UID),
        ("ResourceVersion", "resourceVersion", _STRING),
        ("KubeletConfigKey", "kubeletConfigKey", _STRING),
    ),
)

_NODE_SPEC = Struct(
    "v1.NodeSpec",
    _fields(
        ("PodCIDR", "podCIDR", _STRING),
        ("PodCIDRs", "podCIDRs", Slice(_STRING)),
        ("ProviderID", "providerID", _STRING),
        ("Unschedulable", "unschedulable", _BOOL),
        ("Taints", "taints", Slice(_TAINT)),
        (
            "ConfigSource",
            "configSource",
            Ptr(
                Struct(
                    "v1.NodeConfigSource",
                    _fields(("ConfigMap", "configMap", Ptr(_CONFIG_MAP_NODE_CONFIG_SOURCE))),
                )
            ),
        ),
        ("DoNotUseExternalID", "externalID", _STRING),
    ),
)

_MACHINE_CONFIGURATION = Struct(
    "v1alpha1.MachineConfiguration",
    _fields(
        ("MachineDrainTimeout", "drainTimeout", Ptr(Duration())),
        ("MachineHealthTimeout", "healthTimeout", Ptr(Duration())),
        ("MachineCreationTimeout", "creationTimeout", Ptr(Duration())),
        ("MaxEvictRetries", "maxEvictRetries", Ptr(_INT32)),
        ("NodeConditions", "nodeConditions", Ptr(_STRING)),
    ),
)

MACHINE_CONFIGURATION_KEYS = frozenset(
    {
        "drainTimeout",
        "healthTimeout",
        "creationTimeout",
        "inPlaceUpdateTimeout",
        "machinePreserveTimeout",
        "disableHealthTimeout",
        "maxEvictRetries",
        "nodeConditions",
    }
)
"""The JSON keys of the machine configuration inlined in a Machine spec (the HEAD schema; v0.47.0
knows the first three and the last two)."""

_MACHINE_SPEC = Struct(
    "v1alpha1.MachineSpec",
    _fields(
        (
            "Class",
            "class",
            Struct(
                "v1alpha1.ClassSpec",
                _fields(
                    ("APIGroup", "apiGroup", _STRING), ("Kind", "kind", _STRING), ("Name", "name", _STRING)
                ),
            ),
        ),
        ("ProviderID", "providerID", _STRING),
        (
            "NodeTemplateSpec",
            "nodeTemplate",
            Struct(
                "v1alpha1.NodeTemplateSpec",
                _fields(("ObjectMeta", "metadata", _OBJECT_META), ("Spec", "spec", _NODE_SPEC)),
            ),
        ),
        ("MachineConfiguration", None, Ptr(_MACHINE_CONFIGURATION)),
    ),
)

MACHINE_TEMPLATE_SPEC = Struct(
    "v1alpha1.MachineTemplateSpec",
    _fields(("ObjectMeta", "metadata", _OBJECT_META), ("Spec", "spec", _MACHINE_SPEC)),
)
"""``v1alpha1.MachineTemplateSpec`` at v0.47.0, the type upstream hashes."""


# --- decoding (encoding/json) ---------------------------------------------------------------------


def _type_name(kind: GoType) -> str:
    if isinstance(kind, Scalar | Struct):
        return kind.name
    if isinstance(kind, Ptr):
        return "*" + _type_name(kind.elem)
    if isinstance(kind, Slice):
        return "[]" + _type_name(kind.elem)
    if isinstance(kind, StringMap):
        return "map[string]string"
    return "v1.Time" if isinstance(kind, Time) else "v1.Duration"


def _zero(kind: GoType) -> Any:
    if isinstance(kind, Scalar):
        return {"string": "", "int": 0, "bool": False}[kind.kind]
    if isinstance(kind, Struct):
        return {f.name: _zero(f.type) for f in kind.fields}
    if isinstance(kind, Duration):
        return 0
    return None  # pointers, slices, maps, and the zero Time


def _key(obj: Mapping[str, Any], key: str) -> str | None:
    """The key Go's decoder would use for field ``key``: an exact match, else a case-insensitive one."""
    if key in obj:
        return key
    folded = key.casefold()
    return next((k for k in obj if isinstance(k, str) and k.casefold() == folded), None)


def _decode_struct(kind: Struct, raw: object) -> dict[str, Any]:
    if raw is None:
        return _zero(kind)  # type: ignore[no-any-return]
    if not isinstance(raw, Mapping):
        raise Unreproducible(f"{kind.name}: expected an object, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for field in kind.fields:
        if field.json is None:  # the inline *MachineConfiguration
            out[field.name] = _decode_inline(field.type, raw)
            continue
        key = _key(raw, field.json)
        out[field.name] = _zero(field.type) if key is None else _decode(field.type, raw[key])
    return out


def _decode_inline(kind: GoType, raw: Mapping[str, Any]) -> Any:
    """An embedded ``*Struct `json:",inline"```: allocated once one of its keys appears."""
    assert isinstance(kind, Ptr) and isinstance(kind.elem, Struct)
    if not any(_key(raw, f.json) is not None for f in kind.elem.fields if f.json):
        return None
    return _decode_struct(kind.elem, raw)


def _decode_scalar(kind: Scalar, raw: object) -> Any:
    if raw is None:
        return _zero(kind)
    wanted = {"string": str, "bool": bool}.get(kind.kind)
    if wanted is not None and isinstance(raw, wanted):
        return raw
    if kind.kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
        bits = 64 if kind.name == "int64" else 32
        if -(1 << (bits - 1)) <= raw < 1 << (bits - 1):
            return raw
    raise Unreproducible(f"{kind.name}: cannot decode {raw!r}")


def _decode_slice(kind: Slice, raw: object) -> list[Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise Unreproducible(f"{_type_name(kind)}: expected a list")
    if raw and kind.elem is _MANAGED_FIELDS_ENTRY:
        raise Unreproducible("managedFields in a template")
    return [_decode(kind.elem, item) for item in raw]


def _decode_map(raw: object) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise Unreproducible("map[string]string: expected an object")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if value is not None and not isinstance(value, str):
            raise Unreproducible(f"map[string]string: value {value!r}")
        out[str(key)] = value or ""
    return out


def _decode(kind: GoType, raw: object) -> Any:
    if isinstance(kind, Scalar):
        return _decode_scalar(kind, raw)
    if isinstance(kind, Struct):
        return _decode_struct(kind, raw)
    if isinstance(kind, Ptr):
        return None if raw is None else _decode(kind.elem, raw)
    if isinstance(kind, Slice):
        return _decode_slice(kind, raw)
    if isinstance(kind, StringMap):
        return _decode_map(raw)
    if isinstance(kind, Time):
        if raw is None:
            return None
        raise Unreproducible("a set timestamp in a template")
    if not isinstance(raw, str):
        raise Unreproducible(f"v1.Duration: expected a string, got {raw!r}")
    return parse_go_duration_ns(raw)


def decode(template: Mapping[str, Any], kind: GoType = MACHINE_TEMPLATE_SPEC) -> Any:
    """The Go value ``encoding/json`` would decode ``template`` into (see the module docstring)."""
    return _decode(kind, template)


# --- time.ParseDuration ---------------------------------------------------------------------------

_UNITS = {
    b"ns": 1,
    b"us": 1_000,
    "µs".encode(): 1_000,  # U+00B5 micro sign
    "μs".encode(): 1_000,  # U+03BC Greek mu
    b"ms": 1_000_000,
    b"s": 1_000_000_000,
    b"m": 60_000_000_000,
    b"h": 3_600_000_000_000,
}
_MAX = 1 << 63


def _leading_int(s: bytes) -> tuple[int, bytes]:
    i, x = 0, 0
    while i < len(s) and 48 <= s[i] <= 57:
        x = x * 10 + s[i] - 48
        if x > _MAX:
            raise Unreproducible("duration overflow")
        i += 1
    return x, s[i:]


def _leading_fraction(s: bytes) -> tuple[int, float, bytes]:
    i, x, scale, overflow = 0, 0, 1.0, False
    while i < len(s) and 48 <= s[i] <= 57:
        if not overflow:
            if x > (_MAX - 1) // 10:
                overflow = True
            else:
                y = x * 10 + s[i] - 48
                if y > _MAX:
                    overflow = True
                else:
                    x, scale = y, scale * 10
        i += 1
    return x, scale, s[i:]


def _one_term(s: bytes, orig: str) -> tuple[int, bytes]:
    if not (s[:1] == b"." or s[:1].isdigit()):
        raise Unreproducible(f"time: invalid duration {orig!r}")
    length = len(s)
    value, s = _leading_int(s)
    pre = length != len(s)
    fraction, scale, post = 0, 1.0, False
    if s[:1] == b".":
        s = s[1:]
        length = len(s)
        fraction, scale, s = _leading_fraction(s)
        post = length != len(s)
    if not pre and not post:
        raise Unreproducible(f"time: invalid duration {orig!r}")
    i = 0
    while i < len(s) and not (s[i] == 46 or 48 <= s[i] <= 57):
        i += 1
    unit = _UNITS.get(s[:i])
    if unit is None:
        raise Unreproducible(f"time: unknown or missing unit in duration {orig!r}")
    if value > _MAX // unit:
        raise Unreproducible(f"time: invalid duration {orig!r}")
    value *= unit
    if fraction > 0:
        value += int(float(fraction) * (float(unit) / scale))
    return value, s[i:]


def parse_go_duration_ns(text: str) -> int:
    """Nanoseconds of a Go duration string, exactly as ``time.ParseDuration`` computes them."""
    s, negative = text.encode(), False
    if s[:1] in (b"-", b"+"):
        negative, s = s[:1] == b"-", s[1:]
    if s == b"0":
        return 0
    if not s:
        raise Unreproducible(f"time: invalid duration {text!r}")
    total = 0
    while s:
        value, s = _one_term(s, text)
        total += value
        if total > _MAX:
            raise Unreproducible(f"time: invalid duration {text!r}")
    if negative:
        return -total
    if total > _MAX - 1:
        raise Unreproducible(f"time: invalid duration {text!r}")
    return total


# --- go-spew %#v ----------------------------------------------------------------------------------

_ZERO_TIME = "{Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}}"


def _spew_value(kind: GoType, value: Any, out: list[str]) -> None:
    """The value part (after any type prefix) of spew's ``%#v`` output."""
    if isinstance(kind, Scalar):
        out.append(("true" if value else "false") if kind.kind == "bool" else str(value))
    elif isinstance(kind, Struct):
        out.append("{")
        for index, field in enumerate(kind.fields):
            out.append(f"{' ' if index else ''}{field.name}:")
            _spew(field.type, value[field.name], out, show_type=True)
        out.append("}")
    elif isinstance(kind, Slice):
        if value is None:
            out.append("<nil>")
            return
        out.append("[")
        for index, item in enumerate(value):
            out.append(" " if index else "")
            _spew(kind.elem, item, out, show_type=False)
        out.append("]")
    elif isinstance(kind, StringMap):
        out.append(
            "<nil>" if value is None else "map[" + " ".join(f"{k}:{value[k]}" for k in sorted(value)) + "]"
        )
    elif isinstance(kind, Time):
        out.append(_ZERO_TIME)
    elif isinstance(kind, Duration):
        out.append(f"{{Duration:(time.Duration){value}}}")


def _spew(kind: GoType, value: Any, out: list[str], *, show_type: bool) -> None:
    if isinstance(kind, Ptr):
        if value is None:
            out.append(f"({_type_name(kind)})<nil>" if show_type else "<nil>")
            return
        out.append(f"({_type_name(kind)})" if show_type else "<*>")
        _spew_value(kind.elem, value, out)
        return
    if show_type:
        out.append(f"({_type_name(kind)})")
    _spew_value(kind, value, out)


def spew(value: Any, kind: GoType = MACHINE_TEMPLATE_SPEC) -> str:
    """``spew.Sprintf("%#v", value)`` (SortKeys, DisableMethods) of a :func:`decode` result."""
    out: list[str] = []
    _spew(kind, value, out, show_type=True)
    return "".join(out)


# --- apiequality.Semantic.DeepEqual ---------------------------------------------------------------


def semantic_equal(kind: GoType, left: Any, right: Any) -> bool:
    """``Semantic.DeepEqual`` of two :func:`decode` results of type ``kind``."""
    if isinstance(kind, Struct):
        return all(semantic_equal(f.type, left[f.name], right[f.name]) for f in kind.fields)
    if isinstance(kind, Ptr):
        if left is None or right is None:
            return left is right
        return semantic_equal(kind.elem, left, right)
    if isinstance(kind, Slice):
        left, right = left or [], right or []
        return len(left) == len(right) and all(
            semantic_equal(kind.elem, a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(kind, StringMap):
        return (left or {}) == (right or {})
    return bool(left == right)


NODE_TEMPLATE_SPEC: GoType = next(f.type for f in _MACHINE_SPEC.fields if f.name == "NodeTemplateSpec")
"""``v1alpha1.NodeTemplateSpec`` at v0.47.0 (``spec.nodeTemplate`` of a machine template)."""


def _json_normal(value: Any) -> Any:
    """JSON with nulls and empty strings, lists and objects dropped (Go's zero values)."""
    if isinstance(value, Mapping):
        out = {key: _json_normal(item) for key, item in value.items()}
        return {key: item for key, item in out.items() if item not in (None, "", [], {})}
    if isinstance(value, list):
        return [_json_normal(item) for item in value]
    return value


def semantic_equal_json(kind: GoType, left: object, right: object) -> bool:
    """Whether two JSON values decode to semantically equal Go values of ``kind`` (a JSON
    comparison that ignores nulls and empty values when Go's decoding is not reproducible)."""
    if left == right:
        return True
    try:
        return semantic_equal(kind, _decode(kind, left), _decode(kind, right))
    except Unreproducible:
        return bool(_json_normal(left) == _json_normal(right))

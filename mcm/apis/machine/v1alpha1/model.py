"""The codec behind every typed API model: JSON dicts in, dataclasses, JSON dicts out.

Each model is a ``@dataclass(slots=True, kw_only=True)`` subclass of :class:`Model` whose fields
are declared with :func:`json_field` (scalars, lists, maps, optional sub-objects) or
:func:`nested_field` (sub-objects that Go embeds by value). Guarantees:

- **Lossless round trip.** ``Model.from_dict(d).to_dict() == d`` for every JSON object ``d``:
  keys the model does not know, explicit ``null`` values and values of the wrong type are kept
  in ``extra`` under their own key and written back by ``to_dict``. A newer CRD's fields
  therefore survive a read-modify-write through an older mcm.
- **Tolerant reads.** ``from_dict`` never raises on a mapping: missing keys leave the field at
  its "absent" default (``None`` for scalars, lists, maps and optional sub-objects; an empty
  instance for by-value sub-objects); a wrong-typed value counts as absent (and goes to
  ``extra``). A list with one bad item is kept whole in ``extra``.
- **Absent versus empty.** A by-value sub-object is written when it has content or when it was
  present in the input (so ``{"spec": {}}`` round-trips), and left out otherwise.
- **No aliasing.** ``from_dict`` and ``to_dict`` copy: the input dict is never modified and the
  output shares no mutable state with the model.
- Times stay RFC 3339 strings and durations Go duration strings, exactly as sent; no parsing
  happens here, so a round trip cannot reformat them.

Setting a known field wins over a value kept in ``extra`` for the same key.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

__all__ = [
    "BOOL",
    "DURATION",
    "INT",
    "INT_OR_STRING",
    "OPAQUE",
    "STR",
    "TIME",
    "Codec",
    "FieldSpec",
    "ListCodec",
    "MapCodec",
    "Model",
    "ModelCodec",
    "OpaqueCodec",
    "ScalarCodec",
    "json_field",
    "list_of",
    "map_of",
    "model_fields",
    "nested_field",
    "object_of",
]


class Mismatch(Exception):
    """A JSON value does not have the shape a codec expects (internal signal, never escapes)."""


class Codec(abc.ABC):
    """Converts one JSON value to its Python form and back.

    ``schema_type`` names the OpenAPI shape the value has in the CRD: ``string``, ``integer``,
    ``boolean``, ``int-or-string``, ``array``, ``object`` (a map), ``model`` (a typed
    sub-object) or ``any`` (opaque JSON); ``schema_format`` is the OpenAPI format, if any.
    """

    schema_type: str
    schema_format: str | None

    @abc.abstractmethod
    def decode(self, raw: object) -> Any:
        """The Python value for ``raw``; raises :class:`Mismatch` when the shape is wrong."""

    @abc.abstractmethod
    def encode(self, value: Any) -> Any:
        """The JSON value for ``value``."""


@dataclass(frozen=True)
class OpaqueCodec(Codec):
    """Any JSON value, deep-copied in both directions."""

    schema_type: str = "any"
    schema_format: str | None = None

    def decode(self, raw: object) -> Any:
        return copy.deepcopy(raw)

    def encode(self, value: Any) -> Any:
        return copy.deepcopy(value)


@dataclass(frozen=True)
class ScalarCodec(Codec):
    """A JSON string, integer or boolean, accepted only with exactly that JSON type."""

    schema_type: str
    accepts: Callable[[object], bool]
    schema_format: str | None = None

    def decode(self, raw: object) -> Any:
        if not self.accepts(raw):
            raise Mismatch
        return raw

    def encode(self, value: Any) -> Any:
        return value


def _is_str(raw: object) -> bool:
    return isinstance(raw, str)


def _is_int(raw: object) -> bool:
    return isinstance(raw, int) and not isinstance(raw, bool)


def _is_bool(raw: object) -> bool:
    return isinstance(raw, bool)


def _is_int_or_str(raw: object) -> bool:
    return _is_int(raw) or _is_str(raw)


STR = ScalarCodec("string", _is_str)
"""A plain string."""
TIME = ScalarCodec("string", _is_str, "date-time")
"""A ``metav1.Time``: RFC 3339 text, kept verbatim (e.g. ``2024-05-01T10:00:00Z``)."""
DURATION = ScalarCodec("string", _is_str)
"""A ``metav1.Duration``: Go duration text, kept verbatim (e.g. ``20m0s``)."""
INT = ScalarCodec("integer", _is_int)
"""A JSON integer (booleans and floats are rejected)."""
BOOL = ScalarCodec("boolean", _is_bool)
"""A JSON boolean."""
INT_OR_STRING = ScalarCodec("int-or-string", _is_int_or_str)
"""An ``intstr.IntOrString`` or a resource quantity: an integer or a string."""
OPAQUE = OpaqueCodec()
"""Any JSON value, kept as a deep copy (``runtime.RawExtension``, preserved-unknown objects)."""


@dataclass(frozen=True)
class ListCodec(Codec):
    """A JSON array whose items all decode with ``item``."""

    item: Codec
    schema_type: str = "array"
    schema_format: str | None = None

    def decode(self, raw: object) -> Any:
        if not isinstance(raw, list):
            raise Mismatch
        return [self.item.decode(entry) for entry in raw]

    def encode(self, value: Any) -> Any:
        return [self.item.encode(entry) for entry in value]


@dataclass(frozen=True)
class MapCodec(Codec):
    """A JSON object with arbitrary string keys whose values all decode with ``value``."""

    value: Codec
    schema_type: str = "object"
    schema_format: str | None = None

    def decode(self, raw: object) -> Any:
        if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
            raise Mismatch
        return {key: self.value.decode(entry) for key, entry in raw.items()}

    def encode(self, value: Any) -> Any:
        return {key: self.value.encode(entry) for key, entry in value.items()}


@dataclass(frozen=True)
class ModelCodec(Codec):
    """A JSON object decoded into the typed model ``cls``."""

    cls: type[Model]
    schema_type: str = "model"
    schema_format: str | None = None

    def decode(self, raw: object) -> Any:
        if not isinstance(raw, Mapping):
            raise Mismatch
        return self.cls.from_dict(raw)

    def encode(self, value: Any) -> Any:
        return value.to_dict()


def list_of(item: Codec) -> ListCodec:
    """Codec for a JSON array of ``item`` values."""
    return ListCodec(item)


def map_of(value: Codec) -> MapCodec:
    """Codec for a JSON object mapping strings to ``value`` values."""
    return MapCodec(value)


def object_of(cls: type[Model]) -> ModelCodec:
    """Codec for a JSON object typed as ``cls``."""
    return ModelCodec(cls)


def json_field(name: str, codec: Codec) -> Any:
    """A field stored under JSON key ``name``; ``None`` means the key is absent."""
    return field(default=None, metadata={"json": name, "codec": codec, "nested": False})


def nested_field(name: str, cls: type[Model]) -> Any:
    """A by-value sub-object under JSON key ``name``; defaults to an empty ``cls()``."""
    return field(default_factory=cls, metadata={"json": name, "codec": ModelCodec(cls), "nested": True})


@dataclass(frozen=True)
class FieldSpec:
    """One typed field of a model: attribute name, JSON key, codec, by-value or not."""

    attr: str
    json: str
    codec: Codec
    nested: bool


_FIELD_TABLES: dict[type[Model], tuple[FieldSpec, ...]] = {}
_KEY_TABLES: dict[type[Model], dict[str, FieldSpec]] = {}


def model_fields(cls: type[Model]) -> tuple[FieldSpec, ...]:
    """The typed fields of ``cls`` in declaration order (``extra`` excluded)."""
    table = _FIELD_TABLES.get(cls)
    if table is None:
        table = tuple(
            FieldSpec(f.name, f.metadata["json"], f.metadata["codec"], f.metadata["nested"])
            for f in dataclasses.fields(cls)
            if "json" in f.metadata
        )
        _FIELD_TABLES[cls] = table
    return table


def _fields_by_key(cls: type[Model]) -> dict[str, FieldSpec]:
    table = _KEY_TABLES.get(cls)
    if table is None:
        table = {spec.json: spec for spec in model_fields(cls)}
        _KEY_TABLES[cls] = table
    return table


@dataclass(slots=True, kw_only=True)
class Model:
    """Base of every typed API object; see the module docstring for the guarantees.

    ``extra`` holds the JSON members the model could not type (unknown keys, ``null`` values,
    wrong-typed values), verbatim.
    """

    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    _present: bool = field(default=False, init=False, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Self:
        """Decode ``data``; ``None`` gives an empty object. Raises ``TypeError`` only when
        ``data`` is neither a mapping nor ``None``."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_dict expects a mapping, got {type(data).__name__}")
        by_key = _fields_by_key(cls)
        extra: dict[str, Any] = {}
        decoded: dict[str, Any] = {}
        for key, raw in data.items():
            spec = by_key.get(key)
            if spec is None or raw is None:
                extra[key] = copy.deepcopy(raw)
                continue
            try:
                decoded[spec.attr] = spec.codec.decode(raw)
            except Mismatch:
                extra[key] = copy.deepcopy(raw)
        obj = cls(**decoded)  # the generated __init__ builds only the sub-objects data lacks
        obj.extra = extra
        obj._present = True
        return obj

    def to_dict(self) -> dict[str, Any]:
        """Encode to a fresh JSON dict: ``extra`` first, typed fields on top."""
        out = copy.deepcopy(self.extra)
        for spec in model_fields(type(self)):
            value = getattr(self, spec.attr)
            if spec.nested:
                encoded = value.to_dict()
                if encoded or value._present:
                    out[spec.json] = encoded
                continue
            if value is not None:
                out[spec.json] = spec.codec.encode(value)
        return out

    def deep_copy(self) -> Self:
        """An independent deep copy."""
        return copy.deepcopy(self)

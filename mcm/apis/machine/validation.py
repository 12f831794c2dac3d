"""Validation of Machines and MachineClasses, as upstream does it, plus JSON type checks.

- :func:`validate_machine`: the class reference must name a kind and a class
  (``spec.class.kind`` / ``spec.class.name``, messages ``Kind is required`` / ``Name is required``).
- :func:`validate_machine_class`: static checks of a MachineClass: ``providerSpec`` present and
  the node template (capacity ``cpu``, ``gpu``, ``memory``; non-empty ``instanceType``, ``region``,
  ``zone``) with upstream's exact messages.
- :func:`resolve_machine_class`: the controller's class check for a Machine (upstream
  ``ValidateMachineClass``): find the class, merge its Secrets' data, require the MCM finalizer,
  validate the node template; the result carries the retry period upstream uses.

Guarantees: these functions never raise, whatever they are given (wrong JSON types, ``null``,
non-mapping input, huge strings, lookups that raise); every problem becomes a
:class:`FieldError` with a field path. Known fields holding a wrong JSON type are reported as
``Invalid value`` errors (upstream's typed decoding would have refused them), never ignored.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1.machine import Machine
from mcm.apis.machine.v1alpha1.machineclass import MachineClass, NodeTemplate
from mcm.apis.machine.v1alpha1.model import Model, model_fields

__all__ = [
    "ClassGetter",
    "ClassResolution",
    "ErrorType",
    "FieldError",
    "SecretGetter",
    "format_error_list",
    "resolve_machine_class",
    "type_errors",
    "validate_machine",
    "validate_machine_class",
    "validate_node_template",
]

_MAX_VALUE_CHARS = 200
"""Bad values longer than this are shortened when an error is rendered."""


class ErrorType(enum.Enum):
    """Kinds of field error; the values are the texts Kubernetes' ``field.Error`` prints."""

    REQUIRED = "Required value"
    INVALID = "Invalid value"
    NOT_FOUND = "Not found"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    INTERNAL = "Internal error"


_BODY_WITHOUT_VALUE = {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.INTERNAL}


@dataclass(frozen=True)
class FieldError:
    """One problem at a field path (``spec.class.kind``, ``nodeTemplate.capacity.cpu``)."""

    type: ErrorType
    field: str
    detail: str = ""
    bad_value: Any = None

    def __str__(self) -> str:
        """Rendered like Kubernetes' ``field.Error``: ``<path>: <type>[: <value>][: <detail>]``."""
        body = self.type.value
        if self.type not in _BODY_WITHOUT_VALUE:
            body = f"{body}: {_short_repr(self.bad_value)}"
        if self.detail:
            body = f"{body}: {self.detail}"
        return f"{self.field}: {body}"


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a value whose repr fails must not break error rendering
        text = f"<{type(value).__name__}>"
    if len(text) > _MAX_VALUE_CHARS:
        return f"{text[:_MAX_VALUE_CHARS]}... ({len(text)} chars)"
    return text


def format_error_list(errors: list[FieldError]) -> str:
    """Details joined the way upstream prints its error list: ``[msg1 msg2]``."""
    return "[" + " ".join(error.detail or str(error) for error in errors) + "]"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# --- JSON type checks -------------------------------------------------------------------------


def type_errors(model: Model, path: str = "") -> list[FieldError]:
    """``Invalid value`` errors for known fields whose JSON value had the wrong type.

    The model kept such values in ``extra`` (see :mod:`mcm.apis.machine.v1alpha1.model`); this
    walks the whole object, sub-objects and lists of sub-objects included.
    """
    return list(_iter_type_errors(model, path))


def _iter_type_errors(model: Model, path: str) -> Iterator[FieldError]:
    extra = model.extra
    for spec in model_fields(type(model)):
        if extra:
            raw = extra.get(spec.json)
            if raw is not None:
                here = _child(path, spec.json)
                yield FieldError(
                    ErrorType.INVALID, here, f"expected {_expected(spec.codec.schema_type)}", raw
                )
                continue
        value = getattr(model, spec.attr)
        if isinstance(value, Model):
            yield from _iter_type_errors(value, _child(path, spec.json))
        elif isinstance(value, list) and value:
            here = _child(path, spec.json)
            for index, item in enumerate(value):
                if isinstance(item, Model):
                    yield from _iter_type_errors(item, f"{here}[{index}]")


def _expected(schema_type: str) -> str:
    return {
        "model": "an object",
        "object": "an object of string keys",
        "array": "an array",
        "int-or-string": "an integer or a string",
    }.get(schema_type, f"a {schema_type}" if schema_type != "integer" else "an integer")


_M = TypeVar("_M", bound=Model)


def _as_model(cls: type[_M], obj: object, errors: list[FieldError]) -> _M | None:
    """``obj`` as a ``cls`` (decoding a mapping); records an error and returns ``None`` otherwise."""
    if isinstance(obj, cls):
        return obj
    if isinstance(obj, Mapping):
        return cls.from_dict(obj)
    errors.append(FieldError(ErrorType.INVALID, "<root>", f"expected a {cls.__name__} object", obj))
    return None


# --- Machine ------------------------------------------------------------------------------------


def validate_machine(machine: Machine | Mapping[str, Any] | object) -> list[FieldError]:
    """Errors of a Machine (typed or a JSON dict); empty when valid."""
    errors: list[FieldError] = []
    typed = _as_model(Machine, machine, errors)
    if typed is None:
        return errors
    errors.extend(type_errors(typed))
    class_ = typed.spec.class_
    if not class_.kind:
        errors.append(FieldError(ErrorType.REQUIRED, "spec.class.kind", c.MSG_CLASS_KIND_REQUIRED))
    if not class_.name:
        errors.append(FieldError(ErrorType.REQUIRED, "spec.class.name", c.MSG_CLASS_NAME_REQUIRED))
    return errors


# --- MachineClass -------------------------------------------------------------------------------

_REQUIRED_CAPACITY = ("cpu", "gpu", "memory")
_PLACEMENT_FIELDS = (("instanceType", "instance_type"), ("region", "region"), ("zone", "zone"))


def validate_node_template(
    node_template: NodeTemplate | None, path: str = "nodeTemplate"
) -> list[FieldError]:
    """Upstream's node template checks; an absent template is valid.

    One error per missing capacity key (``cpu``, ``gpu``, ``memory``), then one error if any of
    ``instanceType``, ``region``, ``zone`` is empty; the details are upstream's messages.
    """
    if node_template is None:
        return []
    errors: list[FieldError] = []
    capacity = node_template.capacity or {}
    for key in _REQUIRED_CAPACITY:
        if key not in capacity:
            field_path = _child(_child(path, "capacity"), key)
            errors.append(FieldError(ErrorType.REQUIRED, field_path, c.MSG_NODE_TEMPLATE_CAPACITY))
    for json_name, attr in _PLACEMENT_FIELDS:
        if not getattr(node_template, attr):
            errors.append(
                FieldError(ErrorType.REQUIRED, _child(path, json_name), c.MSG_NODE_TEMPLATE_PLACEMENT)
            )
            break
    return errors


def validate_machine_class(machine_class: MachineClass | Mapping[str, Any] | object) -> list[FieldError]:
    """Static errors of a MachineClass (typed or a JSON dict); empty when valid."""
    errors: list[FieldError] = []
    typed = _as_model(MachineClass, machine_class, errors)
    if typed is None:
        return errors
    errors.extend(type_errors(typed))
    if typed.provider_spec is None and "providerSpec" not in typed.extra:
        errors.append(FieldError(ErrorType.REQUIRED, "providerSpec", "providerSpec is required"))
    errors.extend(validate_node_template(typed.node_template))
    return errors


# --- Class and secret resolution for a Machine (upstream ValidateMachineClass) ----------------

ClassGetter = Callable[[str, str], Mapping[str, Any] | None]
"""``(namespace, name)`` → the MachineClass JSON, ``None`` when not found; may raise on other errors."""
SecretGetter = Callable[[str, str], Mapping[str, Any] | None]
"""``(namespace, name)`` → the Secret JSON, ``None`` when not found; may raise on other errors."""


@dataclass(frozen=True)
class ClassResolution:
    """Outcome of :func:`resolve_machine_class`.

    ``retry`` is the period (seconds) upstream requeues with: Long by default and after lookup
    failures, Short when the class lacks its finalizer or has an invalid node template.
    ``secret_data`` is the merged, base64-decoded data of the class's Secrets (``None`` when no
    Secret was found). ``class_needs_finalizer`` asks the caller to enqueue the class.
    """

    machine_class: MachineClass | None
    secret_data: dict[str, bytes] | None
    retry: float
    errors: tuple[FieldError, ...] = field(default=())
    class_needs_finalizer: bool = False

    @property
    def ok(self) -> bool:
        """Whether the machine can be reconciled with this class."""
        return not self.errors and self.machine_class is not None


def _class_reference(machine: object) -> tuple[str | None, str] | None:
    """``spec.class`` kind and name (``""`` when absent) as the typed Machine reads them (a
    value that is not a string counts as absent), without decoding the whole Machine; ``None``
    when ``machine`` is neither a Machine nor a mapping."""
    if isinstance(machine, Machine):
        return machine.spec.class_.kind, machine.spec.class_.name or ""
    if not isinstance(machine, Mapping):
        return None
    spec = machine.get("spec")
    reference = spec.get("class") if isinstance(spec, Mapping) else None
    if not isinstance(reference, Mapping):
        return None, ""
    kind, name = reference.get("kind"), reference.get("name")
    return (kind if isinstance(kind, str) else None), (name if isinstance(name, str) else "")


def resolve_machine_class(
    machine: Machine | Mapping[str, Any],
    namespace: str,
    *,
    get_class: ClassGetter,
    get_secret: SecretGetter,
) -> ClassResolution:
    """Resolve and check ``machine``'s class in the controller ``namespace``.

    In order: the class kind must be ``MachineClass`` (legacy provider kinds are not migrated:
    ``Unsupported value``, Long); the class must exist (``Not found``, Long) and decode; its
    Secrets' data is merged (``secretRef`` first, ``credentialsSecretRef`` over it; a missing
    Secret counts as absent, a failing lookup is an error, Long); the class must carry the MCM
    finalizer (Short, ``class_needs_finalizer``); its node template must be valid (Short).
    Paths of class and Secret errors are relative to the MachineClass (``secretRef.name``).
    """
    reference = _class_reference(machine)
    if reference is None:
        machine_errors: list[FieldError] = []
        _as_model(Machine, machine, machine_errors)
        return ClassResolution(None, None, c.LONG_RETRY, tuple(machine_errors))
    kind, name = reference
    if kind != c.MACHINE_CLASS_KIND:
        detail = f'supported values: "{c.MACHINE_CLASS_KIND}"'
        return _failed(FieldError(ErrorType.NOT_SUPPORTED, "spec.class.kind", detail, kind), c.LONG_RETRY)
    raw_class, lookup_error = _lookup(get_class, namespace, name)
    if lookup_error is not None:
        return _failed(FieldError(ErrorType.INTERNAL, "spec.class.name", lookup_error), c.LONG_RETRY)
    if raw_class is None:
        detail = f"MachineClass {namespace}/{name} not found"
        return _failed(FieldError(ErrorType.NOT_FOUND, "spec.class.name", detail, name), c.LONG_RETRY)
    class_errors: list[FieldError] = []
    machine_class = _as_model(MachineClass, raw_class, class_errors)
    if machine_class is None:
        return _failed(
            FieldError(ErrorType.INVALID, "spec.class.name", "MachineClass is not an object"), c.LONG_RETRY
        )
    secret_data, secret_errors = _secret_data(machine_class, namespace, get_secret)
    if secret_errors:
        return ClassResolution(machine_class, None, c.LONG_RETRY, tuple(secret_errors))
    if not machine_class.metadata.has_finalizer(c.MCM_FINALIZER):
        detail = c.ERR_CLASS_WITHOUT_FINALIZER.format(machine_class=machine_class.metadata.name or name)
        error = FieldError(ErrorType.FORBIDDEN, "metadata.finalizers", detail)
        return ClassResolution(
            machine_class, secret_data, c.SHORT_RETRY, (error,), class_needs_finalizer=True
        )
    template_errors = type_errors(machine_class) + validate_node_template(machine_class.node_template)
    if template_errors:
        return ClassResolution(machine_class, secret_data, c.SHORT_RETRY, tuple(template_errors))
    return ClassResolution(machine_class, secret_data, c.LONG_RETRY)


def _failed(error: FieldError, retry: float) -> ClassResolution:
    return ClassResolution(None, None, retry, (error,))


def _lookup(
    getter: Callable[[str, str], Mapping[str, Any] | None], namespace: str, name: str
) -> tuple[Mapping[str, Any] | None, str | None]:
    """Call a getter, turning any exception into an error text."""
    try:
        return getter(namespace, name), None
    except Exception as exc:  # a lister or client failure becomes an error, never a crash
        return None, f"{type(exc).__name__}: {exc}"


def _secret_data(
    machine_class: MachineClass, namespace: str, get_secret: SecretGetter
) -> tuple[dict[str, bytes] | None, list[FieldError]]:
    """Merged data of the class's Secrets, and the errors met on the way."""
    merged: dict[str, bytes] | None = None
    errors: list[FieldError] = []
    for path, ref in (
        ("secretRef", machine_class.secret_ref),
        ("credentialsSecretRef", machine_class.credentials_secret_ref),
    ):
        if ref is None or not ref.name:
            continue
        if ref.namespace and ref.namespace != namespace:
            continue  # outside the watched namespace: behaves like a missing Secret, as upstream
        raw, lookup_error = _lookup(get_secret, namespace, ref.name)
        if lookup_error is not None:
            errors.append(FieldError(ErrorType.INTERNAL, _child(path, "name"), lookup_error))
            continue
        if raw is None:
            continue
        data, data_errors = _decode_secret_data(raw, _child(path, "name"))
        errors.extend(data_errors)
        merged = {**(merged or {}), **data}
    return merged, errors


def _decode_secret_data(secret: object, path: str) -> tuple[dict[str, bytes], list[FieldError]]:
    """Base64-decoded ``data`` of a Secret. Errors name the Secret and key, never the content."""
    data = secret.get("data") if isinstance(secret, Mapping) else None
    if data is None:
        return {}, []
    if not isinstance(data, Mapping):
        return {}, [FieldError(ErrorType.INVALID, path, "the Secret's data is not an object")]
    decoded: dict[str, bytes] = {}
    errors: list[FieldError] = []
    for key, value in data.items():
        try:
            decoded[str(key)] = base64.b64decode(value, validate=True) if value is not None else b""
        except (binascii.Error, TypeError, ValueError):
            detail = f"the Secret's data key {_short_repr(key)} is not valid base64"
            errors.append(FieldError(ErrorType.INVALID, path, detail))
    return decoded, errors

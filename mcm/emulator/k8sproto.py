"""Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``) for built-in kinds.

kubectl's typed commands (``create namespace|secret|configmap|serviceaccount|deployment``,
``auth can-i``, ``auth whoami``) send protobuf: the 4-byte magic ``k8s\\0`` followed by a
``runtime.Unknown`` whose ``raw`` field holds the object's message. The message definitions here are
written from the field numbers of k8s.io/api's ``generated.proto`` (the numbers are the wire
contract) and built at import time with the ``protobuf`` package's descriptor API.

Guarantees:

- :func:`decode` returns the object as the JSON the real server would have read: Go's zero
  values (empty strings, 0, false, empty messages; written by Go for non-pointer fields) are
  dropped, except for the pointer fields listed in ``_KEEP_ZERO``; ``metav1.Time`` becomes RFC 3339,
  ``IntOrString`` a number or string, ``Quantity`` a string, ``bytes`` base64.
- Only the fields defined below are read (documented deviation: they cover what kubectl's typed
  ``create`` commands send). A field outside them that carries a value is never dropped silently:
  the body is refused with 415 naming the field, so the client can send JSON instead; fields
  Go writes with their zero value (``selfLink: ""``, an all-zero ``status``) are ignored.
- A body that is not an envelope, a kind without a definition, or a message that does not parse
  raise :class:`ProtobufError` (the server answers 415 or 400).
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Mapping
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory, unknown_fields

__all__ = ["MAGIC", "PROTOBUF", "ProtobufError", "decode", "supports"]

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"
_PACKAGE = "mcm.emulator.k8s"

# message -> "field:number:type" (type: string|int32|int64|bool|bytes|<Message>; "*" repeated;
# "{string}" / "{bytes}" / "{Quantity}" maps with string keys).
_MESSAGES: Mapping[str, tuple[str, ...]] = {
    "TypeMeta": ("apiVersion:1:string", "kind:2:string"),
    "Unknown": ("typeMeta:1:TypeMeta", "raw:2:bytes", "contentEncoding:3:string", "contentType:4:string"),
    "Time": ("seconds:1:int64", "nanos:2:int32"),
    "Quantity": ("string:1:string",),
    "IntOrString": ("type:1:int64", "intVal:2:int32", "strVal:3:string"),
    "OwnerReference": (
        "kind:1:string",
        "name:3:string",
        "uid:4:string",
        "apiVersion:5:string",
        "controller:6:bool",
        "blockOwnerDeletion:7:bool",
    ),
    "ObjectMeta": (
        "name:1:string",
        "generateName:2:string",
        "namespace:3:string",
        "uid:5:string",
        "resourceVersion:6:string",
        "generation:7:int64",
        "creationTimestamp:8:Time",
        "deletionTimestamp:9:Time",
        "deletionGracePeriodSeconds:10:int64",
        "labels:11:{string}",
        "annotations:12:{string}",
        "ownerReferences:13:*OwnerReference",
        "finalizers:14:*string",
    ),
    "LabelSelectorRequirement": ("key:1:string", "operator:2:string", "values:3:*string"),
    "LabelSelector": ("matchLabels:1:{string}", "matchExpressions:2:*LabelSelectorRequirement"),
    "ObjectReference": (
        "kind:1:string",
        "namespace:2:string",
        "name:3:string",
        "uid:4:string",
        "apiVersion:5:string",
        "resourceVersion:6:string",
        "fieldPath:7:string",
    ),
    "LocalObjectReference": ("name:1:string",),
    "NamespaceSpec": ("finalizers:1:*string",),
    "NamespaceStatus": ("phase:1:string",),
    "Namespace": ("metadata:1:ObjectMeta", "spec:2:NamespaceSpec", "status:3:NamespaceStatus"),
    "Secret": (
        "metadata:1:ObjectMeta",
        "data:2:{bytes}",
        "type:3:string",
        "stringData:4:{string}",
        "immutable:5:bool",
    ),
    "ConfigMap": ("metadata:1:ObjectMeta", "data:2:{string}", "binaryData:3:{bytes}", "immutable:4:bool"),
    "ServiceAccount": (
        "metadata:1:ObjectMeta",
        "secrets:2:*ObjectReference",
        "imagePullSecrets:3:*LocalObjectReference",
        "automountServiceAccountToken:4:bool",
    ),
    "ContainerPort": (
        "name:1:string",
        "hostPort:2:int32",
        "containerPort:3:int32",
        "protocol:4:string",
        "hostIP:5:string",
    ),
    "EnvVar": ("name:1:string", "value:2:string"),
    "ResourceRequirements": ("limits:1:{Quantity}", "requests:2:{Quantity}"),
    "Container": (
        "name:1:string",
        "image:2:string",
        "command:3:*string",
        "args:4:*string",
        "workingDir:5:string",
        "ports:6:*ContainerPort",
        "env:7:*EnvVar",
        "resources:8:ResourceRequirements",
        "terminationMessagePath:13:string",
        "imagePullPolicy:14:string",
        "stdin:16:bool",
        "stdinOnce:17:bool",
        "tty:18:bool",
        "terminationMessagePolicy:20:string",
    ),
    "Toleration": (
        "key:1:string",
        "operator:2:string",
        "value:3:string",
        "effect:4:string",
        "tolerationSeconds:5:int64",
    ),
    "PodSpec": (
        "containers:2:*Container",
        "restartPolicy:3:string",
        "terminationGracePeriodSeconds:4:int64",
        "activeDeadlineSeconds:5:int64",
        "dnsPolicy:6:string",
        "nodeSelector:7:{string}",
        "serviceAccountName:8:string",
        "serviceAccount:9:string",
        "nodeName:10:string",
        "hostNetwork:11:bool",
        "hostPID:12:bool",
        "hostIPC:13:bool",
        "imagePullSecrets:15:*LocalObjectReference",
        "hostname:16:string",
        "subdomain:17:string",
        "schedulerName:19:string",
        "initContainers:20:*Container",
        "automountServiceAccountToken:21:bool",
        "tolerations:22:*Toleration",
        "priorityClassName:24:string",
        "priority:25:int32",
    ),
    "Pod": ("metadata:1:ObjectMeta", "spec:2:PodSpec"),
    "PodTemplateSpec": ("metadata:1:ObjectMeta", "spec:2:PodSpec"),
    "RollingUpdateDeployment": ("maxUnavailable:1:IntOrString", "maxSurge:2:IntOrString"),
    "DeploymentStrategy": ("type:1:string", "rollingUpdate:2:RollingUpdateDeployment"),
    "DeploymentSpec": (
        "replicas:1:int32",
        "selector:2:LabelSelector",
        "template:3:PodTemplateSpec",
        "strategy:4:DeploymentStrategy",
        "minReadySeconds:5:int32",
        "revisionHistoryLimit:6:int32",
        "paused:7:bool",
        "progressDeadlineSeconds:9:int32",
    ),
    "Deployment": ("metadata:1:ObjectMeta", "spec:2:DeploymentSpec"),
    "ServicePort": (
        "name:1:string",
        "protocol:2:string",
        "port:3:int32",
        "targetPort:4:IntOrString",
        "nodePort:5:int32",
    ),
    "ServiceSpec": (
        "ports:1:*ServicePort",
        "selector:2:{string}",
        "clusterIP:3:string",
        "type:4:string",
        "externalIPs:5:*string",
        "sessionAffinity:7:string",
        "externalName:10:string",
    ),
    "Service": ("metadata:1:ObjectMeta", "spec:2:ServiceSpec"),
    "ResourceAttributes": (
        "namespace:1:string",
        "verb:2:string",
        "group:3:string",
        "version:4:string",
        "resource:5:string",
        "subresource:6:string",
        "name:7:string",
    ),
    "NonResourceAttributes": ("path:1:string", "verb:2:string"),
    "SelfSubjectAccessReviewSpec": (
        "resourceAttributes:1:ResourceAttributes",
        "nonResourceAttributes:2:NonResourceAttributes",
    ),
    "SelfSubjectAccessReview": ("metadata:1:ObjectMeta", "spec:2:SelfSubjectAccessReviewSpec"),
    "SelfSubjectReview": ("metadata:1:ObjectMeta",),
    "SelfSubjectRulesReviewSpec": ("namespace:1:string",),
    "SelfSubjectRulesReview": ("metadata:1:ObjectMeta", "spec:2:SelfSubjectRulesReviewSpec"),
}

# (group, kind) -> message name; the kinds whose protobuf bodies the emulator reads.
_KINDS: Mapping[tuple[str, str], str] = {
    ("", "Namespace"): "Namespace",
    ("", "Secret"): "Secret",
    ("", "ConfigMap"): "ConfigMap",
    ("", "ServiceAccount"): "ServiceAccount",
    ("", "Pod"): "Pod",
    ("", "Service"): "Service",
    ("apps", "Deployment"): "Deployment",
    ("authorization.k8s.io", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authentication.k8s.io", "SelfSubjectReview"): "SelfSubjectReview",
    ("authorization.k8s.io", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
}

# Pointer fields in Go (``*int32``, ``*bool``, ...): an explicit zero is meaningful and kept.
_KEEP_ZERO: Mapping[str, frozenset[str]] = {
    "DeploymentSpec": frozenset({"replicas", "revisionHistoryLimit", "progressDeadlineSeconds"}),
    "PodSpec": frozenset(
        {"terminationGracePeriodSeconds", "activeDeadlineSeconds", "automountServiceAccountToken", "priority"}
    ),
    "ServiceAccount": frozenset({"automountServiceAccountToken"}),
    "Secret": frozenset({"immutable"}),
    "ConfigMap": frozenset({"immutable"}),
    "ObjectMeta": frozenset({"deletionGracePeriodSeconds"}),
    "OwnerReference": frozenset({"controller", "blockOwnerDeletion"}),
    "Toleration": frozenset({"tolerationSeconds"}),
}

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}


class ProtobufError(ValueError):
    """A protobuf body the emulator cannot read; ``unsupported`` means 415 rather than 400."""

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def _add_field(msg: descriptor_pb2.DescriptorProto, name: str, number: int, type_text: str) -> None:
    field = msg.field.add(name=name, number=number)
    field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    if type_text.startswith("*"):
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        type_text = type_text[1:]
    if type_text.startswith("{"):
        entry = msg.nested_type.add(name=name[0].upper() + name[1:] + "Entry")
        entry.options.map_entry = True
        _add_field(entry, "key", 1, "string")
        _add_field(entry, "value", 2, type_text[1:-1])
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{msg.name}.{entry.name}"
    elif type_text in _SCALARS:
        field.type = _SCALARS[type_text]
    else:
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{type_text}"


def _build() -> dict[str, type[message.Message]]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="mcm_emulator_k8s.proto", package=_PACKAGE, syntax="proto2"
    )
    for name, fields in _MESSAGES.items():
        msg = proto.message_type.add(name=name)
        for spec in fields:
            field_name, number, type_text = spec.split(":")
            _add_field(msg, field_name, int(number), type_text)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _build()


def supports(group: str, kind: str) -> bool:
    """Whether protobuf bodies of this kind can be read."""
    return (group, kind) in _KINDS


def decode(body: bytes, group: str, kind: str) -> dict[str, Any]:
    """The JSON form of a ``k8s\\0`` + ``runtime.Unknown`` body holding a ``group``/``kind`` object."""
    name = _KINDS.get((group, kind))
    if name is None:
        raise ProtobufError(f"no protobuf definition for {kind}", unsupported=True)
    if not body.startswith(MAGIC):
        raise ProtobufError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    envelope: Any = _CLASSES["Unknown"]()
    obj = _CLASSES[name]()
    try:
        envelope.ParseFromString(body[len(MAGIC) :])
        obj.ParseFromString(envelope.raw)
    except message.DecodeError as exc:
        raise ProtobufError("proto: illegal wireType or truncated message") from exc
    _refuse_unread(obj)
    result: dict[str, Any] = {}
    type_meta = envelope.typeMeta
    if type_meta.apiVersion:
        result["apiVersion"] = type_meta.apiVersion
    if type_meta.kind:
        result["kind"] = type_meta.kind
    result.update(_to_json(obj))
    return result


def _refuse_unread(msg: message.Message) -> None:
    """Raise :class:`ProtobufError` (415) if ``msg`` or a message inside it has a field with a value
    that the definitions above do not declare."""
    unread = unknown_fields.UnknownFieldSet(msg)
    for index in range(len(unread)):
        field = unread[index]
        if not _zero(field.wire_type, field.data):
            raise ProtobufError(
                f"the emulator does not read field {field.field_number} of {msg.DESCRIPTOR.name} in "
                "protobuf bodies; send this object as JSON (for example kubectl create -f)",
                unsupported=True,
            )
    for descriptor, value in msg.ListFields():
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            items = (
                list(value.values()) if descriptor.message_type.fields_by_name["value"].message_type else []
            )
        else:
            items = list(value) if descriptor.is_repeated else [value]
        for item in items:
            _refuse_unread(item)


def _zero(wire_type: int, data: Any) -> bool:
    """Whether an undeclared field holds only Go zero values (a number 0, or an empty/all-zero message)."""
    if wire_type != 2:
        return not data
    return _zero_message(bytes(data))


def _zero_message(data: bytes) -> bool:
    index = 0
    try:
        while index < len(data):
            key, index = _varint(data, index)
            wire_type = key & 7
            if wire_type == 0:
                value, index = _varint(data, index)
                if value:
                    return False
            elif wire_type == 2:
                length, index = _varint(data, index)
                if length and not _zero_message(data[index : index + length]):
                    return False
                index += length
            else:
                return False
    except IndexError:
        return False
    return index == len(data)


def _varint(data: bytes, index: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[index]
        index += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, index


def _to_json(msg: message.Message) -> dict[str, Any]:
    name = msg.DESCRIPTOR.name
    keep = _KEEP_ZERO.get(name, frozenset())
    result: dict[str, Any] = {}
    for field, value in msg.ListFields():
        converted = _field_value(field, value)
        if _is_zero(converted) and field.name not in keep:
            continue
        result[field.name] = converted
    return result


def _field_value(field: Any, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {key: _single(value_field, item) for key, item in value.items()}
    if field.is_repeated:
        return [_single(field, item) for item in value]
    return _single(field, value)


def _single(field: Any, value: Any) -> Any:
    if field.message_type is None:
        return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
    kind = field.message_type.name
    if kind == "Time":
        return _time(value)
    if kind == "Quantity":
        return value.string
    if kind == "IntOrString":
        return value.strVal if value.type == 1 else value.intVal
    return _to_json(value)


def _time(value: Any) -> str | None:
    if not value.seconds:
        return None
    moment = _dt.datetime.fromtimestamp(value.seconds, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_zero(value: Any) -> bool:
    if isinstance(value, bool):
        return not value
    return value is None or value in ("", 0, {}, [])

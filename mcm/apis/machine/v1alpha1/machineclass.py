"""The ``MachineClass`` kind: reusable provider configuration plus the Secrets it needs (no status)."""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Self

from mcm.apis.machine.v1alpha1.core import SecretReference
from mcm.apis.machine.v1alpha1.machine import API_VERSION
from mcm.apis.machine.v1alpha1.meta import ListMeta, ObjectMeta
from mcm.apis.machine.v1alpha1.model import (
    INT_OR_STRING,
    OPAQUE,
    STR,
    Model,
    json_field,
    list_of,
    map_of,
    nested_field,
    object_of,
)

__all__ = ["MachineClass", "MachineClassList", "NodeTemplate"]


@dataclass(slots=True, kw_only=True)
class NodeTemplate(Model):
    """Node resources and placement of a class, used by autoscalers to scale from zero.

    Quantities are kept as sent (``4``, ``"16Gi"``).
    """

    capacity: dict[str, int | str] | None = json_field("capacity", map_of(INT_OR_STRING))
    virtual_capacity: dict[str, int | str] | None = json_field("virtualCapacity", map_of(INT_OR_STRING))
    instance_type: str | None = json_field("instanceType", STR)
    region: str | None = json_field("region", STR)
    zone: str | None = json_field("zone", STR)
    architecture: str | None = json_field("architecture", STR)


@dataclass(slots=True, kw_only=True)
class MachineClass(Model):
    """``machine.sapcloud.io/v1alpha1`` ``MachineClass``.

    ``provider_spec`` is opaque provider configuration (any JSON). ``secret_ref`` holds user
    data (and maybe credentials); ``credentials_secret_ref`` data is merged over it.
    """

    KIND: ClassVar[str] = "MachineClass"

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ObjectMeta = nested_field("metadata", ObjectMeta)
    node_template: NodeTemplate | None = json_field("nodeTemplate", object_of(NodeTemplate))
    credentials_secret_ref: SecretReference | None = json_field(
        "credentialsSecretRef", object_of(SecretReference)
    )
    provider_spec: Any = json_field("providerSpec", OPAQUE)
    provider: str | None = json_field("provider", STR)
    secret_ref: SecretReference | None = json_field("secretRef", object_of(SecretReference))

    @classmethod
    def new(cls, name: str, namespace: str) -> Self:
        """A MachineClass with ``apiVersion``, ``kind``, name and namespace set."""
        metadata = ObjectMeta(name=name, namespace=namespace)
        return cls(api_version=API_VERSION, kind=cls.KIND, metadata=metadata)


@dataclass(slots=True, kw_only=True)
class MachineClassList(Model):
    """``MachineClassList``."""

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    metadata: ListMeta = nested_field("metadata", ListMeta)
    items: list[MachineClass] | None = json_field("items", list_of(object_of(MachineClass)))

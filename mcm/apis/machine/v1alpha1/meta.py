"""Light typed object metadata: ``ObjectMeta``, ``ListMeta``, ``OwnerReference``, ``LabelSelector``.

Only the members mcm reads or writes are typed; everything else an API server sends
(``managedFields`` included) is kept verbatim, so metadata round-trips exactly
(see :mod:`mcm.apis.machine.v1alpha1.model`). Timestamps are RFC 3339 strings.
"""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcm.apis.machine.v1alpha1.model import (
    BOOL,
    INT,
    OPAQUE,
    STR,
    TIME,
    Model,
    json_field,
    list_of,
    map_of,
    object_of,
)

__all__ = ["LabelSelector", "LabelSelectorRequirement", "ListMeta", "ObjectMeta", "OwnerReference"]


@dataclass(slots=True, kw_only=True)
class OwnerReference(Model):
    """``metav1.OwnerReference``."""

    api_version: str | None = json_field("apiVersion", STR)
    kind: str | None = json_field("kind", STR)
    name: str | None = json_field("name", STR)
    uid: str | None = json_field("uid", STR)
    controller: bool | None = json_field("controller", BOOL)
    block_owner_deletion: bool | None = json_field("blockOwnerDeletion", BOOL)


@dataclass(slots=True, kw_only=True)
class ObjectMeta(Model):
    """``metav1.ObjectMeta`` (typed subset; the rest is preserved in ``extra``)."""

    name: str | None = json_field("name", STR)
    generate_name: str | None = json_field("generateName", STR)
    namespace: str | None = json_field("namespace", STR)
    uid: str | None = json_field("uid", STR)
    resource_version: str | None = json_field("resourceVersion", STR)
    generation: int | None = json_field("generation", INT)
    creation_timestamp: str | None = json_field("creationTimestamp", TIME)
    deletion_timestamp: str | None = json_field("deletionTimestamp", TIME)
    deletion_grace_period_seconds: int | None = json_field("deletionGracePeriodSeconds", INT)
    labels: dict[str, str] | None = json_field("labels", map_of(STR))
    annotations: dict[str, str] | None = json_field("annotations", map_of(STR))
    finalizers: list[str] | None = json_field("finalizers", list_of(STR))
    owner_references: list[OwnerReference] | None = json_field(
        "ownerReferences", list_of(object_of(OwnerReference))
    )
    managed_fields: list[Any] | None = json_field("managedFields", list_of(OPAQUE))

    def label(self, key: str) -> str | None:
        """The value of label ``key``, or ``None``."""
        return (self.labels or {}).get(key)

    def annotation(self, key: str) -> str | None:
        """The value of annotation ``key``, or ``None``."""
        return (self.annotations or {}).get(key)

    def has_finalizer(self, name: str) -> bool:
        """Whether finalizer ``name`` is set."""
        return name in (self.finalizers or [])


@dataclass(slots=True, kw_only=True)
class ListMeta(Model):
    """``metav1.ListMeta``."""

    resource_version: str | None = json_field("resourceVersion", STR)
    continue_: str | None = json_field("continue", STR)
    remaining_item_count: int | None = json_field("remainingItemCount", INT)
    self_link: str | None = json_field("selfLink", STR)


@dataclass(slots=True, kw_only=True)
class LabelSelectorRequirement(Model):
    """One ``matchExpressions`` entry of a label selector."""

    key: str | None = json_field("key", STR)
    operator: str | None = json_field("operator", STR)
    values: list[str] | None = json_field("values", list_of(STR))


@dataclass(slots=True, kw_only=True)
class LabelSelector(Model):
    """``metav1.LabelSelector``."""

    match_labels: dict[str, str] | None = json_field("matchLabels", map_of(STR))
    match_expressions: list[LabelSelectorRequirement] | None = json_field(
        "matchExpressions", list_of(object_of(LabelSelectorRequirement))
    )

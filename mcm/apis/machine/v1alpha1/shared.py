"""Sub-structures shared by several machine API kinds: class reference, last operation and the
failed-machine summary."""

# ruff: noqa: RUF009 -- json_field()/nested_field() return dataclasses.field() specs

from __future__ import annotations

from dataclasses import dataclass

from mcm.apis.machine.v1alpha1.model import STR, TIME, Model, json_field, nested_field

__all__ = ["ClassSpec", "LastOperation", "MachineSummary"]


@dataclass(slots=True, kw_only=True)
class ClassSpec(Model):
    """Reference to a machine class (``spec.class`` of a Machine, ``spec.machineClass`` of a set)."""

    api_group: str | None = json_field("apiGroup", STR)
    kind: str | None = json_field("kind", STR)
    name: str | None = json_field("name", STR)


@dataclass(slots=True, kw_only=True)
class LastOperation(Model):
    """The last operation performed on a machine (or set): description, state, type, time.

    ``description`` doubles as the deletion-flow marker (see
    :mod:`mcm.apis.machine.constants`); ``error_code`` is a machine code name (HEAD).
    """

    description: str | None = json_field("description", STR)
    error_code: str | None = json_field("errorCode", STR)
    last_update_time: str | None = json_field("lastUpdateTime", TIME)
    state: str | None = json_field("state", STR)
    type: str | None = json_field("type", STR)


@dataclass(slots=True, kw_only=True)
class MachineSummary(Model):
    """Summary of a failed machine, listed in set and deployment status."""

    name: str | None = json_field("name", STR)
    provider_id: str | None = json_field("providerID", STR)
    last_operation: LastOperation = nested_field("lastOperation", LastOperation)
    owner_ref: str | None = json_field("ownerRef", STR)

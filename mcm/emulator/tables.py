"""Server-side tables (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), so kubectl prints
the columns a CRD declares (optional for a server; kubectl falls back to names without it).

Guarantees:

- Custom resources get ``Name`` plus their ``additionalPrinterColumns`` (``type: date`` cells are
  rendered as ages like the real server); without printer columns, ``Name`` and ``Age``.
  Built-in kinds get the real server's columns where :mod:`mcm.emulator.printers` has them
  (nodes, pods, namespaces, services, secrets, configmaps, serviceaccounts, deployments, events),
  else ``Name`` and ``Age``.
- Each row carries the object's metadata as ``PartialObjectMetadata``.
- JSONPath support is the subset CRDs use: ``.a.b``, ``.a[0].b``, ``.a['x.y']`` and a filter
  on one field, ``.a[?(@.type=="Ready")].status`` (the first matching element, as kubectl prints
  conditions).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any

from mcm.emulator.printers import printer_for
from mcm.emulator.registry import ResourceType
from mcm.emulator.store import Obj
from mcm.emulator.timefmt import human_duration, parse_time

__all__ = ["human_duration", "table", "wants_table"]

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
_AGE = {
    "name": "Age",
    "type": "date",
    "jsonPath": ".metadata.creationTimestamp",
    "description": "Age",
    "priority": 0,
}
_SEGMENT = re.compile(
    r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]"
    r"|\[\?\(@\.([A-Za-z0-9_-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]"
)


def wants_table(accept: str) -> bool:
    """Whether the client asked for a ``meta.k8s.io/v1`` Table."""
    for part in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[-1].strip() for p in part.split(";")[1:]}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") == "v1":
            return True
    return False


def _lookup(obj: Any, path: str) -> Any:
    value = obj
    for match in _SEGMENT.finditer(path):
        key = match.group(1) or match.group(3) or match.group(4)
        if match.group(5) is not None:
            field, wanted = match.group(5), match.group(6)
            items = value if isinstance(value, list) else []
            value = next((i for i in items if isinstance(i, Mapping) and str(i.get(field)) == wanted), None)
        elif key is not None:
            value = value.get(key) if isinstance(value, Mapping) else None
        else:
            index = int(match.group(2))
            value = value[index] if isinstance(value, list) and index < len(value) else None
        if value is None:
            return None
    return value


def _cell(column: Mapping[str, Any], obj: Obj, now: _dt.datetime) -> Any:
    value = _lookup(obj, str(column.get("jsonPath", "")))
    if value is None:
        return None
    if column.get("type") == "date" and isinstance(value, str):
        try:
            return human_duration((now - parse_time(value)).total_seconds())
        except ValueError:
            return value
    if isinstance(value, dict | list):
        return str(value)
    return value


def _columns(rt: ResourceType) -> list[Mapping[str, Any]]:
    printer = list(rt.extra.get("printerColumns") or []) if not rt.builtin else []
    return printer or [_AGE]


def _age(obj: Obj, now: _dt.datetime) -> str:
    value = _cell(_AGE, obj, now)
    return str(value) if value is not None else "<unknown>"


def table(rt: ResourceType, objects: list[Obj], list_meta: Mapping[str, Any]) -> Obj:
    """A ``Table`` of ``objects``."""
    now = _dt.datetime.now(_dt.UTC)
    printer = printer_for(rt.group, rt.kind) if rt.builtin else None
    if printer is not None and not printer.name_first:
        return _table(
            printer.columns, [printer.cells(obj, _age(obj, now)) for obj in objects], objects, list_meta
        )
    if printer is not None:
        return _table(
            [dict(_NAME_COLUMN), *printer.columns],
            [[obj["metadata"].get("name", ""), *printer.cells(obj, _age(obj, now))] for obj in objects],
            objects,
            list_meta,
        )
    columns = _columns(rt)
    definitions = [dict(_NAME_COLUMN)] + [
        {
            "name": str(c.get("name", "")),
            "type": str(c.get("type", "string")),
            "format": str(c.get("format", "")),
            "description": str(c.get("description", "")),
            "priority": int(c.get("priority", 0)),
        }
        for c in columns
    ]
    cells = [[obj["metadata"].get("name", ""), *(_cell(c, obj, now) for c in columns)] for obj in objects]
    return _table(definitions, cells, objects, list_meta)


def _table(
    definitions: list[Obj], cells: list[list[Any]], objects: list[Obj], list_meta: Mapping[str, Any]
) -> Obj:
    rows = [
        {
            "cells": row,
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            },
        }
        for row, obj in zip(cells, objects, strict=True)
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta),
        "columnDefinitions": definitions,
        "rows": rows,
    }

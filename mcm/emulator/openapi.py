"""OpenAPI v3 component schemas for ``/openapi/v3/...`` documents (``kubectl explain``).

Guarantees:

- Built-in kinds get the schemas of ``builtin_schemas.json`` (generated from the ``kubernetes``
  client's models, with descriptions; ``tests/emulator/builtin_schemas_gen.py``): the kind's
  schema and every schema it references.
- Custom resources get their CRD version's ``openAPIV3Schema`` with ``apiVersion``, ``kind`` and
  ``metadata`` (a reference to ``ObjectMeta``) added, as the real server publishes them.
- Each kind's schema carries ``x-kubernetes-group-version-kind``, which is how kubectl finds it.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcm.emulator.registry import ResourceType
from mcm.emulator.store import Obj

__all__ = ["component_schemas"]

_TABLE = Path(__file__).with_name("builtin_schemas.json")
_OBJECT_META = "io.k8s.api.ObjectMeta"


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, Obj]]:
    data = json.loads(_TABLE.read_text(encoding="utf-8"))
    return data["kinds"], data["schemas"]


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _closure(roots: list[str], schemas: dict[str, Obj], into: dict[str, Obj]) -> None:
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in into or name not in schemas:
            continue
        into[name] = schemas[name]
        pending.extend(_refs(schemas[name]))


def _custom_schema(rt: ResourceType) -> Obj:
    schema = copy.deepcopy(dict(rt.extra.get("openAPIV3Schema") or {"type": "object"}))
    properties = schema.setdefault("properties", {})
    properties.setdefault("apiVersion", {"type": "string", "description": "APIVersion of the object."})
    properties.setdefault("kind", {"type": "string", "description": "Kind of the object."})
    properties["metadata"] = {
        "allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
        "description": "Standard object's metadata.",
    }
    return schema


def component_schemas(types: list[ResourceType]) -> Obj:
    """``components.schemas`` for the kinds served in one group-version."""
    kinds, schemas = _table()
    result: dict[str, Obj] = {}
    roots: list[str] = []
    for rt in types:
        gvk = [{"group": rt.group, "version": rt.version, "kind": rt.kind}]
        if rt.builtin:
            name = kinds.get(f"{rt.group}/{rt.kind}")
            if name is None:
                continue
            result[name] = {**schemas[name], "x-kubernetes-group-version-kind": gvk}
            roots.extend(_refs(schemas[name]))
        else:
            name = f"{'.'.join(reversed(rt.group.split('.')))}.{rt.version}.{rt.kind}"
            result[name] = {**_custom_schema(rt), "x-kubernetes-group-version-kind": gvk}
            roots.append(_OBJECT_META)
    _closure(roots, schemas, result)
    return result

"""Generate mcm/emulator/builtin_schemas.json (OpenAPI v3 component schemas of the built-in kinds)
from the ``kubernetes`` client's models, for ``kubectl explain`` against the emulator.

Run ``python -m tests.emulator.builtin_schemas_gen`` after upgrading the client; a test checks that
the committed file matches. Each schema carries the model's descriptions; references use
``allOf: [{$ref}]`` as the real server's documents do.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kubernetes.client import models

from tests.emulator.builtin_fields_gen import ROOTS

OUT = Path(__file__).resolve().parents[2] / "mcm" / "emulator" / "builtin_schemas.json"
_PREFIX = re.compile(r"^(?:[A-Z][a-z]+)?V\d+(?:(?:alpha|beta)\d+)?(?=[A-Z])")
_SCALARS = {
    "str": {"type": "string"},
    "bytes": {"type": "string", "format": "byte"},
    "int": {"type": "integer"},
    "bool": {"type": "boolean"},
    "float": {"type": "number"},
    "datetime": {"type": "string", "format": "date-time"},
}


def schema_name(model: str) -> str:
    """``V1PodSpec`` -> ``io.k8s.api.PodSpec`` (kubectl shows the part after the last dot)."""
    stripped = _PREFIX.sub("", model)
    return f"io.k8s.api.{stripped}" if stripped != "Event" else f"io.k8s.api.{model}"


def _description(cls: Any) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ").strip() if not doc.startswith("Attributes") else ""


def _field_schema(type_name: str, pending: list[str]) -> dict[str, Any]:
    if type_name.startswith("List[") and type_name.endswith("]"):
        return {"type": "array", "items": _field_schema(type_name[5:-1], pending)}
    if type_name.startswith("Dict[str, ") and type_name.endswith("]"):
        return {"type": "object", "additionalProperties": _field_schema(type_name[10:-1], pending)}
    if type_name in _SCALARS:
        return dict(_SCALARS[type_name])
    if hasattr(models, type_name) and getattr(getattr(models, type_name), "openapi_types", None):
        pending.append(type_name)
        return {"allOf": [{"$ref": f"#/components/schemas/{schema_name(type_name)}"}]}
    return {"x-kubernetes-preserve-unknown-fields": True}


def generate() -> dict[str, Any]:
    """``{"kinds": {"group/Kind": schema name}, "schemas": {name: schema}}``."""
    schemas: dict[str, Any] = {}
    pending = list(ROOTS.values())
    done: set[str] = set()
    while pending:
        name = pending.pop()
        if name in done:
            continue
        done.add(name)
        cls = getattr(models, name)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for attr, type_name in cls.openapi_types.items():
            json_name = cls.attribute_map[attr]
            field = _field_schema(type_name, pending)
            info = cls.model_fields.get(attr)
            if info is not None and info.description:
                field["description"] = info.description
            if info is not None and info.is_required():
                required.append(json_name)
            properties[json_name] = field
        schema: dict[str, Any] = {"type": "object", "properties": dict(sorted(properties.items()))}
        if _description(cls):
            schema["description"] = _description(cls)
        if required:
            schema["required"] = sorted(required)
        schemas[schema_name(name)] = schema
    kinds = {key: schema_name(model) for key, model in sorted(ROOTS.items())}
    return {"kinds": kinds, "schemas": dict(sorted(schemas.items()))}


def render() -> str:
    """The file's text (one schema per line)."""
    table = generate()
    lines = ['{"kinds": ' + json.dumps(table["kinds"], sort_keys=True) + ",", '"schemas": {']
    items = list(table["schemas"].items())
    for index, (name, schema) in enumerate(items):
        comma = "," if index + 1 < len(items) else ""
        lines.append(json.dumps(name) + ": " + json.dumps(schema, sort_keys=True) + comma)
    lines.append("}}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")

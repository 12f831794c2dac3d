"""Generate mcm/emulator/builtin_fields.json from the ``kubernetes`` client's model field lists.

Run ``python -m tests.emulator.builtin_fields_gen`` after upgrading the client; a test checks that
the committed file matches. Field specs: ``""`` a free-form value (object, int-or-string, time),
``"string"``/``"integer"``/``"boolean"``/``"number"`` a JSON scalar, ``"<Model>"`` an object,
``"[<spec>]"`` a list, ``"{<spec>}"`` a map.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes.client import models

OUT = Path(__file__).resolve().parents[2] / "mcm" / "emulator" / "builtin_fields.json"

ROOTS = {
    "/Namespace": "V1Namespace",
    "/Node": "V1Node",
    "/Pod": "V1Pod",
    "/Secret": "V1Secret",
    "/ConfigMap": "V1ConfigMap",
    "/Service": "V1Service",
    "/Endpoints": "V1Endpoints",
    "/ServiceAccount": "V1ServiceAccount",
    "/PersistentVolume": "V1PersistentVolume",
    "/PersistentVolumeClaim": "V1PersistentVolumeClaim",
    "/Event": "CoreV1Event",
    "events.k8s.io/Event": "EventsV1Event",
    "coordination.k8s.io/Lease": "V1Lease",
    "policy/PodDisruptionBudget": "V1PodDisruptionBudget",
    "storage.k8s.io/VolumeAttachment": "V1VolumeAttachment",
    "apiextensions.k8s.io/CustomResourceDefinition": "V1CustomResourceDefinition",
    "apps/Deployment": "V1Deployment",
}


_SCALARS = {"str": "string", "bytes": "string", "int": "integer", "bool": "boolean", "float": "number"}


def _spec(type_name: str, pending: list[str]) -> str:
    if type_name.startswith("List[") and type_name.endswith("]"):
        return "[" + _spec(type_name[5:-1], pending) + "]"
    if type_name.startswith("Dict[str, ") and type_name.endswith("]"):
        return "{" + _spec(type_name[10:-1], pending) + "}"
    if hasattr(models, type_name) and getattr(getattr(models, type_name), "openapi_types", None):
        pending.append(type_name)
        return type_name
    return _SCALARS.get(type_name, "")


def generate() -> dict[str, Any]:
    """The field table: ``{"kinds": {"group/Kind": model}, "types": {model: {field: spec}}}``."""
    types: dict[str, dict[str, str]] = {}
    pending = list(ROOTS.values())
    while pending:
        name = pending.pop()
        if name in types:
            continue
        cls = getattr(models, name)
        types[name] = {
            cls.attribute_map[attr]: _spec(type_name, pending)
            for attr, type_name in cls.openapi_types.items()
        }
    return {"kinds": dict(sorted(ROOTS.items())), "types": dict(sorted(types.items()))}


def render() -> str:
    """The file's text (one type per line, so diffs stay readable)."""
    table = generate()
    lines = ['{"kinds": ' + json.dumps(table["kinds"], sort_keys=True) + ",", '"types": {']
    items = sorted(table["types"].items())
    for index, (name, fields) in enumerate(items):
        comma = "," if index + 1 < len(items) else ""
        lines.append(json.dumps(name) + ": " + json.dumps(fields, sort_keys=True) + comma)
    lines.append("}}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")

"""Known fields of the built-in kinds, for ``fieldValidation=Strict`` (spec §2.6).

The table ``builtin_fields.json`` is generated from the ``kubernetes`` client's model field lists
(``tests/emulator/builtin_fields_gen.py``); it is loaded on first use.

Guarantees:

- :func:`unknown_paths` returns the paths of fields the kind's model does not declare, in document
  order, formatted like the real server's strict decoding errors (``spec.containers[0].bogus``).
  It descends into objects, lists and maps of declared models; free-form values (``object``,
  int-or-string, raw JSON) are not inspected.
- Kinds missing from the table (custom objects) report nothing.
- Never raises on malformed objects: a value of the wrong shape is not descended into (the kind's
  own decoding rules report it).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = ["unknown_paths"]

_TABLE = Path(__file__).with_name("builtin_fields.json")


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    data = json.loads(_TABLE.read_text(encoding="utf-8"))
    return data["kinds"], data["types"]


def unknown_paths(group: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """Paths of undeclared fields in ``obj``, a ``group``/``kind`` object; [] for unknown kinds."""
    kinds, types = _table()
    model = kinds.get(f"{group}/{kind}")
    if model is None:
        return []
    found: list[str] = []
    _walk(obj, model, "", types, found)
    return found


def _walk(value: Any, spec: str, path: str, types: dict[str, dict[str, str]], found: list[str]) -> None:
    if not spec:
        return
    if spec[0] == "[":
        if isinstance(value, list):
            for index, item in enumerate(value):
                _walk(item, spec[1:-1], f"{path}[{index}]", types, found)
        return
    if spec[0] == "{":
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(item, spec[1:-1], f"{path}[{key}]", types, found)
        return
    fields = types.get(spec)
    if fields is None or not isinstance(value, dict):
        return
    for key, item in value.items():
        child = f"{path}.{key}" if path else str(key)
        sub = fields.get(key)
        if sub is None:
            found.append(child)
        else:
            _walk(item, sub, child, types, found)

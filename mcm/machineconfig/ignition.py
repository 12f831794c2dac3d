"""MachineConfig contents: validation, the merge of seed 004 and content-addressed names.

A MachineConfig's ``spec`` holds ``osImageURL``, ``kernelArguments[]`` and an Ignition-like
``config``: ``storage.files[]`` (``path``, ``contents.source`` as a ``data:`` URL, ``mode``,
``overwrite``) and ``systemd.units[]`` (``name``, ``enabled``, ``contents``). Other keys of
``config`` (``ignition.version``, ``passwd``, …) are carried along.

Guarantees:

- :func:`validate_spec` lists every problem of one MachineConfig (duplicate file paths or unit
  names, relative paths, modes outside 0 to 0o7777, contents that are not a decodable ``data:`` URL,
  wrong JSON types); an empty list means the merge can use it.
- :func:`merge_specs` is the seed's merge: configs sorted by name, the first is the base and the
  others are appended in order; files are replaced by path and units by name (the later one wins,
  in the place the first one had), kernel arguments are appended without duplicates, the last
  non-empty ``osImageURL`` wins, and any other ``config`` key takes the later value.
  OpenShift's ``MergeMachineConfigs`` does the same (Ignition's append semantics).
- :func:`content_digest` is a stable hash of a merged spec (canonical JSON, MD5 hex as
  OpenShift's rendered names use), so the same content always gets the same rendered name.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from mcm.machineconfig.api import name_of, spec_of
from mcm.runtime.client import Object

__all__ = [
    "config_files",
    "content_digest",
    "data_url",
    "decode_data_url",
    "file_text",
    "merge_specs",
    "validate_spec",
]

MAX_MODE = 0o7777


def data_url(text: str | bytes) -> str:
    """``data:,<percent-encoded>`` as Ignition writes inline contents."""
    raw = text.encode() if isinstance(text, str) else text
    return "data:," + quote(raw, safe="")


def decode_data_url(source: str) -> bytes:
    """The bytes of a ``data:[<mediatype>][;base64],<data>`` URL; ``ValueError`` otherwise."""
    if not source.startswith("data:") or "," not in source:
        raise ValueError(f"contents source {source[:40]!r} is not a data: URL")
    header, _, payload = source[len("data:") :].partition(",")
    if header.endswith(";base64"):
        try:
            return base64.b64decode(payload, validate=True)
        except binascii.Error as err:
            raise ValueError(f"contents source is not valid base64: {err}") from None
    return unquote_to_bytes(payload)


def config_files(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """``spec.config.storage.files`` (empty when absent)."""
    storage = (spec.get("config") or {}).get("storage") or {}
    files = storage.get("files") if isinstance(storage, dict) else None
    return [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []


def file_text(spec: dict[str, Any], path: str) -> str | None:
    """The decoded text of the file at ``path``, or ``None`` when the spec has none."""
    for entry in config_files(spec):
        if entry.get("path") == path:
            source = (entry.get("contents") or {}).get("source") or "data:,"
            return decode_data_url(str(source)).decode("utf-8", errors="replace")
    return None


# --- validation ---------------------------------------------------------------------------------


def _section(config: dict[str, Any], section: str, key: str, problems: list[str]) -> list[Any]:
    block = config.get(section)
    if block is None:
        return []
    if not isinstance(block, dict):
        problems.append(f"config.{section} must be an object")
        return []
    items = block.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        problems.append(f"config.{section}.{key} must be a list")
        return []
    return items


def _file_problems(index: int, entry: Any, seen: set[str]) -> list[str]:
    where = f"config.storage.files[{index}]"
    if not isinstance(entry, dict):
        return [f"{where} must be an object"]
    path = entry.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        return [f"{where}.path must be an absolute path, got {path!r}"]
    problems = []
    if path in seen:
        problems.append(f"duplicate file path {path}")
    seen.add(path)
    mode = entry.get("mode")
    if mode is not None and (
        isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= MAX_MODE
    ):
        problems.append(f"{where} ({path}): mode must be an integer from 0 to 4095 (0o7777), got {mode!r}")
    contents = entry.get("contents")
    if contents is not None:
        source = contents.get("source") if isinstance(contents, dict) else None
        if not isinstance(source, str):
            problems.append(f"{where} ({path}): contents.source must be a string")
        else:
            try:
                decode_data_url(source)
            except ValueError as err:
                problems.append(f"{where} ({path}): {err}")
    return problems


def _unit_problems(index: int, entry: Any, seen: set[str]) -> list[str]:
    where = f"config.systemd.units[{index}]"
    if not isinstance(entry, dict):
        return [f"{where} must be an object"]
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return [f"{where}.name must be a non-empty string"]
    problems = []
    if name in seen:
        problems.append(f"duplicate systemd unit {name}")
    seen.add(name)
    if entry.get("enabled") is not None and not isinstance(entry.get("enabled"), bool):
        problems.append(f"{where} ({name}): enabled must be a boolean")
    if entry.get("contents") is not None and not isinstance(entry.get("contents"), str):
        problems.append(f"{where} ({name}): contents must be a string")
    return problems


def validate_spec(spec: Any) -> list[str]:
    """Every problem of a MachineConfig spec that stops it from being merged."""
    if not isinstance(spec, dict):
        return ["spec must be an object"]
    problems: list[str] = []
    if spec.get("osImageURL") is not None and not isinstance(spec.get("osImageURL"), str):
        problems.append("osImageURL must be a string")
    kargs = spec.get("kernelArguments")
    if kargs is not None and (not isinstance(kargs, list) or not all(isinstance(a, str) for a in kargs)):
        problems.append("kernelArguments must be a list of strings")
    config = spec.get("config")
    if config is None:
        return problems
    if not isinstance(config, dict):
        return [*problems, "config must be an object"]
    paths: set[str] = set()
    for index, entry in enumerate(_section(config, "storage", "files", problems)):
        problems.extend(_file_problems(index, entry, paths))
    units: set[str] = set()
    for index, entry in enumerate(_section(config, "systemd", "units", problems)):
        problems.extend(_unit_problems(index, entry, units))
    return problems


# --- merge --------------------------------------------------------------------------------------


def _merge_keyed(base: list[dict[str, Any]], extra: Iterable[dict[str, Any]], key: str) -> None:
    """Replace entries of ``base`` by ``key`` in place, append the new ones."""
    position = {entry[key]: index for index, entry in enumerate(base)}
    for entry in extra:
        if entry[key] in position:
            base[position[entry[key]]] = copy.deepcopy(entry)
        else:
            position[entry[key]] = len(base)
            base.append(copy.deepcopy(entry))


def _append_config(merged: dict[str, Any], config: dict[str, Any]) -> None:
    for section, value in config.items():
        if section not in ("storage", "systemd"):
            merged[section] = copy.deepcopy(value)
    files = config_files({"config": config})
    if files:
        storage = merged.setdefault("storage", {})
        _merge_keyed(storage.setdefault("files", []), files, "path")
    units = ((config.get("systemd") or {}).get("units")) or []
    if units:
        systemd = merged.setdefault("systemd", {})
        _merge_keyed(systemd.setdefault("units", []), units, "name")


def merge_specs(configs: Iterable[Object]) -> dict[str, Any]:
    """The merged spec of valid MachineConfigs (see the module docstring for the rules)."""
    ordered = sorted(configs, key=name_of)
    merged_config: dict[str, Any] = {}
    kernel_arguments: list[str] = []
    os_image_url = ""
    for config in ordered:
        spec = spec_of(config)
        _append_config(merged_config, spec.get("config") or {})
        for argument in spec.get("kernelArguments") or []:
            if argument not in kernel_arguments:
                kernel_arguments.append(argument)
        os_image_url = spec.get("osImageURL") or os_image_url
    return {"osImageURL": os_image_url, "config": merged_config, "kernelArguments": kernel_arguments}


def content_digest(spec: dict[str, Any]) -> str:
    """MD5 hex of the spec's canonical JSON (stable across processes and key order)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.md5(canonical.encode(), usedforsecurity=False).hexdigest()

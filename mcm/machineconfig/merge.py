"""The merge of a pool's MachineConfigs into one rendered spec.

``config`` (Ignition v3) is merged as Ignition merges a child config into its parent
(``coreos/ignition`` ``config/merge/merge.go``, ``MergeStructTranscribe``, with the ``Key()``,
``IgnoreDuplicates()`` and ``MergedKeys()`` of ``config/v3_*/types``), on the decoded JSON:

- objects merge key by key, recursively; a value the later config sets (not absent, not null)
  replaces the earlier one, and a value it leaves out keeps the earlier one — so a later file entry
  that only changes the contents keeps the earlier ``mode``, ``user`` and ``overwrite``;
- lists of entries merge by key — ``storage.files``, ``directories`` and ``links`` by ``path``
  (one key space: a path the later config moves to another of the three lists leaves the earlier
  list), ``systemd.units`` and their ``dropins``, ``passwd.users`` and ``groups``, ``raid`` and
  ``luks`` by ``name``, ``disks`` and ``filesystems`` by ``device``, partitions by number (else
  label), resources of ``ignition.config.merge`` and ``certificateAuthorities`` by ``source``, tang
  servers by ``url``, HTTP headers by ``name`` (a later header without a value removes it): an
  entry of both configs is merged field by field in the earlier one's place, new entries are
  appended;
- lists of strings (``sshAuthorizedKeys``, user ``groups``, ``noProxy``,
  ``kernelArguments.shouldExist``…) are sets: the earlier values, then the later values not among
  them; ``append`` of a file and the ``options`` of filesystems, RAIDs and LUKS volumes are
  concatenated;
- ``ignition.version`` is the highest version among the configs (every config is valid at it).

A later file entry that sets ``contents.source`` without ``compression`` is not compressed, even if
an earlier entry's contents were (machine-config-operator's ``MergeMachineConfigs`` resets the
compression for the same reason, ``ignitionMergeSetFilesDefaultCompression``).

The rest of the spec as machine-config-operator's ``MergeMachineConfigs``
(``pkg/controller/common/helpers.go``): ``kernelArguments`` are concatenated in order (repeated
arguments such as ``hugepages=`` are kept: their order matters to the kernel); ``kernelType``
``realtime`` or ``64k-pages`` wins over ``default`` (it is left out of the result when no config
sets one, so the rendered names of configs without it do not change); the last non-empty
``osImageURL`` wins.

The configs are merged in the order of their names, the first being the base. Inputs are never
changed; call it only with configs :func:`~mcm.machineconfig.validation.validate_spec` accepts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from mcm.machineconfig.api import name_of, spec_of
from mcm.runtime.client import Object

__all__ = ["merge_configs", "merge_specs", "version_key"]

Path = tuple[str, ...]
"""Where a value sits in a config; ``*`` stands for a list item."""
KeyOf = Callable[[dict[str, Any]], str]

DEFAULT_KERNEL = "default"
SPECIAL_KERNELS = ("realtime", "64k-pages")


def _field(name: str) -> KeyOf:
    return lambda entry: str(entry.get(name) or "")


def _partition_key(entry: dict[str, Any]) -> str:
    """``Partition.Key()``: the number if set, else the label."""
    if entry.get("number"):
        return f"number:{entry['number']}"
    return f"label:{entry['label']}" if entry.get("label") is not None else ""


_KEYED: dict[Path, KeyOf] = {
    ("ignition", "config", "merge"): _field("source"),
    ("ignition", "security", "tls", "certificateAuthorities"): _field("source"),
    ("storage", "files"): _field("path"),
    ("storage", "directories"): _field("path"),
    ("storage", "links"): _field("path"),
    ("storage", "disks"): _field("device"),
    ("storage", "disks", "*", "partitions"): _partition_key,
    ("storage", "filesystems"): _field("device"),
    ("storage", "raid"): _field("name"),
    ("storage", "luks"): _field("name"),
    ("storage", "luks", "*", "clevis", "tang"): _field("url"),
    ("systemd", "units"): _field("name"),
    ("systemd", "units", "*", "dropins"): _field("name"),
    ("passwd", "users"): _field("name"),
    ("passwd", "groups"): _field("name"),
}
_CONCATENATED: frozenset[Path] = frozenset(
    {
        ("storage", "files", "*", "append"),
        ("storage", "filesystems", "*", "options"),
        ("storage", "filesystems", "*", "mountOptions"),
        ("storage", "raid", "*", "options"),
        ("storage", "luks", "*", "options"),
    }
)
_SHARED_KEYS: dict[Path, tuple[str, ...]] = {
    ("storage",): ("files", "directories", "links"),
    ("kernelArguments",): ("shouldExist", "shouldNotExist"),
}
"""Lists whose entries share one key space (``Storage.MergedKeys``, ``KernelArguments.MergedKeys``)."""


def version_key(version: Any) -> tuple[int, ...]:
    """``"3.4.0"`` → ``(3, 4, 0)`` for comparing valid versions."""
    return tuple(int(part) for part in str(version).split("."))


def _key_of(path: Path, items: list[Any]) -> KeyOf | None:
    if path in _KEYED:
        return _KEYED[path]
    if path and path[-1] == "httpHeaders":
        return _field("name")
    if all(not isinstance(item, (dict, list)) for item in items):
        return str
    return None


def _merge_value(parent: Any, child: Any, path: Path) -> Any:
    if child is None:
        return copy.deepcopy(parent)
    if parent is None:
        return copy.deepcopy(child)
    if isinstance(parent, dict) and isinstance(child, dict):
        return _merge_object(parent, child, path)
    if isinstance(parent, list) and isinstance(child, list):
        return _merge_list(parent, child, path)
    return copy.deepcopy(child)


def _merge_object(parent: dict[str, Any], child: dict[str, Any], path: Path) -> dict[str, Any]:
    parent = _without_moved_entries(parent, child, path)
    merged = {key: _merge_value(parent.get(key), child.get(key), (*path, key)) for key in parent}
    merged.update({k: copy.deepcopy(v) for k, v in child.items() if k not in parent and v is not None})
    if path == ("storage", "files", "*"):
        _reset_compression(merged, child)
    return merged


def _without_moved_entries(parent: dict[str, Any], child: dict[str, Any], path: Path) -> dict[str, Any]:
    """Drop the earlier entries whose key the later config uses in another list of the same key
    space (``mergeStruct``'s case 2: the later list wins the key)."""
    lists = _SHARED_KEYS.get(path)
    if not lists:
        return parent
    result = dict(parent)
    for name in lists:
        if not isinstance(parent.get(name), list):
            continue
        key = _key_of((*path, name), parent[name]) or str
        elsewhere = {
            key(entry) if isinstance(entry, dict) else str(entry)
            for other in lists
            if other != name and isinstance(child.get(other), list)
            for entry in child[other]
        }
        result[name] = [
            e for e in parent[name] if (key(e) if isinstance(e, dict) else str(e)) not in elsewhere
        ]
    return result


def _merge_list(parent: list[Any], child: list[Any], path: Path) -> list[Any]:
    if path in _CONCATENATED:
        return copy.deepcopy(parent + child)
    key = _key_of(path, parent + child)
    if key is None:  # not an Ignition list: the later one replaces it
        return copy.deepcopy(child)
    later = {key(entry): entry for entry in child}
    merged = []
    for entry in parent:
        match = later.get(key(entry))
        if match is None:
            merged.append(copy.deepcopy(entry))
        elif not (path[-1] == "httpHeaders" and match.get("value") is None):
            merged.append(_merge_value(entry, match, (*path, "*")))
    earlier = {key(entry) for entry in parent}
    merged.extend(copy.deepcopy(entry) for entry in child if key(entry) not in earlier)
    return merged


def _reset_compression(merged: dict[str, Any], child: dict[str, Any]) -> None:
    contents = child.get("contents")
    if isinstance(contents, dict) and contents.get("source") is not None and "compression" not in contents:
        merged_contents = merged.get("contents")
        if isinstance(merged_contents, dict):
            merged_contents.pop("compression", None)


def merge_configs(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` (an Ignition config) merged into ``parent`` (see the module docstring)."""
    merged = _merge_object(parent, child, ())
    versions = [
        (c.get("ignition") or {}).get("version")
        for c in (parent, child)
        if isinstance(c.get("ignition"), dict)
    ]
    known = [v for v in versions if v]
    if known:
        merged.setdefault("ignition", {})["version"] = max(known, key=version_key)
    return merged


def merge_specs(configs: Iterable[Object]) -> dict[str, Any]:
    """The rendered spec of valid MachineConfigs, merged in name order (module docstring)."""
    ordered = sorted(configs, key=name_of)
    merged_config: dict[str, Any] = {}
    kernel_arguments: list[str] = []
    kernel_type = ""
    os_image_url = ""
    for config in ordered:
        spec = spec_of(config)
        merged_config = merge_configs(merged_config, spec.get("config") or {})
        kernel_arguments.extend(spec.get("kernelArguments") or [])
        if spec.get("kernelType") in SPECIAL_KERNELS:
            kernel_type = str(spec["kernelType"])
        os_image_url = spec.get("osImageURL") or os_image_url
    merged: dict[str, Any] = {
        "osImageURL": os_image_url,
        "config": merged_config,
        "kernelArguments": kernel_arguments,
    }
    if kernel_type:
        merged["kernelType"] = kernel_type
    return merged

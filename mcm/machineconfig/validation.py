"""Validation of one MachineConfig spec, as machine-config-operator's ``ValidateMachineConfig``
(``pkg/controller/common/helpers.go``) validates it before a merge.

:func:`validate_spec` lists every problem; an empty list means the merge may use the config and a
daemon may apply it. It checks:

- ``kernelType``: empty, ``default``, ``realtime`` or ``64k-pages`` (MCO's message:
  ``kernelType=<value> is invalid``); ``osImageURL`` a string; ``kernelArguments`` strings;
- ``config``: absent or ``{}`` is an empty config (valid, as MCO accepts a MachineConfig with only
  kernel arguments); otherwise an object whose ``ignition.version`` is a supported Ignition spec
  version — 3.0.0 to 3.5.0, what MCO's ``IgnParseWrapper`` parses with Ignition's
  ``config/v3_5.ParseCompatibleVersion`` (spec 2 configs, which MCO converts, are refused);
- what Ignition's ``config/validate`` and ``config/v3_*/types`` check of the sections a node gets:
  absolute paths, file modes (0 to 0o777: MCO's ``validateIgn3FileModes`` refuses setuid, setgid
  and sticky bits), ``overwrite`` only with a ``contents.source``, compression ``gzip`` or none,
  unit names ending in a systemd unit type, drop-in names ending in ``.conf``, duplicate keys
  (files, directories and links share one path space), users and groups with names, and the JSON
  types of every field read;
- file contents and appended data are ``data:`` URLs (Ignition would also fetch ``http(s)``,
  ``s3``… sources; mcm's daemon applies configs without network access, so they are refused here
  rather than failing on every node).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from mcm.machineconfig.ignition import decode_data_url

__all__ = ["KERNEL_TYPES", "SUPPORTED_VERSIONS", "validate_spec"]

KERNEL_TYPES: Final = ("", "default", "realtime", "64k-pages")
SUPPORTED_VERSIONS: Final = ("3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0")
MAX_MODE: Final = 0o777
UNIT_TYPES: Final = (
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
)
_SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_SUPPORTED_TEXT = ", ".join(v.rsplit(".", 1)[0] for v in SUPPORTED_VERSIONS)

Problems = list[str]


def _version_problems(config: dict[str, Any]) -> Problems:
    ignition = config.get("ignition")
    if not isinstance(ignition, dict) or ignition.get("version") in (None, ""):
        return ["parsing Ignition config failed: ignition.version is required"]
    version = ignition["version"]
    supported = f"Supported spec versions: {_SUPPORTED_TEXT}"
    if not isinstance(version, str) or not _SEMVER.match(version):
        return [f"parsing Ignition config failed: invalid version {version!r}. {supported}"]
    if version not in SUPPORTED_VERSIONS:
        return [f"parsing Ignition config failed: unknown version {version}. {supported}"]
    return []


def _items(config: dict[str, Any], section: str, key: str, problems: Problems) -> list[Any]:
    block = config.get(section)
    if block is None:
        return []
    if not isinstance(block, dict):
        message = f"config.{section} must be an object"
        if message not in problems:  # one section holds several lists: name it once
            problems.append(message)
        return []
    items = block.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        problems.append(f"config.{section}.{key} must be a list")
        return []
    return items


def _typed(entry: dict[str, Any], where: str, fields: dict[str, type]) -> Problems:
    """A problem for each field of ``entry`` that is set but not of its JSON type."""
    problems = []
    for name, kind in fields.items():
        value = entry.get(name)
        wrong_bool = kind is int and isinstance(value, bool)
        if value is not None and (wrong_bool or not isinstance(value, kind)):
            json_name = _JSON_NAMES[kind.__name__]
            article = "an" if json_name[0] in "aeiou" else "a"
            problems.append(f"{where}.{name} must be {article} {json_name}")
    return problems


_JSON_NAMES = {"str": "string", "int": "integer", "bool": "boolean", "dict": "object", "list": "list"}


def _source_problems(resource: Any, where: str) -> Problems:
    if not isinstance(resource, dict):
        return [f"{where} must be an object"]
    problems = _typed(resource, where, {"source": str, "compression": str})
    if problems:
        return problems
    if resource.get("compression") not in (None, "", "gzip"):
        problems.append(f"{where}.compression must be gzip or empty, got {resource['compression']!r}")
    source = resource.get("source")
    if source is not None:
        try:
            decode_data_url(source)
        except ValueError as err:
            problems.append(f"{where}: {err}")
    return problems


def _node_problems(entry: Any, where: str, seen: set[str]) -> tuple[str, Problems]:
    """Checks every storage node (file, directory, link) shares; returns its path."""
    if not isinstance(entry, dict):
        return "", [f"{where} must be an object"]
    path = entry.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        return "", [f"{where}.path must be an absolute path, got {path!r}"]
    problems = _typed(
        entry, f"{where} ({path})", {"overwrite": bool, "mode": int, "user": dict, "group": dict}
    )
    if path in seen:
        problems.append(f"duplicate file path {path}")
    seen.add(path)
    mode = entry.get("mode")
    if isinstance(mode, int) and not isinstance(mode, bool) and not 0 <= mode <= MAX_MODE:
        problems.append(f"invalid mode {mode:#o} for {path}, cannot exceed {MAX_MODE:#o}".replace("0o", "0"))
    return path, problems


def _file_problems(index: int, entry: Any, seen: set[str]) -> Problems:
    where = f"config.storage.files[{index}]"
    path, problems = _node_problems(entry, where, seen)
    if not path:
        return problems
    contents = entry.get("contents")
    if contents is not None:
        problems.extend(_source_problems(contents, f"{where} ({path}).contents"))
    appended = entry.get("append")
    if appended is not None and not isinstance(appended, list):
        problems.append(f"{where} ({path}).append must be a list")
    for number, resource in enumerate(appended if isinstance(appended, list) else []):
        problems.extend(_source_problems(resource, f"{where} ({path}).append[{number}]"))
    source = contents.get("source") if isinstance(contents, dict) else None
    if entry.get("overwrite") is True and source is None:
        problems.append(f"{where} ({path}): overwrite must be false when contents.source is not set")
    return problems


def _unit_problems(index: int, entry: Any, seen: set[str]) -> Problems:
    where = f"config.systemd.units[{index}]"
    if not isinstance(entry, dict):
        return [f"{where} must be an object"]
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return [f"{where}.name must be a non-empty string"]
    problems = _typed(
        entry, f"{where} ({name})", {"enabled": bool, "mask": bool, "contents": str, "dropins": list}
    )
    if name in seen:
        problems.append(f"duplicate systemd unit {name}")
    seen.add(name)
    if not name.endswith(UNIT_TYPES) or "/" in name:
        problems.append(f"invalid unit name {name}: it must end in a unit type such as .service")
    dropins = entry.get("dropins")
    dropins = dropins if isinstance(dropins, list) else []
    names: set[str] = set()
    for number, dropin in enumerate(dropins):
        problems.extend(_dropin_problems(dropin, f"{where} ({name}).dropins[{number}]", names))
    return problems


def _dropin_problems(dropin: Any, where: str, seen: set[str]) -> Problems:
    if not isinstance(dropin, dict) or not isinstance(dropin.get("name"), str):
        return [f"{where} must be an object with a name"]
    problems = _typed(dropin, where, {"contents": str})
    name = dropin["name"]
    if not name.endswith(".conf") or "/" in name:
        problems.append(f"invalid drop-in name {name}: it must end in .conf")
    if name in seen:
        problems.append(f"{where}: duplicate drop-in {name}")
    seen.add(name)
    return problems


def _named_problems(kind: str, fields: dict[str, Any]) -> Callable[[int, Any, set[str]], Problems]:
    def check(index: int, entry: Any, seen: set[str]) -> Problems:
        where = f"config.passwd.{kind}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            return [f"{where} must be an object with a non-empty name"]
        problems = _typed(entry, where, fields)
        for listed in ("sshAuthorizedKeys", "groups"):
            values = entry.get(listed)
            if isinstance(values, list) and not all(isinstance(v, str) for v in values):
                problems.append(f"{where}.{listed} must be a list of strings")
        if entry["name"] in seen:
            problems.append(f"duplicate {kind[:-1]} {entry['name']}")
        seen.add(entry["name"])
        return problems

    return check


_USER_FIELDS = {
    "sshAuthorizedKeys": list,
    "groups": list,
    "uid": int,
    "passwordHash": str,
    "homeDir": str,
    "shell": str,
}
_GROUP_FIELDS = {"gid": int, "passwordHash": str}


def _config_problems(config: dict[str, Any]) -> Problems:
    problems = _version_problems(config)
    paths: set[str] = set()
    for index, entry in enumerate(_items(config, "storage", "files", problems)):
        problems.extend(_file_problems(index, entry, paths))
    for kind in ("directories", "links"):
        for index, entry in enumerate(_items(config, "storage", kind, problems)):
            problems.extend(_node_problems(entry, f"config.storage.{kind}[{index}]", paths)[1])
    units: set[str] = set()
    for index, entry in enumerate(_items(config, "systemd", "units", problems)):
        problems.extend(_unit_problems(index, entry, units))
    for kind, fields in (("users", _USER_FIELDS), ("groups", _GROUP_FIELDS)):
        names: set[str] = set()
        check = _named_problems(kind, fields)
        for index, entry in enumerate(_items(config, "passwd", kind, problems)):
            problems.extend(check(index, entry, names))
    return problems


def validate_spec(spec: Any) -> Problems:
    """Every problem of a MachineConfig spec (see the module docstring); ``[]`` when valid."""
    if not isinstance(spec, dict):
        return ["spec must be an object"]
    problems: Problems = []
    kernel_type = spec.get("kernelType")
    if kernel_type is not None and kernel_type not in KERNEL_TYPES:
        problems.append(f"kernelType={kernel_type} is invalid")
    if spec.get("osImageURL") is not None and not isinstance(spec.get("osImageURL"), str):
        problems.append("osImageURL must be a string")
    kargs = spec.get("kernelArguments")
    if kargs is not None and (not isinstance(kargs, list) or not all(isinstance(a, str) for a in kargs)):
        problems.append("kernelArguments must be a list of strings")
    config = spec.get("config")
    if config is None or config == {}:
        return problems
    if not isinstance(config, dict):
        return [*problems, "config must be an object"]
    return problems + _config_problems(config)

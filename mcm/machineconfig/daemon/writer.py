"""Writing a rendered config's files and systemd units under a root directory, all or nothing.

:class:`ConfigWriter` applies the difference between the config a node runs and the one it should
run, as machine-config-operator's daemon does (``updateFiles``, ``writeFiles``, ``writeUnits``,
``deleteStaleData`` in ``pkg/daemon/update.go``):

- every file of the new config is written (atomically: a temporary file in the same directory,
  then a rename) with its decoded contents (``data:`` URL, gunzipped for ``compression: gzip``,
  then each ``append`` entry), its ``mode`` (Ignition's default 0644) and, when the config names
  one, its ``user``/``group`` (by id, or by name from the root's ``/etc/passwd`` and
  ``/etc/group``); files are always overwritten, as MCO's daemon does;
- files of the old config that the new one no longer has are removed;
- units with ``contents`` are written to ``/etc/systemd/system/<name>``, their drop-ins to
  ``<name>.d/<drop-in>``; a masked unit is a symlink to ``/dev/null``; units of the old config
  that the new one no longer has are removed;
- parent directories are created (0755).

Before it changes a path it records what was there (contents, mode, owner, or nothing); if any
step fails, every path changed so far is put back, newest first, and :class:`ApplyError` says
which step failed. Paths are resolved under ``root`` and may not leave it (``..`` is refused).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcm.machineconfig.ignition import decode_data_url

__all__ = ["DEFAULT_MODE", "UNIT_DIRECTORY", "ApplyError", "ConfigWriter", "Written", "config_units"]

DEFAULT_MODE = 0o644
"""Ignition's mode of a file that sets none."""
UNIT_DIRECTORY = "/etc/systemd/system"
DIRECTORY_MODE = 0o755


class ApplyError(Exception):
    """A config could not be written (everything written of it was put back)."""


@dataclass
class Written:
    """What an apply changed: the units whose definition changed, and the paths written."""

    units: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Saved:
    """A path as it was before the writer touched it."""

    path: Path
    existed: bool
    link: str | None = None
    data: bytes = b""
    mode: int = 0
    uid: int = -1
    gid: int = -1


def config_files(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The spec's files by path."""
    storage = (spec.get("config") or {}).get("storage") or {}
    return {str(f["path"]): f for f in storage.get("files") or [] if isinstance(f, dict) and f.get("path")}


def config_units(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The spec's systemd units by name."""
    systemd = (spec.get("config") or {}).get("systemd") or {}
    return {str(u["name"]): u for u in systemd.get("units") or [] if isinstance(u, dict) and u.get("name")}


def file_bytes(entry: dict[str, Any]) -> bytes:
    """The contents a file entry describes (``ValueError`` if they cannot be decoded)."""
    contents = entry.get("contents") or {}
    data = decode_data_url(str(contents["source"])) if contents.get("source") is not None else b""
    if contents.get("compression") == "gzip":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise ValueError(f"contents of {entry.get('path')} are not gzip data: {err}") from None
    for resource in entry.get("append") or []:
        data += decode_data_url(str(resource.get("source") or "data:,"))
    return data


class ConfigWriter:
    """Applies configs under ``root`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        self._saved: list[_Saved] = []

    def host_path(self, path: str) -> Path:
        """``path`` of the machine, under the root; ``ApplyError`` if it would leave the root."""
        if not path.startswith("/") or ".." in Path(path).parts:
            raise ApplyError(f"refusing path {path!r}: it must be absolute, without '..'")
        return self.root / path.lstrip("/")

    def apply(self, current: dict[str, Any] | None, desired: dict[str, Any]) -> Written:
        """Write ``desired`` over ``current`` (a spec each); all or nothing."""
        self._saved = []
        written = Written()
        try:
            self._write_files(current or {}, desired, written)
            self._write_units(current or {}, desired, written)
        except ApplyError:
            self.roll_back()
            raise
        except (OSError, ValueError, KeyError) as err:
            self.roll_back()
            raise ApplyError(str(err)) from None
        return written

    def roll_back(self) -> None:
        """Put back every path the last :meth:`apply` changed, newest first."""
        for saved in reversed(self._saved):
            with contextlib.suppress(OSError):
                _restore(saved)
        self._saved = []

    # -- files -----------------------------------------------------------------------------------
    def _write_files(self, current: dict[str, Any], desired: dict[str, Any], written: Written) -> None:
        wanted = config_files(desired)
        for path, entry in wanted.items():
            self._write(path, file_bytes(entry), _mode(entry), self._owner(entry))
            written.paths.append(path)
        for path in config_files(current):
            if path not in wanted:
                self._remove(path)

    def _owner(self, entry: dict[str, Any]) -> tuple[int, int]:
        user, group = entry.get("user") or {}, entry.get("group") or {}
        uid = self._id(user, "passwd")
        gid = self._id(group, "group")
        return uid, gid

    def _id(self, who: dict[str, Any], database: str) -> int:
        """The numeric id of ``{"id": …}`` or ``{"name": …}`` (-1: leave as is)."""
        if who.get("id") is not None:
            return int(who["id"])
        name = who.get("name")
        if not name:
            return -1
        try:
            lines = self.host_path(f"/etc/{database}").read_text(encoding="utf-8").splitlines()
        except OSError as err:
            raise ApplyError(f"cannot look up {name!r} in /etc/{database}: {err}") from None
        for line in lines:
            fields = line.split(":")
            if len(fields) > 2 and fields[0] == name and fields[2].isdigit():
                return int(fields[2])
        raise ApplyError(f"no {'user' if database == 'passwd' else 'group'} {name!r} in /etc/{database}")

    def _write(self, path: str, data: bytes, mode: int, owner: tuple[int, int] = (-1, -1)) -> None:
        try:
            self._write_file(path, data, mode, owner)
        except OSError as err:
            raise ApplyError(f"cannot write {path}: {err.strerror or err}") from None

    def _write_file(self, path: str, data: bytes, mode: int, owner: tuple[int, int]) -> None:
        target = self.host_path(path)
        self._make_parents(target.parent)
        self._save(target)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fchmod(out.fileno(), mode)
                if owner != (-1, -1):
                    os.fchown(out.fileno(), *owner)
                os.fsync(out.fileno())
            if target.is_dir() and not target.is_symlink():
                raise ApplyError(f"cannot write {path}: it is a directory")
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def _make_parents(self, directory: Path) -> None:
        missing = []
        while not directory.exists() and directory != self.root:
            missing.append(directory)
            directory = directory.parent
        for created in reversed(missing):
            self._save(created)
            created.mkdir(mode=DIRECTORY_MODE)

    def _remove(self, path: str) -> None:
        target = self.host_path(path)
        if target.is_symlink() or target.is_file():
            self._save(target)
            target.unlink()

    def _save(self, target: Path) -> None:
        if any(saved.path == target for saved in self._saved):
            return
        self._saved.append(_snapshot(target))

    # -- units -----------------------------------------------------------------------------------
    def _write_units(self, current: dict[str, Any], desired: dict[str, Any], written: Written) -> None:
        old, new = config_units(current), config_units(desired)
        for name, unit in new.items():
            if self._write_unit(unit, old.get(name)):
                written.units.append(name)
        for name, unit in old.items():
            if name not in new:
                self._remove_unit(unit)
                written.units.append(name)

    def _write_unit(self, unit: dict[str, Any], before: dict[str, Any] | None) -> bool:
        """Write the unit's files; whether its definition changed."""
        name = str(unit["name"])
        unit_path = f"{UNIT_DIRECTORY}/{name}"
        if unit.get("mask") is True:
            self._link(unit_path, "/dev/null")
        elif unit.get("contents") is not None:
            self._write(unit_path, str(unit["contents"]).encode(), DEFAULT_MODE)
        elif before is not None and (before.get("mask") is True or before.get("contents") is not None):
            self._remove(unit_path)
        for dropin in unit.get("dropins") or []:
            if dropin.get("contents") is not None:
                self._write(f"{unit_path}.d/{dropin['name']}", str(dropin["contents"]).encode(), DEFAULT_MODE)
        wanted = {d["name"] for d in unit.get("dropins") or [] if d.get("contents") is not None}
        for dropin in (before or {}).get("dropins") or []:
            if dropin["name"] not in wanted:
                self._remove(f"{unit_path}.d/{dropin['name']}")
        return _definition(unit) != _definition(before)

    def _remove_unit(self, unit: dict[str, Any]) -> None:
        unit_path = f"{UNIT_DIRECTORY}/{unit['name']}"
        self._remove(unit_path)
        for dropin in unit.get("dropins") or []:
            self._remove(f"{unit_path}.d/{dropin['name']}")

    def _link(self, path: str, destination: str) -> None:
        target = self.host_path(path)
        self._make_parents(target.parent)
        self._save(target)
        if target.is_symlink() or target.exists():
            target.unlink()
        target.symlink_to(destination)


def _definition(unit: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if unit is None:
        return None
    return (unit.get("contents"), unit.get("mask"), repr(unit.get("dropins")))


def _mode(entry: dict[str, Any]) -> int:
    mode = entry.get("mode")
    return int(mode) if isinstance(mode, int) else DEFAULT_MODE


def _snapshot(target: Path) -> _Saved:
    if target.is_symlink():
        return _Saved(target, True, link=os.readlink(target))
    if not target.exists():
        return _Saved(target, False)
    info = target.stat()
    if stat.S_ISDIR(info.st_mode):
        return _Saved(target, True, mode=-1)
    return _Saved(
        target,
        True,
        data=target.read_bytes(),
        mode=stat.S_IMODE(info.st_mode),
        uid=info.st_uid,
        gid=info.st_gid,
    )


def _restore(saved: _Saved) -> None:
    target = saved.path
    if saved.mode == -1:  # a directory that was there: nothing of it changed
        return
    if not saved.existed:
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        elif target.is_symlink() or target.exists():
            target.unlink()
        return
    if target.is_symlink() or target.is_file():
        target.unlink()
    if saved.link is not None:
        target.symlink_to(saved.link)
        return
    target.write_bytes(saved.data)
    os.chmod(target, saved.mode)
    with contextlib.suppress(PermissionError):
        os.chown(target, saved.uid, saved.gid)

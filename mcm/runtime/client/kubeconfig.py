"""Checks a kubeconfig before it is loaded, so a broken one gets a clear :class:`ConfigError`.

Guarantees:

- Every problem raises :class:`ConfigError` whose message names the file(s) and what is wrong:
  unreadable or empty file, invalid YAML (with line and column), a top level that is not a
  mapping, a ``clusters``/``users``/``contexts`` entry without a name, no context selected, or
  a selected context, cluster or user that is not defined (client-go's ``validateContext``
  rules), or a cluster without a ``server``. A raw YAML or loader exception never escapes.
- Several files (``a:b``) are checked as client-go merges them: for each name the first file
  defining it wins, and the first ``current-context`` set wins.
- Credentials are never part of a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["ConfigError", "Selection", "check_kubeconfig", "select_context"]

_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


class ConfigError(Exception):
    """The kubeconfig or in-cluster configuration cannot be used."""


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def _read(path: str) -> dict[str, Any] | None:
    """The file's top-level mapping, or None for an empty file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"kubeconfig {path!r} cannot be read: {exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"kubeconfig {path!r} is not valid YAML ({_yaml_problem(exc)})") from None
    if document is None:
        return None
    if not isinstance(document, dict):
        raise ConfigError(
            f"kubeconfig {path!r} must be a mapping (apiVersion, clusters, users, contexts), "
            f"not a {type(document).__name__}"
        )
    return document


def _entries(path: str, document: dict[str, Any], section: str, field: str) -> dict[str, Any]:
    """``{name: body}`` of one named list, e.g. ``clusters`` → ``{name: cluster}``."""
    entries = document.get(section)
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise ConfigError(f"kubeconfig {path!r}: {section} must be a list")
    named: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"kubeconfig {path!r}: {section}[{index}] has no name")
        named.setdefault(name, entry.get(field))
    return named


class _Merged:
    def __init__(self) -> None:
        self.current_context = ""
        self.named: dict[str, dict[str, Any]] = {section: {} for section, _ in _SECTIONS}
        self.sources: dict[str, dict[str, str]] = {section: {} for section, _ in _SECTIONS}

    def add(self, path: str, document: dict[str, Any]) -> None:
        current = document.get("current-context")
        if not self.current_context and isinstance(current, str):
            self.current_context = current
        for section, field in _SECTIONS:
            for name, body in _entries(path, document, section, field).items():
                if name not in self.named[section]:
                    self.named[section][name] = body
                    self.sources[section][name] = path


def _check_context(where: str, merged: _Merged, context: str | None) -> None:
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"kubeconfig {where}: no current-context is set and no context was given")
    body = merged.named["contexts"].get(name)
    if name not in merged.named["contexts"]:
        raise ConfigError(f"kubeconfig {where}: context {name!r} is not defined")
    if not isinstance(body, dict):
        raise ConfigError(f"kubeconfig {where}: context {name!r} has no cluster")
    cluster_name, user_name = body.get("cluster"), body.get("user")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise ConfigError(f"kubeconfig {where}: context {name!r} has no cluster")
    if cluster_name not in merged.named["clusters"]:
        raise ConfigError(f"kubeconfig {where}: cluster {cluster_name!r} of context {name!r} is not defined")
    cluster = merged.named["clusters"][cluster_name]
    if not isinstance(cluster, dict) or not cluster.get("server"):
        raise ConfigError(f"kubeconfig {where}: cluster {cluster_name!r} has no server")
    if user_name and user_name not in merged.named["users"]:
        raise ConfigError(f"kubeconfig {where}: user {user_name!r} of context {name!r} is not defined")


@dataclass(frozen=True)
class Selection:
    """The cluster and user a context selects, the files that define them, and its namespace."""

    cluster: dict[str, Any]
    user: dict[str, Any]
    namespace: str | None
    cluster_file: str
    user_file: str


def select_context(paths: Sequence[str], context: str | None = None) -> Selection:
    """Check ``paths`` (merged) as :func:`check_kubeconfig` does and return what the context
    (``context``, else ``current-context``) selects."""
    merged = _merge(paths, context)
    name = context or merged.current_context
    body = merged.named["contexts"][name]
    cluster_name, user_name = body["cluster"], body.get("user")
    user = merged.named["users"].get(user_name) if user_name else None
    namespace = body.get("namespace")
    return Selection(
        cluster=dict(merged.named["clusters"][cluster_name]),
        user=dict(user) if isinstance(user, dict) else {},
        namespace=namespace if isinstance(namespace, str) and namespace else None,
        cluster_file=merged.sources["clusters"][cluster_name],
        user_file=merged.sources["users"].get(user_name or "", merged.sources["clusters"][cluster_name]),
    )


def check_kubeconfig(paths: Sequence[str], context: str | None = None) -> None:
    """Raise :class:`ConfigError` unless ``paths`` (merged) select a usable context."""
    _merge(paths, context)


def _merge(paths: Sequence[str], context: str | None = None) -> _Merged:
    where = repr(":".join(paths))
    merged = _Merged()
    found = False
    for path in paths:
        document = _read(path)
        if document is not None:
            merged.add(path, document)
            found = True
    if not found:
        raise ConfigError(f"kubeconfig {where} is empty")
    _check_context(where, merged, context)
    return merged

"""MachineConfig contents: ``data:`` URLs, reading files of a spec, and content-addressed names.

A MachineConfig's ``spec`` holds ``osImageURL``, ``kernelArguments[]``, ``kernelType`` and an
Ignition v3 ``config``: ``storage.files[]`` (``path``, ``contents.source`` as a ``data:`` URL,
``mode``, ``overwrite``), ``systemd.units[]`` (``name``, ``enabled``, ``contents``), ``passwd`` and
the other Ignition sections. :mod:`mcm.machineconfig.validation` checks a spec,
:mod:`mcm.machineconfig.merge` merges a pool's specs.

:func:`content_digest` is a stable hash of a merged spec (canonical JSON, MD5 hex as OpenShift's
rendered names use), so the same content always gets the same rendered name.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any
from urllib.parse import quote, unquote_to_bytes

__all__ = ["config_files", "content_digest", "data_url", "decode_data_url", "file_text"]


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


def content_digest(spec: dict[str, Any]) -> str:
    """MD5 hex of the spec's canonical JSON (stable across processes and key order)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.md5(canonical.encode(), usedforsecurity=False).hexdigest()

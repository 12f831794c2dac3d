"""Machine templates: the ``machine-template-hash``, MachineSet names, and template equality.

Upstream v0.47.0 (``pkg/controller/controller_utils.go`` ``ComputeHash``,
``pkg/controller/deployment_sync.go`` ``getNewMachineSet``, ``pkg/controller/deployment_util.go``
``EqualIgnoreHash``). Guarantees:

- :func:`compute_hash` is upstream's hash exactly (FNV-1a 32 of the go-spew dump of the Go
  template, then the collision count as 8 little-endian bytes) for every template Go decodes the
  same way (:mod:`mcm.manager.gotypes`); for the rest (a set timestamp, a wrongly typed value)
  it is still a deterministic hash of the JSON, so names stay stable, but not upstream's.
- :func:`machine_set_name` is ``<deployment>-`` plus the first five characters of
  ``SafeEncodeString`` of the decimal hash, as upstream names a new MachineSet.
- :func:`equal_ignore_hash` says whether two templates are the same for roll-out purposes: the
  labels equal apart from ``machine-template-hash``; ``nodeTemplate``, the machine configuration
  and ``class.kind`` ignored (they are copied onto existing machines in place, never rolled).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from mcm.apis.machine import constants as c
from mcm.manager import gotypes
from mcm.runtime import objects as o

__all__ = [
    "compute_hash",
    "equal_ignore_hash",
    "fnv1a32",
    "machine_set_name",
    "safe_encode_string",
    "template_hash_text",
]

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_ENCODED_HASH_LIMIT = 5


def fnv1a32(data: bytes, start: int = _FNV_OFFSET) -> int:
    """32-bit FNV-1a of ``data`` (Go's ``hash/fnv.New32a``), continuing from ``start``."""
    value = start
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


def template_hash_text(template: Mapping[str, Any]) -> str:
    """The text upstream feeds the hash: ``spew.Sprintf("%#v", template)`` of the Go value (a
    canonical JSON dump instead when Go would not decode the template the same way)."""
    try:
        return gotypes.spew(gotypes.decode(template))
    except gotypes.Unreproducible:
        return json.dumps(template, sort_keys=True, separators=(",", ":"), default=str)


def compute_hash(template: Mapping[str, Any], collision_count: int | None) -> int:
    """Upstream's ``ComputeHash(template, collisionCount)``."""
    value = fnv1a32(template_hash_text(template).encode())
    if collision_count is not None:
        value = fnv1a32((collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4), value)
    return value


def safe_encode_string(text: str) -> str:
    """``k8s.io/apimachinery/pkg/util/rand.SafeEncodeString``: no vowels, no look-alikes."""
    return "".join(_ALPHANUMS[ord(char) % len(_ALPHANUMS)] for char in text)


def machine_set_name(deployment_name: str, template_hash: str) -> str:
    """The name of a deployment's new MachineSet for a template hash (decimal string)."""
    return f"{deployment_name}-{safe_encode_string(template_hash)[:_ENCODED_HASH_LIMIT]}"


def _without_rollout_neutral_parts(template: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without labels, nodeTemplate, machine configuration and class kind (shallow:
    only the dicts it drops keys from are copied; the rest is shared and never changed)."""
    out = dict(template)
    metadata = out.get("metadata")
    if isinstance(metadata, Mapping):
        out["metadata"] = {key: value for key, value in metadata.items() if key != "labels"}
    spec = out.get("spec")
    if isinstance(spec, Mapping):
        neutral = {"nodeTemplate", *gotypes.MACHINE_CONFIGURATION_KEYS}
        spec = {key: value for key, value in spec.items() if key not in neutral}
        machine_class = spec.get("class")
        if isinstance(machine_class, Mapping):
            spec["class"] = {key: value for key, value in machine_class.items() if key != "kind"}
        out["spec"] = spec
    return out


def _labels_equal_ignoring_hash(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """Upstream's label rule: every label of the larger set matches the other, the hash label aside."""
    labels1, labels2 = o.labels_of(left), o.labels_of(right)
    if len(labels1) > len(labels2):
        labels1, labels2 = labels2, labels1
    return all(labels1.get(k, "") == v or k == c.LABEL_MACHINE_TEMPLATE_HASH for k, v in labels2.items())


@functools.lru_cache(maxsize=128)
def _decoded(text: str) -> Any:
    """The Go value of a template given as canonical JSON (``None``: not reproducible). Cached:
    a pass compares every set's template with the deployment's, and most are the same few."""
    try:
        return gotypes.decode(json.loads(text))
    except gotypes.Unreproducible:
        return None


def _canonical(template: Mapping[str, Any]) -> str | None:
    try:
        return json.dumps(template, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def equal_ignore_hash(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """Upstream's ``EqualIgnoreHash`` (see the module docstring)."""
    if not _labels_equal_ignoring_hash(left, right):
        return False
    stripped_left, stripped_right = (
        _without_rollout_neutral_parts(left),
        _without_rollout_neutral_parts(right),
    )
    if stripped_left == stripped_right:
        return True
    text_left, text_right = _canonical(stripped_left), _canonical(stripped_right)
    decoded_left = _decoded(text_left) if text_left is not None else None
    decoded_right = _decoded(text_right) if text_right is not None else None
    if decoded_left is None or decoded_right is None:
        return False
    return gotypes.semantic_equal(gotypes.MACHINE_TEMPLATE_SPEC, decoded_left, decoded_right)

"""The MachineClass resolution of the last reconcile, reused while nothing it read has changed.

Every machine reconcile resolves its class (:func:`~mcm.apis.machine.validation.resolve_machine_class`:
decode and check the class, merge its Secrets' data), and every creation or deletion pass turns
the typed class back into a dict for metric labels. The class and its Secrets rarely change, so
:class:`ClassMemo` keeps, per class reference, what the last resolution read from the caches
(each object's ``resourceVersion``, or its absence) and its outcome, and hands the outcome out
again while the caches still hold the same versions.

Guarantees:

- A memoized resolution is returned only when every object the resolution read is at the same
  ``resourceVersion`` (or still absent) in the caches now: the same inputs, the same outcome. A
  lookup that failed (the getter raised) is never memoized.
- The caller gets its own copy of the merged Secret data; the typed ``MachineClass`` is shared
  between reconciles (drivers must not change their requests, see ``docs/driver.md``).
- One entry per class reference (kind, name): the memory is bounded by the number of classes.
- Thread-safe: entries are replaced whole; two workers racing may both resolve, never mix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.apis.machine.validation import ClassResolution, resolve_machine_class
from mcm.runtime import objects as o

__all__ = ["ClassMemo", "class_dict"]

Getter = Callable[[str, str], Mapping[str, Any] | None]
_Read = tuple[str, str, str, str | None]
"""(kind of lookup, namespace, name, resourceVersion or None when absent)."""


def _version(obj: Mapping[str, Any] | None) -> str | None:
    return None if obj is None else str(o.meta(obj).get("resourceVersion") or "")


class ClassMemo:
    """See the module docstring."""

    def __init__(self, namespace: str, get_class: Getter, get_secret: Getter) -> None:
        self._namespace = namespace
        self._getters = {"class": get_class, "secret": get_secret}
        self._entries: dict[tuple[str, str], tuple[tuple[_Read, ...], ClassResolution]] = {}

    def resolve(self, machine: Mapping[str, Any]) -> ClassResolution:
        """``resolve_machine_class(machine, …)`` over the caches, memoized as described above."""
        reference = (o.text(machine, "spec", "class", "kind"), o.text(machine, "spec", "class", "name"))
        entry = self._entries.get(reference)
        if entry is not None and self._unchanged(entry[0]):
            return _own_copy(entry[1])
        reads: list[_Read] = []
        failed = [False]

        def reading(kind: str) -> Getter:
            def get(namespace: str, name: str) -> Mapping[str, Any] | None:
                try:
                    obj = self._getters[kind](namespace, name)
                except Exception:
                    failed[0] = True
                    raise
                reads.append((kind, namespace, name, _version(obj)))
                return obj

            return get

        resolution = resolve_machine_class(
            machine, self._namespace, get_class=reading("class"), get_secret=reading("secret")
        )
        if all(reference) and reads and not failed[0]:
            self._entries[reference] = (tuple(reads), resolution)
        return _own_copy(resolution)

    def _unchanged(self, reads: tuple[_Read, ...]) -> bool:
        try:
            return all(
                _version(self._getters[kind](namespace, name)) == version
                for kind, namespace, name, version in reads
            )
        except Exception:
            return False


def _own_copy(resolution: ClassResolution) -> ClassResolution:
    if resolution.secret_data is None:
        return resolution
    return dataclasses.replace(resolution, secret_data=dict(resolution.secret_data))


_CLASS_DICTS: dict[int, tuple[MachineClass, dict[str, Any]]] = {}
_CLASS_DICTS_MAX = 64


def class_dict(machine_class: MachineClass) -> dict[str, Any]:
    """``machine_class.to_dict()``, computed once per typed class object (a memoized resolution
    hands the same one to every pass; the entry holds the object, so its id is not reused). Read
    it, never change it."""
    entry = _CLASS_DICTS.get(id(machine_class))
    if entry is not None and entry[0] is machine_class:
        return entry[1]
    if len(_CLASS_DICTS) >= _CLASS_DICTS_MAX:
        _CLASS_DICTS.clear()
    value = machine_class.to_dict()
    _CLASS_DICTS[id(machine_class)] = (machine_class, value)
    return value

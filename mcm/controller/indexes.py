"""Secondary indices on the Machine cache, so per-event lookups do not scan every Machine.

Two lookups run once per Node event and once per class reconcile: the Machine labelled
``node=<name>`` and the Machines of one MachineClass. With N machines a full scan makes those
O(N) per event and the whole pipeline O(N²); the indices make them O(1).

Guarantees: :func:`machines_by_node` and :func:`machines_of_class` return exactly what a scan of
``deps.listers.machines`` filtered by the same predicate returns (the index functions use the
same helpers, and index values carry the namespace, so results are restricted to the
controller's namespace); without an indexer (``Listers.machine_indexer`` ``None``, as in unit
tests over fakes) or without a namespace (all namespaces) they scan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcm.apis.machine import constants as c
from mcm.controller.context import Deps
from mcm.runtime import objects as o

__all__ = [
    "MACHINE_CLASS_INDEX",
    "MACHINE_INDEXERS",
    "MACHINE_NODE_INDEX",
    "count_of_class",
    "machines_by_node",
    "machines_of_class",
]

MACHINE_NODE_INDEX = "mcm.gardener.cloud/node"
"""Machine index: ``<namespace>/<value of the node label>``."""

MACHINE_CLASS_INDEX = "mcm.gardener.cloud/machineclass"
"""Machine index: ``<namespace>/<spec.class.name>`` of machines whose class kind is MachineClass."""


def _node_values(machine: Any) -> list[str]:
    if not isinstance(machine, Mapping):
        return []
    node = o.label(machine, c.LABEL_NODE)
    return [f"{o.namespace_of(machine)}/{node}"] if node else []


def _class_values(machine: Any) -> list[str]:
    if not isinstance(machine, Mapping) or o.text(machine, "spec", "class", "kind") != c.MACHINE_CLASS_KIND:
        return []
    name = o.text(machine, "spec", "class", "name")
    return [f"{o.namespace_of(machine)}/{name}"] if name else []


MACHINE_INDEXERS: dict[str, Callable[[Any], list[str]]] = {
    MACHINE_NODE_INDEX: _node_values,
    MACHINE_CLASS_INDEX: _class_values,
}
"""Index functions the controller registers on its Machine informer before it starts."""


def _lookup(
    deps: Deps, index: str, value: str, matches: Callable[[Mapping[str, Any]], bool]
) -> list[Mapping[str, Any]]:
    indexer = deps.listers.machine_indexer
    namespace = deps.listers.machines.namespace if indexer is not None else ""
    if indexer is None or not value or not namespace:
        return [m for m in deps.listers.machines.list() if matches(m)]
    found: list[Mapping[str, Any]] = list(indexer.by_index(index, f"{namespace}/{value}"))
    return found


def count_of_class(deps: Deps, class_name: str) -> int:
    """``len(machines_of_class(deps, class_name))`` without building the list (O(1) with the
    index: the class loop asks it on every machine's arrival and departure)."""
    indexer = deps.listers.machine_indexer
    namespace = deps.listers.machines.namespace if indexer is not None else ""
    if indexer is None or not class_name or not namespace:
        return len(machines_of_class(deps, class_name))
    return indexer.index_count(MACHINE_CLASS_INDEX, f"{namespace}/{class_name}")


def machines_by_node(deps: Deps, node_name: str) -> list[Mapping[str, Any]]:
    """Cached machines (controller namespace) labelled ``node=<node_name>``."""
    return _lookup(deps, MACHINE_NODE_INDEX, node_name, lambda m: o.label(m, c.LABEL_NODE) == node_name)


def machines_of_class(deps: Deps, class_name: str) -> list[Mapping[str, Any]]:
    """Cached machines (controller namespace) whose ``spec.class`` is ``MachineClass``/``class_name``."""
    return _lookup(
        deps,
        MACHINE_CLASS_INDEX,
        class_name,
        lambda m: (
            o.text(m, "spec", "class", "kind") == c.MACHINE_CLASS_KIND
            and o.text(m, "spec", "class", "name") == class_name
        ),
    )

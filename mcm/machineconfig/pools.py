"""A MachinePool's spec read safely: its selectors, ``maxUnavailable`` and which pool owns a node.

Guarantees:

- Selectors follow Deployment semantics (``metav1.LabelSelectorAsSelector``): an absent selector
  selects nothing, ``{}`` would select everything and is refused (OpenShift's ``SelectingAll``),
  anything that does not parse raises :class:`PoolSpecError` with the parser's message.
- :func:`max_unavailable`: ``maxUnavailable`` absent means 1; an integer must be ≥ 1; a
  percentage (``"30%"``) must be 1% to 100% and is taken of the pool's node count rounded down,
  at least 1 (OpenShift's ``maxUnavailable``). ``0`` and ``"0%"`` would never update a node (OpenShift
  silently takes them as 1): like ``"abc"``, ``"150%"`` and ``-1`` they raise
  :class:`PoolSpecError`, which the controllers turn into a condition.
- :meth:`PoolIndex.primary` gives each node at most one pool: the only pool selecting it; or, when
  ``worker`` and exactly one other pool select it, that other pool (a custom pool carved out of
  the workers, as in OpenShift). Any other overlap is an error and the node belongs to none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcm.machineconfig import api
from mcm.runtime.client import Object
from mcm.runtime.intstr import get_scaled_value_from_int_or_percent, int_or_percent
from mcm.runtime.labels import Selector, selector_from_label_selector

__all__ = [
    "PoolIndex",
    "PoolSpecError",
    "config_selector",
    "machine_selector",
    "max_unavailable",
    "nodes_of_pool",
    "spec_problem",
]

MAX_PERCENT = 100


class PoolSpecError(ValueError):
    """The pool's spec cannot be acted on; ``reason`` is the condition and event reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _selector(pool: Object, field: str, what: str) -> Selector:
    raw = api.spec_of(pool).get(field)
    if isinstance(raw, dict) and not raw.get("matchLabels") and not raw.get("matchExpressions"):
        raise PoolSpecError(
            api.Reason.SELECTING_ALL,
            f"This machinepool is selecting all {what}. A non-empty selector is required.",
        )
    if raw is not None and not isinstance(raw, dict):
        raise PoolSpecError(api.Reason.INVALID_SELECTOR, f"spec.{field} must be a label selector object")
    try:
        return selector_from_label_selector(raw)
    except (ValueError, TypeError, AttributeError) as err:
        raise PoolSpecError(api.Reason.INVALID_SELECTOR, f"spec.{field} does not parse: {err}") from None


def machine_selector(pool: Object) -> Selector:
    """``spec.machineSelector``: the Nodes of the pool, by label."""
    return _selector(pool, "machineSelector", "nodes")


def config_selector(pool: Object) -> Selector:
    """``spec.machineConfigSelector``: the MachineConfigs rendered for the pool."""
    return _selector(pool, "machineConfigSelector", "machineconfigs")


def max_unavailable(pool: Object, node_count: int) -> int:
    """How many of the pool's ``node_count`` nodes may be unavailable at once (at least 1)."""
    raw: Any = api.spec_of(pool).get("maxUnavailable")
    if raw is None:
        return 1
    try:
        number, is_percent = int_or_percent(raw)
        value = get_scaled_value_from_int_or_percent(raw, node_count, False)
    except ValueError as err:
        raise PoolSpecError(api.Reason.INVALID_MAX_UNAVAILABLE, f"spec.maxUnavailable: {err}") from None
    if number < 0:
        raise PoolSpecError(
            api.Reason.INVALID_MAX_UNAVAILABLE,
            f"spec.maxUnavailable: {raw!r} must be greater than or equal to 0",
        )
    if is_percent and number > MAX_PERCENT:
        raise PoolSpecError(
            api.Reason.INVALID_MAX_UNAVAILABLE, f"spec.maxUnavailable: {raw!r} must not be greater than 100%"
        )
    if number == 0:
        raise PoolSpecError(
            api.Reason.INVALID_MAX_UNAVAILABLE,
            f"spec.maxUnavailable: {raw!r} would never start an update; set at least 1 "
            "(spec.paused stops updates)",
        )
    return max(1, value)


class PoolIndex:
    """The pools with their parsed machine selectors, to map nodes to pools (build once per pass)."""

    def __init__(self, pools: Iterable[Object]) -> None:
        self.entries: list[tuple[Object, Selector]] = []
        for pool in sorted(pools, key=api.name_of):
            try:
                self.entries.append((pool, machine_selector(pool)))
            except PoolSpecError:
                continue

    def selecting(self, node: Object) -> list[Object]:
        """The pools whose (valid) machine selector matches the node's labels."""
        labels = api.labels_of(node)
        return [pool for pool, selector in self.entries if selector.matches(labels)]

    def primary(self, node: Object) -> tuple[Object | None, str]:
        """``(pool, "")`` for the pool that owns the node, ``(None, why)`` when none may."""
        selecting = self.selecting(node)
        if not selecting:
            return None, ""
        if len(selecting) == 1:
            return selecting[0], ""
        custom = [p for p in selecting if api.name_of(p) != "worker"]
        if len(selecting) == 2 and len(custom) == 1:
            return custom[0], ""
        names = ", ".join(api.name_of(p) for p in selecting)
        return (
            None,
            f"node {api.name_of(node)} is selected by {len(selecting)} pools ({names}); it belongs to none",
        )


def spec_problem(pool: Object, node_count: int = 0) -> PoolSpecError | None:
    """What stops the UpdateController from acting on the pool (machine selector, maxUnavailable)."""
    try:
        machine_selector(pool)
        max_unavailable(pool, node_count)
    except PoolSpecError as err:
        return err
    return None


def nodes_of_pool(
    pool: Object, index: PoolIndex, nodes: Iterable[Object]
) -> tuple[list[Object], list[tuple[Object, str]]]:
    """The nodes whose primary pool is ``pool``, and the nodes it selects that belong to no pool
    because several claim them (each with the reason)."""
    name = api.name_of(pool)
    mine: list[Object] = []
    contested: list[tuple[Object, str]] = []
    for node in nodes:
        owner, why = index.primary(node)
        if owner is not None and api.name_of(owner) == name:
            mine.append(node)
        elif why and name in {api.name_of(p) for p in index.selecting(node)}:
            contested.append((node, why))
    return mine, contested

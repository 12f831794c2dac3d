"""The UpdateController's incremental bookkeeping: each node's pool and phase, tallied per pool.

A pass over a pool of thousands of nodes must not re-read, re-classify and re-sort every node:
during a rollout the daemons change a node every few milliseconds and each change is a pass.
:class:`NodeLedger` keeps one :class:`NodeEntry` per node (its primary pool, readiness, phase
towards that pool's target and pick order) and, per pool, the names of its nodes by phase. The
informer handlers only mark node names as touched (:meth:`NodeLedger.touch`, a set insert, as
enqueueing is); a pass first re-reads the touched nodes (:meth:`NodeLedger.refresh`), so its cost
follows what changed, not the size of the pool.

Guarantees:

- After :meth:`NodeLedger.refresh`, every entry is built from the node as the read function
  returns it (the informer cache overlaid with the controller's own writes) at or after the
  moment it was last touched; a node the read function no longer returns has no entry. An entry
  is never replaced by one built from an older ``resourceVersion``.
- A change of the pool index (a pool added or deleted, a ``machineSelector`` changed) re-reads
  every node; a change of a pool's target recomputes the phases of that pool's nodes.
- :meth:`NodeLedger.counts` equals :func:`~mcm.machineconfig.status.count_nodes` over the pool's
  nodes (degraded nodes listed by name); :meth:`NodeLedger.candidates` picks the nodes
  :mod:`mcm.machineconfig.update` documents, outdated ones in :func:`candidate_order`.
- Thread-safe: one lock around all of it (workers of different pools share the nodes).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mcm.machineconfig import api
from mcm.machineconfig.nodes import (
    DEGRADED,
    OUTDATED,
    UPDATED,
    UPDATING,
    candidate_order,
    desired_config,
    is_ready,
    is_unavailable,
    node_phase,
)
from mcm.machineconfig.pools import PoolIndex
from mcm.machineconfig.status import PoolCounts
from mcm.runtime.client import Object

__all__ = ["NodeEntry", "NodeLedger"]


def _version(node: Object) -> int:
    version = api.meta(node).get("resourceVersion")
    return int(version) if isinstance(version, str) and version.isdigit() else 0


@dataclass(slots=True)
class NodeEntry:
    """What a pass needs to know about one node, computed once per node version."""

    name: str
    node: Object
    version: int
    pool: str
    """Its primary pool ("" for none)."""
    contested: str
    """Why it belongs to no pool although several select it ("" otherwise)."""
    ready: bool
    desired: str
    phase: str
    """Towards the target of its pool ("" without a pool)."""
    order: tuple[int, str, str, str]
    unavailable: bool = False
    """Counts against ``maxUnavailable`` (:func:`~mcm.machineconfig.nodes.is_unavailable`)."""

    def set_phase(self, target: str) -> None:
        self.phase = node_phase(self.node, target)
        self.unavailable = is_unavailable(self.node, self.phase)

    @property
    def startable(self) -> bool:
        """Outdated and able to take workloads: a node a pass may start."""
        return self.phase == OUTDATED and not self.unavailable


@dataclass
class _Book:
    """One pool's nodes, by phase."""

    target: str = ""
    members: dict[str, NodeEntry] = field(default_factory=dict)
    phases: dict[str, set[str]] = field(default_factory=dict)
    unavailable: set[str] = field(default_factory=set)
    ready: int = 0
    heap: list[tuple[tuple[int, str, str, str], int, NodeEntry]] = field(default_factory=list)
    """The outdated entries in pick order (a heap); an entry that left the pool or its phase since
    stays until a pick reaches it or the heap is rebuilt."""
    pushed: int = 0

    def add(self, entry: NodeEntry) -> None:
        self.members[entry.name] = entry
        self.phases.setdefault(entry.phase, set()).add(entry.name)
        self.ready += entry.ready
        if entry.unavailable:
            self.unavailable.add(entry.name)
        if entry.startable:
            self._push(entry)

    def _push(self, entry: NodeEntry) -> None:
        if len(self.heap) > 2 * len(self.named(OUTDATED)) + 64:  # mostly stale: start over
            startable = (self.members[n] for n in self.named(OUTDATED) if self.members[n].startable)
            self.heap = [(e.order, i, e) for i, e in enumerate(startable)]
            heapq.heapify(self.heap)
            self.pushed = len(self.heap)
            if any(e is entry for _, _, e in self.heap):
                return
        self.pushed += 1
        heapq.heappush(self.heap, (entry.order, self.pushed, entry))

    def outdated_first(self, count: int) -> list[NodeEntry]:
        """The first ``count`` startable entries in pick order (stale ones dropped on the way)."""
        picked: list[tuple[tuple[int, str, str, str], int, NodeEntry]] = []
        while self.heap and len(picked) < count:
            item = heapq.heappop(self.heap)
            if self.members.get(item[2].name) is item[2] and item[2].startable:
                picked.append(item)
        for item in picked:  # still outdated until a write says otherwise
            heapq.heappush(self.heap, item)
        return [item[2] for item in picked]

    def remove(self, entry: NodeEntry) -> None:
        if self.members.pop(entry.name, None) is None:
            return
        self.phases.get(entry.phase, set()).discard(entry.name)
        self.unavailable.discard(entry.name)
        self.ready -= entry.ready

    def named(self, phase: str) -> set[str]:
        return self.phases.get(phase, set())


class NodeLedger:
    """See the module docstring. ``read(name)`` returns the node to trust (or ``None``);
    ``names()`` lists every node name in the informer cache."""

    def __init__(self, read: Callable[[str], Object | None], names: Callable[[], Iterable[str]]) -> None:
        self._read = read
        self._names = names
        self._lock = threading.RLock()
        self._touched: set[str] = set()
        self._all_touched = True
        self._index: PoolIndex | None = None
        self._entries: dict[str, NodeEntry] = {}
        self._contested: dict[str, NodeEntry] = {}
        """The nodes several pools claim (so none owns them), by name."""
        self._books: dict[str, _Book] = {}

    # -- marking (informer handlers) -------------------------------------------------------------
    def touch(self, name: str) -> None:
        """The node changed (or may have): the next refresh re-reads it."""
        with self._lock:
            self._touched.add(name)

    # -- reading (passes) ------------------------------------------------------------------------
    def refresh(self, index: PoolIndex, names: Iterable[str] = ()) -> list[NodeEntry]:
        """Re-read the touched nodes (all of them after a change of ``index``) and ``names``;
        returns the entries that belong to no pool because several pools claim them."""
        with self._lock:
            if index is not self._index:
                self._index, self._all_touched = index, True
            everything = self._all_touched
            touched = set(self._names()) | set(self._entries) if everything else self._touched
            touched.update(names)
            self._touched, self._all_touched = set(), False
            contested = []
            for name in touched:
                entry = self._reread(name, everything)
                if entry is not None and entry.contested:
                    contested.append(entry)
            return contested

    def retarget(self, pool: str, target: str) -> None:
        """Make ``target`` the pool's target (recomputing its nodes' phases when it changed)."""
        with self._lock:
            book = self._books.setdefault(pool, _Book())
            if book.target == target:
                return
            entries = list(book.members.values())
            self._books[pool] = book = _Book(target=target)
            for entry in entries:
                entry.set_phase(target)
                book.add(entry)

    def forget_pool(self, pool: str) -> None:
        with self._lock:
            self._books.pop(pool, None)
            self._all_touched = True

    def size(self, pool: str) -> int:
        with self._lock:
            book = self._books.get(pool)
            return 0 if book is None else len(book.members)

    def counts(self, pool: str) -> PoolCounts:
        """The pool's nodes counted by phase (as :func:`~mcm.machineconfig.status.count_nodes`)."""
        with self._lock:
            book = self._books.get(pool) or _Book()
            degraded = sorted(book.named(DEGRADED))
            reasons = tuple(
                f"Node {name} is reporting: "
                f"{api.annotations_of(book.members[name].node).get(api.REASON_ANNOTATION, '')!r}"
                for name in degraded
            )
            return PoolCounts(
                total=len(book.members),
                updated=len(book.named(UPDATED)),
                ready=book.ready,
                unavailable=len(book.unavailable),
                updating=len(book.named(UPDATING)),
                degraded=len(degraded),
                degraded_reasons=reasons,
                contested=self.contested(pool),
            )

    def degraded(self, pool: str) -> list[Object]:
        """The pool's degraded nodes, by name."""
        with self._lock:
            book = self._books.get(pool) or _Book()
            return [book.members[name].node for name in sorted(book.named(DEGRADED))]

    def contested(self, pool: str) -> tuple[str, ...]:
        """Why each node the pool selects belongs to no pool (several claim it), by node name."""
        with self._lock:
            if self._index is None:
                return ()
            found = sorted(
                (name, entry.contested)
                for name, entry in self._contested.items()
                if pool in {api.name_of(p) for p in self._index.selecting(entry.node)}
            )
            return tuple(why for _, why in found)

    def is_degraded(self, name: str) -> bool:
        with self._lock:
            entry = self._entries.get(name)
            return entry is not None and entry.phase == DEGRADED

    def candidates(self, pool: str, limit: int) -> list[Object]:
        """The nodes a pass may target now: Ready nodes updating or degraded whose desired config
        is not the target (they are down already and take no further node down), then as many
        startable nodes (outdated and available) as the bound leaves room for, in
        :func:`candidate_order`."""
        with self._lock:
            book = self._books.get(pool) or _Book()
            busy = [book.members[n] for phase in (UPDATING, DEGRADED) for n in book.named(phase)]
            retarget = sorted(
                (e for e in busy if e.ready and e.desired != book.target),
                key=lambda e: e.order,
            )
            room = max(0, limit - len(book.unavailable))
            fresh = book.outdated_first(room) if room else []
            return [e.node for e in retarget + fresh]

    # -- internals (lock held) -------------------------------------------------------------------
    def _reread(self, name: str, rebuild: bool) -> NodeEntry | None:
        """Bring the node's entry up to date (``rebuild``: even when the node did not change)."""
        old = self._entries.get(name)
        node = self._read(name)
        if node is None:
            if old is not None:
                self._drop(old)
            return None
        if old is not None and _version(node) < old.version:
            node = old.node  # never go back to an older version
        if old is not None and old.node is node and not rebuild:
            return old
        entry = self._entry(node)
        if old is not None:
            self._drop(old)
        self._entries[name] = entry
        if entry.contested:
            self._contested[name] = entry
        if entry.pool:
            self._books.setdefault(entry.pool, _Book()).add(entry)
        return entry

    def _drop(self, entry: NodeEntry) -> None:
        self._entries.pop(entry.name, None)
        self._contested.pop(entry.name, None)
        book = self._books.get(entry.pool)
        if book is not None:
            book.remove(entry)

    def _entry(self, node: Any) -> NodeEntry:
        assert self._index is not None  # set by refresh, the only caller
        owner, why = self._index.primary(node)
        pool = api.name_of(owner) if owner is not None else ""
        book = self._books.get(pool)
        entry = NodeEntry(
            name=api.name_of(node),
            node=node,
            version=_version(node),
            pool=pool,
            contested=why,
            ready=is_ready(node),
            desired=desired_config(node),
            phase="",
            order=candidate_order(node),
        )
        if pool:
            entry.set_phase(book.target if book is not None else "")
        return entry

"""UpdateController: brings each pool's nodes to ``status.currentMachineConfig``.

It coordinates with the daemon on each node through the design's annotations: it sets
``desiredConfig``; the daemon sets ``state`` (done / working / degraded) and ``currentConfig``.
One queue (``machineconfigcontroller-updatecontroller``) keyed by pool name; Node and MachinePool
events only enqueue (a Node event also marks the node's name for the
:class:`~mcm.machineconfig.ledger.NodeLedger`, the per-pool tally of node phases a pass reads, so
a pass over a pool of thousands of nodes costs what changed since the last one, not the pool's
size).

Guarantees of one pass over a pool:

- **The bound**: a node is unavailable while updating, degraded or not NodeReady
  (:mod:`mcm.machineconfig.nodes`). The pass starts at most ``maxUnavailable - unavailable``
  new nodes, counting nodes unavailable for any reason, so its own writes never take the pool
  above the bound. It decides from the informer cache overlaid with its own writes, and each
  ``desiredConfig`` patch carries the node's ``resourceVersion``: a node that changed since it
  was read is not touched (the pass retries with fresh data).
- Nodes already unavailable (updating to an older config, or degraded) and Ready are moved to
  the newest config at once, since that takes no further node down; NotReady nodes are never
  picked (OpenShift). New candidates are taken in a stable order: by zone label, oldest first,
  then by name (OpenShift's ``sortNodeList``).
- A paused pool, a pool without a rendered config, or a pool whose ``machineSelector`` or
  ``maxUnavailable`` is invalid starts nothing; its status still follows every node change.
- Status (counts and conditions, :mod:`mcm.machineconfig.status`) is written only when it
  changed, a change of counts alone at most every :data:`STATUS_INTERVAL` (the pass requeues
  itself for the rest); Events: ``SetDesiredConfig`` on each targeted node and on the pool, ``Completed``
  when the pool finishes, Warnings for degraded nodes, invalid specs and nodes claimed by two
  pools. A node that joins later is an ``outdated`` node like any other and is brought to the
  current config.

Where the design is silent this follows OpenShift's node controller, except that node events are
handled at once (OpenShift delays every pool sync by 5 s, which would add up on every wave) and
that already-unavailable nodes are retargeted without using capacity.
"""

from __future__ import annotations

from typing import Any

import structlog

from mcm.machineconfig import api
from mcm.machineconfig.base import CONFLICT_RETRY, SubController
from mcm.machineconfig.conditions import condition
from mcm.machineconfig.context import Context, object_of
from mcm.machineconfig.ledger import NodeLedger
from mcm.machineconfig.nodes import desired_config, is_ready, not_schedulable_reason
from mcm.machineconfig.pools import PoolIndex, PoolSpecError, max_unavailable, spec_problem
from mcm.machineconfig.status import PoolCounts, announce_status_change, pool_status
from mcm.runtime.cache import ResourceEventHandlerFuncs
from mcm.runtime.client import Object
from mcm.runtime.client.errors import ApiError, Conflict, ConnectionFailed, NotFound
from mcm.runtime.client.resources import NODES
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING
from mcm.runtime.worker import Result
from mcm.runtime.workqueue import parallelize_until

__all__ = ["UpdateController"]

log = structlog.get_logger(__name__)

STATUS_INTERVAL = 0.5
"""Seconds between status writes that only change machine counts (conditions, the target and
the observed generation are written at once): a wave of 100 nodes is a few writes, not 100."""
COUNT_FIELDS = (
    "machineCount",
    "updatingMachines",
    "readyMachines",
    "unavailableMachines",
    "degradedMachineCount",
)
PATCH_WORKERS = 16
"""Concurrent ``desiredConfig`` patches of one pass (a wave of 100 nodes is not 100 round trips)."""

WATCHED_ANNOTATIONS = (
    api.CURRENT_CONFIG_ANNOTATION,
    api.DESIRED_CONFIG_ANNOTATION,
    api.STATE_ANNOTATION,
    api.REASON_ANNOTATION,
)


def _node_changed(old: Object, new: Object) -> bool:
    """Whether a node update matters to a pool: labels, the daemon's annotations, readiness or
    whether it can take workloads (cordon, disk pressure, network)."""
    if api.labels_of(old) != api.labels_of(new) or is_ready(old) != is_ready(new):
        return True
    if not_schedulable_reason(old) != not_schedulable_reason(new):
        return True
    old_annotations, new_annotations = api.annotations_of(old), api.annotations_of(new)
    return any(old_annotations.get(key) != new_annotations.get(key) for key in WATCHED_ANNOTATIONS)


def _only_counts_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two statuses differ in nothing but the machine counts."""
    return {k: v for k, v in old.items() if k not in COUNT_FIELDS} == {
        k: v for k, v in new.items() if k not in COUNT_FIELDS
    }


def _count_fields(counts: PoolCounts) -> dict[str, int]:
    """The status fields of the counts (:func:`~mcm.machineconfig.status.pool_status`'s names)."""
    return dict(
        zip(
            COUNT_FIELDS,
            (counts.total, counts.updated, counts.ready, counts.unavailable, counts.degraded),
            strict=True,
        )
    )


def _counts_of(status: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(status.get(key) for key in COUNT_FIELDS)


def _condition_inputs(
    pool: Object, counts: PoolCounts, target: str, problem: PoolSpecError | None
) -> tuple[Any, ...]:
    """Everything but the counts that :func:`~mcm.machineconfig.status.pool_status` reads (the
    pool's version covers its spec, generation and old status)."""
    spec_problem_key = None if problem is None else (problem.reason, str(problem))
    return (
        api.meta(pool).get("resourceVersion"),
        target,
        spec_problem_key,
        counts.all_updated,
        counts.degraded_reasons,
        counts.contested,
    )


def _pool_changed(old: Object, new: Object) -> bool:
    """Spec, labels or the rendered target changed (not just the counts this controller writes)."""
    old_meta, new_meta = api.meta(old), api.meta(new)
    return (
        old_meta.get("generation") != new_meta.get("generation")
        or old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp")
        or api.status_of(old).get("currentMachineConfig") != api.status_of(new).get("currentMachineConfig")
        or condition(api.status_of(old).get("conditions"), api.POOL_RENDER_DEGRADED)
        != condition(api.status_of(new).get("conditions"), api.POOL_RENDER_DEGRADED)
    )


class UpdateController(SubController):
    """See the module docstring."""

    name = api.UPDATE_CONTROLLER

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.pools = ctx.cached(api.MACHINE_POOLS)
        self.nodes = ctx.cached(NODES)
        self.synced = ctx.synced(api.MACHINE_POOLS, NODES)
        self._rollouts: dict[str, tuple[str, float | None]] = {}
        """pool → (target, monotonic start, or None once observed complete or never seen busy)."""
        self._degraded_seen: set[str] = set()
        self._status_written: dict[str, float] = {}
        """pool → monotonic time of this process's last status write."""
        self._status_inputs: dict[str, tuple[Any, ...]] = {}
        """pool → :func:`_condition_inputs` of the last status computation."""
        self._index_cache: tuple[tuple[tuple[str, str], ...], PoolIndex] | None = None
        self._conflicts_seen: set[str] = set()
        self.ledger = NodeLedger(self.nodes.get, self.nodes.lister.indexer.list_keys)
        ctx.informers.informer_for(api.MACHINE_POOLS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=lambda _: self._enqueue_all_pools(),
                on_update=self._pool_updated,
                on_delete=self._pool_deleted,
            )
        )
        ctx.informers.informer_for(NODES).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=lambda node: self._node_event(None, node),
                on_update=lambda old, new: self._node_event(old, new, relevant=_node_changed(old, new)),
                on_delete=lambda node: self._node_event(None, node),
            )
        )

    # -- handlers (enqueue only) -----------------------------------------------------------------
    def _pool_updated(self, old: Object, new: Object) -> None:
        """A changed ``machineSelector`` can move nodes between pools: every pool; another change
        that matters: this pool."""
        if api.spec_of(old).get("machineSelector") != api.spec_of(new).get("machineSelector"):
            self._enqueue_all_pools()
        elif _pool_changed(old, new):
            self.enqueue(api.name_of(new))

    def _pool_deleted(self, obj: Any) -> None:
        """Its nodes may now belong to another pool (or to none): every pool, and the deleted one
        (its pass forgets it)."""
        pool = object_of(obj)
        if pool is not None:
            self.enqueue(api.name_of(pool))
        self._enqueue_all_pools()

    def _enqueue_all_pools(self) -> None:
        for pool in self.pools.list():
            self.enqueue(api.name_of(pool))

    def _pool_index(self) -> PoolIndex:
        """The pools with parsed selectors, rebuilt only when a pool's name or selector changed."""
        pools = self.pools.list()
        selectors = tuple(
            sorted((api.name_of(p), repr(api.spec_of(p).get("machineSelector"))) for p in pools)
        )
        cached = self._index_cache
        if cached is None or cached[0] != selectors:
            cached = self._index_cache = (selectors, PoolIndex(pools))
        return cached[1]

    def _node_event(self, old: Any, new: Any, *, relevant: bool = True) -> None:
        """Mark the node for the ledger; enqueue the pools selecting it if the change is
        ``relevant`` to them."""
        nodes = [node for node in (object_of(old), object_of(new)) if node is not None]
        for node in nodes:
            self.ledger.touch(api.name_of(node))
        if not relevant:
            return
        index = self._pool_index()
        for node in nodes:
            for pool in index.selecting(node):
                self.enqueue(api.name_of(pool))

    # -- the pass --------------------------------------------------------------------------------
    def sync(self, key: str) -> Result | None:
        """One pass over pool ``key``: start what the bound allows, then write the status."""
        pool = self.pools.get(key)
        if pool is None:
            self._forget_pool(key)
            return None
        target = str(api.status_of(pool).get("currentMachineConfig") or "")
        self._refresh()
        self.ledger.retarget(key, target)
        problem = spec_problem(pool, self.ledger.size(key))
        retry = False
        if target and problem is None and api.spec_of(pool).get("paused") is not True:
            retry = self._start_updates(pool, target)
        counts = self.ledger.counts(key)
        self._note_degraded_nodes(pool)
        status_due = self._write_status(pool, counts, target, problem)
        if retry:
            return Result.after(CONFLICT_RETRY)
        return None if status_due is None else Result.after(status_due)

    def _refresh(self, names: list[str] | None = None) -> None:
        """Bring the ledger up to date with the touched nodes (and ``names``); warns once about
        nodes claimed by several pools."""
        for entry in self.ledger.refresh(self._pool_index(), names or ()):
            self._warn_conflict(entry.node, entry.contested)

    def _warn_conflict(self, node: Object, why: str) -> None:
        node_name = api.name_of(node)
        if node_name in self._conflicts_seen:
            return
        self._conflicts_seen.add(node_name)
        log.warning("node_in_multiple_pools", node=node_name, reason=why)
        self.recorder.event(node, EVENT_TYPE_WARNING, api.Reason.NODE_IN_MULTIPLE_POOLS, why)

    def _start_updates(self, pool: Object, target: str) -> bool:
        """Set ``desiredConfig`` on the nodes that may start (patched in parallel); returns
        whether some must be retried."""
        name = api.name_of(pool)
        chosen = self.ledger.candidates(name, max_unavailable(pool, self.ledger.size(name)))
        if not chosen:
            return False
        written: list[str] = []
        failures: list[Exception] = []

        def patch(index: int) -> None:
            try:
                updated = self._set_desired(chosen[index], target)
            except (ApiError, ConnectionFailed) as err:
                failures.append(err)
                return
            if updated is not None:
                written.append(api.name_of(updated))

        parallelize_until(None, PATCH_WORKERS, len(chosen), patch)
        self._record_targets(pool, sorted(written), target)
        self._refresh(written)
        if failures:
            raise failures[0]
        return len(written) < len(chosen)

    def _set_desired(self, node: Object, target: str) -> Object | None:
        """Patch the node's ``desiredConfig``, conditioned on the version we decided from;
        ``None`` when the node changed or went away meanwhile."""
        patch = {
            "metadata": {
                "resourceVersion": api.meta(node).get("resourceVersion"),
                "annotations": {api.DESIRED_CONFIG_ANNOTATION: target},
            }
        }
        try:
            updated = self.ctx.client.resource(NODES).patch(api.name_of(node), patch)
        except (Conflict, NotFound) as err:
            log.info("node_changed_before_targeting", node=api.name_of(node), error=err.message)
            return None
        self.nodes.record(updated)
        self.recorder.eventf(
            updated,
            EVENT_TYPE_NORMAL,
            api.Reason.SET_DESIRED_CONFIG,
            "Targeted node to MachineConfig %s",
            target,
        )
        return updated

    def _record_targets(self, pool: Object, targeted: list[str], target: str) -> None:
        if not targeted:
            return
        log.info("nodes_targeted", pool=api.name_of(pool), nodes=len(targeted), config=target)
        if len(targeted) == 1:
            message = f"Targeted node {targeted[0]} to MachineConfig {target}"
        else:
            message = f"Set target for {len(targeted)} nodes to MachineConfig {target}"
        self.recorder.event(pool, EVENT_TYPE_NORMAL, api.Reason.SET_DESIRED_CONFIG, message)

    def _note_degraded_nodes(self, pool: Object) -> None:
        """A Warning Event the first time this process sees a node degraded (and again after it
        recovered and degraded anew)."""
        for node_name in list(self._degraded_seen):
            if not self.ledger.is_degraded(node_name):
                self._degraded_seen.discard(node_name)
        for node in self.ledger.degraded(api.name_of(pool)):
            node_name = api.name_of(node)
            if node_name in self._degraded_seen:
                continue
            self._degraded_seen.add(node_name)
            reason = api.annotations_of(node).get(api.REASON_ANNOTATION) or "no reason given"
            message = f"Node {node_name} cannot apply MachineConfig {desired_config(node)}: {reason}"
            log.warning("node_degraded", pool=api.name_of(pool), node=node_name, reason=reason)
            self.recorder.event(node, EVENT_TYPE_WARNING, api.Reason.NODE_DEGRADED, message)
            self.recorder.event(pool, EVENT_TYPE_WARNING, api.Reason.NODE_DEGRADED, message)

    # -- status ----------------------------------------------------------------------------------
    def _write_status(
        self, pool: Object, counts: PoolCounts, target: str, problem: PoolSpecError | None
    ) -> float | None:
        """Write the pool's status if it changed; a change of counts alone waits until
        :data:`STATUS_INTERVAL` has passed since the last write (returns the seconds left)."""
        name = api.name_of(pool)
        old = api.status_of(pool)
        paused = api.spec_of(pool).get("paused") is True
        if self.ctx.metrics is not None:
            self.ctx.metrics.set_pool(name, counts.as_metrics(), paused)
        self._track_rollout(name, target, counts)
        wait = STATUS_INTERVAL - self.ctx.clock.since(self._status_written.get(name, -STATUS_INTERVAL))
        inputs = _condition_inputs(pool, counts, target, problem)
        if wait > 0 and self._status_inputs.get(name) == inputs:
            # Same pool version and the same inputs to the conditions as the last computation,
            # which wrote nothing: the new status can differ from the old in the counts alone.
            return None if _counts_of(old) == _counts_of(_count_fields(counts)) else wait
        new_status = pool_status(pool, counts, target, problem, self.ctx.clock)
        if new_status == old:
            self._status_inputs[name] = inputs
            return None
        if wait > 0 and _only_counts_changed(old, new_status):
            self._status_inputs[name] = inputs
            return wait
        self._status_inputs.pop(name, None)  # a failed write must not be taken for "nothing new"
        body = {**pool, "status": new_status}
        written = self.pools.record(self.ctx.client.resource(api.MACHINE_POOLS).update_status(body))
        self._status_written[name] = self.ctx.clock.monotonic()
        announce_status_change(self.recorder, written, old, new_status, problem)
        return None

    def _track_rollout(self, pool: str, target: str, counts: PoolCounts) -> None:
        """Observe the rollout duration from the first pass that saw ``target`` with work to do."""
        if not target:
            return
        known, started = self._rollouts.get(pool, ("", None))
        if known != target:
            started = None if counts.all_updated else self.ctx.clock.monotonic()
            self._rollouts[pool] = (target, started)
            return
        if started is not None and counts.all_updated:
            if self.ctx.metrics is not None:
                self.ctx.metrics.observe_rollout(pool, self.ctx.clock.since(started))
            self._rollouts[pool] = (target, None)

    def _forget_pool(self, pool: str) -> None:
        self._rollouts.pop(pool, None)
        self._status_inputs.pop(pool, None)
        self.ledger.forget_pool(pool)
        if self.ctx.metrics is not None:
            self.ctx.metrics.forget_pool(pool)

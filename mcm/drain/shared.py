"""One drain's state, and the calls its parallel and serial paths both make.

:class:`DrainRun` is built once per drain by :func:`~mcm.drain.drain.run_drain` and handed to
:mod:`~mcm.drain.parallel` (pods without PVs) and :mod:`~mcm.drain.serial` (pods with PVs); neither
path imports the other or the top level, so the modules form no cycle. What they share:

- the clients, listers, options, clock, stop event and the drain-wide :class:`Deadline`;
- the :class:`Tally` of per-pod outcomes (the only state both paths write, under its lock);
- :meth:`DrainRun.act` (one evict or delete call), :meth:`DrainRun.refused_by_pdb` (a 429 and
  the misconfigured-PDB rule, one ``DrainBlockedByPDB`` Event per PDB and drain) and
  :meth:`DrainRun.wait_for_termination` (until each removed pod is gone or its wait is over).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import structlog

from mcm.drain.pods import blocking_pdb, is_misconfigured
from mcm.drain.state import (
    API_ERRORS,
    LEFT_DEADLINE,
    LEFT_NODE_GONE,
    LEFT_STOPPED,
    POD_POLL_INTERVAL,
    REASON_DRAIN_BLOCKED,
    TERMINATION_BUFFER,
    Deadline,
    Removed,
    Tally,
)
from mcm.drain.types import DrainListers, DrainOptions
from mcm.drain.volumes import VolumeAttachmentHub
from mcm.driver import Driver
from mcm.runtime.cache import object_key
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import NotFound, TooManyRequests
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.client.rest import delete_options
from mcm.runtime.clock import Clock
from mcm.runtime.objects import Obj
from mcm.runtime.record import EventRecorder
from mcm.runtime.workqueue import parallelize_until

__all__ = ["DrainRun"]

log = structlog.get_logger(__name__)


@dataclass
class DrainRun:
    """One drain of ``node``: used by one thread, plus the serial path's thread and the parallel
    workers, which write only ``tally`` (and ``blocked_pdbs`` under ``tally.lock``)."""

    client: ClusterClient
    listers: DrainListers
    driver: Driver
    node: str
    options: DrainOptions
    clock: Clock
    stop: threading.Event
    hub: VolumeAttachmentHub | None = None
    recorder: EventRecorder | None = None
    machine_ref: Obj | None = None
    evict_supported: bool = False
    tally: Tally = field(default_factory=Tally)
    blocked_pdbs: set[str] = field(default_factory=set)
    warnings: tuple[str, ...] = ()
    """Pod-filter warnings of the selection."""
    skipped: tuple[str, ...] = ()
    """Pods not drained on purpose (mirror and DaemonSet pods)."""

    def __post_init__(self) -> None:
        self.pods_api = self.client.resource(PODS)
        self.nodes_api = self.client.resource(NODES)
        self.started = self.clock.monotonic()
        self.deadline = Deadline(self.clock, self.stop, self.options.timeout)

    def event(self, event_type: str, reason: str, message: str) -> None:
        if self.recorder is not None and self.machine_ref is not None:
            self.recorder.event(self.machine_ref, event_type, reason, message)

    # -- one evict or delete call -----------------------------------------------------------------
    def act(self, pod: Obj, evict: bool) -> str:
        """Evict or delete the pod; return the action name (API errors propagate)."""
        meta = pod["metadata"]
        name, namespace = str(meta["name"]), str(meta.get("namespace", ""))
        if evict:
            grace = self.options.grace_period
            body = delete_options(grace_period_seconds=grace) if grace is not None and grace >= 0 else None
            log.debug("evicting_pod", pod=object_key(pod), node=self.node)
            self.pods_api.evict(name, namespace, body)
            return "evicted"
        log.debug("force_deleting_pod", pod=object_key(pod), node=self.node)
        self.pods_api.delete(name, namespace=namespace, grace_period_seconds=0)
        return "deleted"

    def refused_by_pdb(self, pod: Obj, err: TooManyRequests) -> str | None:
        """Log a 429; return the misconfigured-PDB error if the pod can never be evicted."""
        pdb = blocking_pdb(pod, self.listers.pdbs)
        pdb_name = object_key(pdb) if pdb is not None else None
        disrupted = sorted(((pdb or {}).get("status") or {}).get("disruptedPods") or {})
        log.info(
            "pod_eviction_refused_will_retry",
            pod=object_key(pod),
            node=self.node,
            pdb=pdb_name,
            disrupted_pods=disrupted,
            error=str(err),
        )
        if pdb is None:
            return None
        with self.tally.lock:
            first = pdb_name not in self.blocked_pdbs
            self.blocked_pdbs.add(str(pdb_name))
        if first:
            self.event(
                "Warning",
                REASON_DRAIN_BLOCKED,
                f"Eviction of pod {object_key(pod)} from node {self.node!r} blocked by "
                f"PodDisruptionBudget {pdb_name}",
            )
        if not is_misconfigured(pdb):
            return None
        return (
            f'error while evicting pod "{pod["metadata"]["name"]}": pod disruption budget {pdb_name} '
            "is misconfigured and requires zero voluntary evictions"
        )

    # -- waiting for removed pods to terminate ----------------------------------------------------
    def termination_deadline(self, pod: Obj) -> float:
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0
        wait = min(float(grace), self.options.timeout) + TERMINATION_BUFFER
        return min(self.clock.monotonic() + wait, self.deadline.at)

    def wait_for_termination(self, waiting: list[Removed]) -> None:
        """Wait until each pod is gone or its wait is over: woken by the pod informer's delete
        events when there are any (a pod gone from the cache is gone), and asking the API server
        at once, every 5 s and when a pod's wait runs out (without the events, exactly
        upstream's 5 s poll)."""
        deletions = self.listers.pod_deletions
        woken = deletions.watch(self.stop) if deletions is not None else None
        try:
            self._wait_for_termination(waiting, woken)
        finally:
            if deletions is not None and woken is not None:
                deletions.unwatch(woken)

    def _wait_for_termination(self, waiting: list[Removed], woken: threading.Event | None) -> None:
        next_poll = self.clock.monotonic()
        while waiting:
            if woken is not None:
                woken.clear()
            polled = woken is None or self.clock.monotonic() >= min(next_poll, *(i.until for i in waiting))
            if polled:  # every 5 s, and before any pod's wait is declared over
                waiting = self._poll_terminations(waiting)
                next_poll = self.clock.monotonic() + POD_POLL_INTERVAL
            else:
                waiting = self._cached_terminations(waiting)
            if waiting and self.stop.is_set():
                for item in waiting:
                    self.tally.record(item.pod, "left", LEFT_STOPPED)
                return
            if waiting and polled and self.node_missing():
                for item in waiting:
                    self.tally.record(item.pod, "left", LEFT_NODE_GONE)
                return
            if waiting:
                until = min(next_poll, *(item.until for item in waiting))
                self.clock.wait(
                    woken if woken is not None else self.stop, max(0.0, until - self.clock.monotonic())
                )

    def _poll_terminations(self, waiting: list[Removed]) -> list[Removed]:
        still: list[Removed | None] = [None] * len(waiting)

        def check(i: int) -> None:
            item = waiting[i]
            try:
                gone = self.is_gone(item.pod)
            except API_ERRORS as err:
                name = item.pod["metadata"]["name"]
                error = f'error when waiting for pod "{name}"/{self.node} terminating: {err}'
                self.tally.record(item.pod, "left", str(err), error)
                return
            still[i] = self._settle(item, gone)

        parallelize_until(None, max(self.options.max_parallel_evictions, 1), len(waiting), check)
        return [item for item in still if item is not None]

    def _cached_terminations(self, waiting: list[Removed]) -> list[Removed]:
        """Settle the pods the informer has seen go (no API call)."""
        still = [self._settle(item, self._gone_from_cache(item.pod)) for item in waiting]
        return [item for item in still if item is not None]

    def _settle(self, item: Removed, gone: bool) -> Removed | None:
        """Record a gone or timed-out pod; return the item if it is still awaited."""
        if gone:
            self.tally.record(item.pod, item.action)
            return None
        if self.clock.monotonic() >= item.until:
            self._termination_timed_out(item)
            return None
        return item

    def _gone_from_cache(self, pod: Obj) -> bool:
        meta = pod["metadata"]
        try:
            cached = self.listers.pods.namespaced(str(meta.get("namespace", ""))).get(str(meta["name"]))
        except NotFound:
            return True
        return bool((cached.get("metadata") or {}).get("uid") != meta.get("uid"))

    def _termination_timed_out(self, item: Removed) -> None:
        if self.clock.monotonic() >= self.deadline.at:
            self.tally.record(item.pod, "left", LEFT_DEADLINE)
            return
        error = (
            f'error when waiting for pod "{item.pod["metadata"]["name"]}"/{self.node} terminating: '
            "timed out waiting for the condition"
        )
        self.tally.record(item.pod, "left", "timed out waiting for termination", error)

    def is_gone(self, pod: Obj) -> bool:
        """The pod is NotFound, or replaced by one with another UID (API errors propagate)."""
        meta = pod["metadata"]
        try:
            current = self.pods_api.get(str(meta["name"]), namespace=str(meta.get("namespace", "")))
        except NotFound:
            return True
        return bool((current.get("metadata") or {}).get("uid") != meta.get("uid"))

    def node_missing(self) -> bool:
        """The Node is NotFound (recorded as ``tally.node_gone``); an API error counts as present."""
        try:
            self.nodes_api.get(self.node)
        except NotFound:
            self.mark_node_gone()
            return True
        except API_ERRORS:
            return False
        return False

    def mark_node_gone(self) -> None:
        log.info("drain_node_not_found", node=self.node)
        with self.tally.lock:
            self.tally.node_gone = True

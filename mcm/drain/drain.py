"""The node drain (§5 at HEAD, with the §5.13 bugs fixed): :func:`drain_node`.

Guarantees:

- One deadline for the whole drain (``options.timeout`` from the start): every eviction retry,
  termination, detach and reattach wait ends by it, and every wait also ends promptly when
  ``stop`` is set. ``max_evict_retries <= 0`` means "delete at once" and cannot hang.
- Every selected pod gets exactly one outcome: evicted, deleted, already gone, or left behind
  with a reason. A pod left behind is never counted as drained (§5.13 bug 6); a drain that
  leaves pods behind fails, except when the node itself disappeared (``node_gone``).
- Pods without PVs are handled in parallel (at most ``max_parallel_evictions`` API calls at
  once), pods with PVs one by one in descending priority (a missing priority counts as 0), each
  waiting for its volumes to detach from the node and then to reattach elsewhere.
- Force mode deletes every pod with grace period 0 and waits for nothing.
- A PDB-refused eviction (429) is retried every 20 s; a "misconfigured" PDB (HEAD rule) fails
  that pod at once; after ``max_evict_retries`` refusals the pod is deleted, bypassing the PDB.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import structlog

from mcm.drain.metrics import DrainMetrics
from mcm.drain.pods import blocking_pdb, is_misconfigured, pod_key, select_pods
from mcm.drain.serial import SerialPass, priority
from mcm.drain.state import (
    API_ERRORS,
    EVICTION_RETRY_INTERVAL,
    LEFT_DEADLINE,
    LEFT_NODE_GONE,
    LEFT_STOPPED,
    POD_POLL_INTERVAL,
    REASON_DRAIN_BLOCKED,
    REASON_DRAIN_FAILED,
    REASON_DRAIN_STARTED,
    REASON_DRAIN_SUCCEEDED,
    TERMINATION_BUFFER,
    Deadline,
    Obj,
    Removed,
    Tally,
    aggregate,
)
from mcm.drain.types import DrainListers, DrainOptions, DrainResult
from mcm.drain.volumes import VolumeAttachmentHub, pod_volumes, uses_pvc
from mcm.driver import Driver
from mcm.runtime.cache.shared_informer import wait_for_cache_sync
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import NotFound, TooManyRequests
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.client.rest import delete_options
from mcm.runtime.clock import Clock
from mcm.runtime.record import EventRecorder
from mcm.runtime.workqueue import parallelize_until

__all__ = ["Drain", "drain_node"]

log = structlog.get_logger(__name__)


def drain_node(
    client: ClusterClient,
    listers: DrainListers,
    driver: Driver,
    node_name: str,
    options: DrainOptions,
    *,
    clock: Clock,
    stop: threading.Event,
    hub: VolumeAttachmentHub | None = None,
    recorder: EventRecorder | None = None,
    machine_ref: Obj | None = None,
    metrics: DrainMetrics | None = None,
) -> DrainResult:
    """Evict or delete the pods of ``node_name`` (cordon it first with :func:`cordon_node`).

    ``hub`` (the VolumeAttachment fan-out) makes detach/reattach waits event driven; without it
    detach is polled and the reattach wait lasts ``pv_reattach_timeout``, as upstream. Events go
    to ``machine_ref`` through ``recorder`` when both are given. Never raises for API errors.
    """
    drain = Drain(
        client,
        listers,
        driver,
        node_name,
        options,
        clock=clock,
        stop=stop,
        hub=hub,
        recorder=recorder,
        machine_ref=machine_ref,
    )
    result = drain.run()
    if metrics is not None:
        metrics.observe(result)
    return result


class Drain:
    """One drain run: selection, the parallel path for pods without PVs, and the calls and waits
    :class:`~mcm.drain.serial.SerialPass` shares for pods with PVs. Used once, by one thread
    (plus the serial path's thread and the parallel workers, which only touch ``tally``)."""

    def __init__(
        self,
        client: ClusterClient,
        listers: DrainListers,
        driver: Driver,
        node: str,
        options: DrainOptions,
        *,
        clock: Clock,
        stop: threading.Event,
        hub: VolumeAttachmentHub | None,
        recorder: EventRecorder | None,
        machine_ref: Obj | None,
    ) -> None:
        self.client = client
        self.pods_api = client.resource(PODS)
        self.nodes_api = client.resource(NODES)
        self.listers = listers
        self.driver = driver
        self.node = node
        self.options = options
        self.clock = clock
        self.stop = stop
        self.hub = hub
        self.recorder = recorder
        self.machine_ref = machine_ref
        self.started = clock.monotonic()
        self.deadline = Deadline(clock, stop, options.timeout)
        self.tally = Tally()
        self.evict_supported = False
        self.warnings: tuple[str, ...] = ()
        self.skipped: tuple[str, ...] = ()
        self._blocked_pdbs: set[str] = set()

    # -- top level ------------------------------------------------------------------------------
    def run(self) -> DrainResult:
        log.info("Machine drain started", node=self.node, force=self.options.force)
        self._event("Normal", REASON_DRAIN_STARTED, f"Drain of node {self.node!r} started")
        error = self._drain()
        result = self._result(error)
        log.info(
            "Machine drain ended",
            node=self.node,
            took=round(result.duration, 3),
            evicted=len(result.evicted),
            deleted=len(result.deleted),
            left_behind=[p.key for p in result.left_behind],
            error=result.error,
        )
        if result.ok:
            self._event("Normal", REASON_DRAIN_SUCCEEDED, f"Drain of node {self.node!r} successful")
        else:
            self._event("Warning", REASON_DRAIN_FAILED, f"Drain of node {self.node!r} failed: {result.error}")
        return result

    def _drain(self) -> str | None:
        """Run the drain; return an error that happened before any pod was handled."""
        synced = self.listers.pods_synced
        if synced is not None and not wait_for_cache_sync(
            self.stop, synced, timeout=self.deadline.remaining()
        ):
            return "timed out waiting for pod cache to sync"
        selection = select_pods(self.listers.pods.list(), self.node, self.options)
        self.warnings, self.skipped = tuple(selection.warning_lines()), tuple(selection.skipped)
        if self.warnings:
            log.warning("drain_pod_filter_warnings", node=self.node, warnings=list(self.warnings))
        fatal = selection.error()
        if fatal:
            return fatal
        if not selection.pods:
            log.info("no pods found in store", node=self.node)
            return None
        if not self.options.force:
            try:
                self.evict_supported = self._eviction_supported()
            except API_ERRORS as err:
                return f"error discovering eviction support: {err}"
        self._remove(selection.pods)
        return None

    def _eviction_supported(self) -> bool:
        discovery = self.client.discovery()
        if not discovery.preferred_version("policy"):
            return False
        return discovery.has_resource("v1", "pods/eviction", "Eviction")

    def _remove(self, pods: list[Obj]) -> None:
        if self.options.force:
            log.info("Forceful eviction of pods on the node", node=self.node)
            self._remove_in_parallel(pods)
            return
        log.info("Normal eviction of pods on the node", node=self.node)
        with_pv = [p for p in pods if uses_pvc(p)]
        without_pv = [p for p in pods if not uses_pvc(p)]
        serial = threading.Thread(
            target=self._remove_serially, args=(with_pv,), name=f"drain-pv-{self.node}", daemon=True
        )
        if with_pv:
            serial.start()
        self._remove_in_parallel(without_pv)
        if with_pv:
            serial.join()

    def _result(self, error: str | None) -> DrainResult:
        errors = list(self.tally.errors) + ([error] if error else [])
        left = self.tally.left()
        timed_out = any(p.reason == LEFT_DEADLINE for p in left)
        unexplained = [p for p in left if p.reason in (LEFT_DEADLINE, LEFT_STOPPED)]
        if unexplained:
            keys = ", ".join(p.key for p in unexplained)
            errors.append(f"{unexplained[0].reason} for node {self.node!r}; pods left: {keys}")
        return DrainResult(
            node=self.node,
            duration=self.clock.since(self.started),
            evicted=self.tally.of("evicted"),
            deleted=self.tally.of("deleted"),
            gone=self.tally.of("gone"),
            left_behind=left,
            warnings=self.warnings,
            error=aggregate(errors),
            timed_out=timed_out,
            node_gone=self.tally.node_gone,
            forced=self.options.force,
            skipped=self.skipped,
        )

    def _event(self, event_type: str, reason: str, message: str) -> None:
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
            log.debug("Attempting to evict the pod", pod=pod_key(pod), node=self.node)
            self.pods_api.evict(name, namespace, body)
            return "evicted"
        log.debug("Attempting to force-delete the pod", pod=pod_key(pod), node=self.node)
        self.pods_api.delete(name, namespace=namespace, grace_period_seconds=0)
        return "deleted"

    def refused_by_pdb(self, pod: Obj, err: TooManyRequests) -> str | None:
        """Log a 429; return the misconfigured-PDB error if the pod can never be evicted."""
        pdb = blocking_pdb(pod, self.listers.pdbs)
        pdb_name = pod_key(pdb) if pdb is not None else None
        disrupted = sorted(((pdb or {}).get("status") or {}).get("disruptedPods") or {})
        log.info(
            "Pod couldn't be evicted from node. This may also occur due to PDB violation. Will be retried.",
            pod=pod_key(pod),
            node=self.node,
            pdb=pdb_name,
            disrupted_pods=disrupted,
            error=str(err),
        )
        if pdb is None:
            return None
        with self.tally.lock:
            first = pdb_name not in self._blocked_pdbs
            self._blocked_pdbs.add(str(pdb_name))
        if first:
            self._event(
                "Warning",
                REASON_DRAIN_BLOCKED,
                f"Eviction of pod {pod_key(pod)} from node {self.node!r} blocked by "
                f"PodDisruptionBudget {pdb_name}",
            )
        if not is_misconfigured(pdb):
            return None
        return (
            f'error while evicting pod "{pod["metadata"]["name"]}": pod disruption budget {pdb_name} '
            "is misconfigured and requires zero voluntary evictions"
        )

    # -- pods without PV (parallel) ---------------------------------------------------------------
    def _remove_in_parallel(self, pods: Sequence[Obj]) -> None:
        removed: list[Removed | None] = [None] * len(pods)

        def remove(i: int) -> None:
            removed[i] = self._evict_with_retries(pods[i])

        parallelize_until(None, max(self.options.max_parallel_evictions, 1), len(pods), remove)
        waiting = [r for r in removed if r is not None]
        if self.options.force:
            for item in waiting:
                self.tally.record(item.pod, item.action)
            return
        self.wait_for_termination(waiting)

    def _evict_with_retries(self, pod: Obj) -> Removed | None:
        """Evict (retrying PDB refusals) or delete one pod; None once its outcome is recorded."""
        attempt = 0
        while True:
            if self.deadline.over():
                self.tally.record(pod, "left", self.deadline.reason())
                return None
            evict = self.evict_supported and attempt < self.options.max_evict_retries
            attempt += 1
            try:
                action = self.act(pod, evict)
            except NotFound:
                self.tally.record(pod, "gone")
                return None
            except TooManyRequests as err:
                if not evict:
                    self._failed(pod, evict, err)
                    return None
                pdb_error = self.refused_by_pdb(pod, err)
                if pdb_error is not None:
                    self.tally.record(pod, "left", "misconfigured PodDisruptionBudget", pdb_error)
                    return None
                self.deadline.sleep(EVICTION_RETRY_INTERVAL)
                continue
            except API_ERRORS as err:
                self._failed(pod, evict, err)
                return None
            return Removed(pod, action, self.termination_deadline(pod))

    def _failed(self, pod: Obj, evict: bool, err: Exception) -> None:
        verb = "evicting" if evict else "deleting"
        error = f'error when {verb} pod "{pod["metadata"]["name"]}": {err} scheduled on node {self.node}'
        log.error("drain_pod_failed", pod=pod_key(pod), node=self.node, error=str(err))
        self.tally.record(pod, "left", str(err), error)

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
            if waiting and polled and self._node_missing():
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
        meta = pod["metadata"]
        try:
            current = self.pods_api.get(str(meta["name"]), namespace=str(meta.get("namespace", "")))
        except NotFound:
            return True
        return bool((current.get("metadata") or {}).get("uid") != meta.get("uid"))

    def _node_missing(self) -> bool:
        try:
            self.nodes_api.get(self.node)
        except NotFound:
            log.info("Node not found anymore", node=self.node)
            with self.tally.lock:
                self.tally.node_gone = True
            return True
        except API_ERRORS:
            return False
        return False

    # -- pods with PV (serial) --------------------------------------------------------------------
    def _remove_serially(self, pods: list[Obj]) -> None:
        ordered = sorted(pods, key=priority, reverse=True)
        try:
            volumes = pod_volumes(
                ordered,
                self.listers.pvcs,
                self.listers.pvs,
                self.driver,
                clock=self.clock,
                deadline=self.deadline.at,
            )
            SerialPass(self, volumes).run(ordered)
        except Exception as err:
            log.exception("drain_pv_path_failed", node=self.node)
            for pod in ordered:
                with self.tally.lock:
                    known = pod_key(pod) in self.tally.outcomes
                if not known:
                    self.tally.record(pod, "left", str(err), f"error draining pod {pod_key(pod)}: {err}")

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from mcm.drain.metrics import DrainMetrics
from mcm.drain.pods import blocking_pdb, is_misconfigured, pod_key, select_pods
from mcm.drain.types import DrainListers, DrainOptions, DrainResult, PodOutcome
from mcm.drain.volumes import (
    TrackedVolume,
    VolumeAttachmentHub,
    VolumeWatch,
    is_attached,
    pod_volumes,
    uses_pvc,
)
from mcm.driver import Driver
from mcm.runtime.cache.shared_informer import wait_for_cache_sync
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound, TooManyRequests
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.client.rest import delete_options
from mcm.runtime.clock import Clock
from mcm.runtime.record import EventRecorder
from mcm.runtime.workqueue import parallelize_until

__all__ = [
    "EVICTION_RETRY_INTERVAL",
    "POD_POLL_INTERVAL",
    "REASON_DRAIN_BLOCKED",
    "REASON_DRAIN_FAILED",
    "REASON_DRAIN_STARTED",
    "REASON_DRAIN_SUCCEEDED",
    "drain_node",
]

log = structlog.get_logger(__name__)

Obj = Mapping[str, Any]
API_ERRORS = (ApiError, ConnectionFailed)

EVICTION_RETRY_INTERVAL = 20.0
"""``PodEvictionRetryInterval``: pause after a PDB refused an eviction."""
POD_POLL_INTERVAL = 5.0
"""``Interval`` / ``VolumeDetachPollInterval``: re-check period for termination and detach."""
TERMINATION_BUFFER = 30.0
"""Added to the (capped) grace period to bound the wait for a pod to terminate."""
DETACH_TIMEOUT_TEXT = "timeout while waiting for PVs to detach from node"
REATTACH_TIMEOUT_TEXT = "Timeout occurred while waiting for PV to reattach to a different node"
LEFT_DEADLINE = "drain deadline exceeded"
LEFT_STOPPED = "drain stopped"
LEFT_NODE_GONE = "node not found"

REASON_DRAIN_STARTED = "DrainStarted"
REASON_DRAIN_BLOCKED = "DrainBlockedByPDB"
REASON_DRAIN_SUCCEEDED = "DrainSucceeded"
REASON_DRAIN_FAILED = "DrainFailed"


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
    drain = _Drain(
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


class _Deadline:
    """The drain-wide deadline on ``clock``, and interruptible waits bounded by it."""

    def __init__(self, clock: Clock, stop: threading.Event, seconds: float) -> None:
        self.clock = clock
        self.stop = stop
        self.at = clock.monotonic() + max(seconds, 0.0)

    def remaining(self) -> float:
        return max(0.0, self.at - self.clock.monotonic())

    def over(self) -> bool:
        return self.stop.is_set() or self.remaining() <= 0

    def reason(self) -> str:
        return LEFT_STOPPED if self.stop.is_set() else LEFT_DEADLINE

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` (bounded by the deadline) or until ``stop``; False once over."""
        wait = min(seconds, self.remaining())
        if wait > 0:
            self.clock.wait(self.stop, wait)
        return not self.over()


@dataclass
class _Tally:
    """Outcomes of all pods; shared by the parallel and the serial path."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    node_gone: bool = False

    def record(self, pod: Obj, action: str, reason: str = "", error: str | None = None) -> None:
        meta = pod["metadata"]
        outcome = PodOutcome(str(meta.get("namespace", "")), str(meta.get("name", "")), action, reason)
        with self.lock:
            self.outcomes[outcome.key] = outcome
            if error:
                self.errors.append(error)

    def of(self, action: str) -> tuple[str, ...]:
        with self.lock:
            return tuple(o.key for o in self.outcomes.values() if o.action == action)

    def left(self) -> tuple[PodOutcome, ...]:
        with self.lock:
            return tuple(o for o in self.outcomes.values() if o.action == "left")


@dataclass
class _Removed:
    """A pod whose evict/delete call succeeded and that has yet to terminate."""

    pod: Obj
    action: str
    until: float


class _Drain:
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
        self.deadline = _Deadline(clock, stop, options.timeout)
        self.tally = _Tally()
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
    def _act(self, pod: Obj, evict: bool) -> str:
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

    def _refused_by_pdb(self, pod: Obj, err: TooManyRequests) -> str | None:
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
        removed: list[_Removed | None] = [None] * len(pods)

        def remove(i: int) -> None:
            removed[i] = self._evict_with_retries(pods[i])

        parallelize_until(None, max(self.options.max_parallel_evictions, 1), len(pods), remove)
        waiting = [r for r in removed if r is not None]
        if self.options.force:
            for item in waiting:
                self.tally.record(item.pod, item.action)
            return
        self._wait_for_termination(waiting)

    def _evict_with_retries(self, pod: Obj) -> _Removed | None:
        """Evict (retrying PDB refusals) or delete one pod; None once its outcome is recorded."""
        attempt = 0
        while True:
            if self.deadline.over():
                self.tally.record(pod, "left", self.deadline.reason())
                return None
            evict = self.evict_supported and attempt < self.options.max_evict_retries
            attempt += 1
            try:
                action = self._act(pod, evict)
            except NotFound:
                self.tally.record(pod, "gone")
                return None
            except TooManyRequests as err:
                if not evict:
                    self._failed(pod, evict, err)
                    return None
                pdb_error = self._refused_by_pdb(pod, err)
                if pdb_error is not None:
                    self.tally.record(pod, "left", "misconfigured PodDisruptionBudget", pdb_error)
                    return None
                self.deadline.sleep(EVICTION_RETRY_INTERVAL)
                continue
            except API_ERRORS as err:
                self._failed(pod, evict, err)
                return None
            return _Removed(pod, action, self._termination_deadline(pod))

    def _failed(self, pod: Obj, evict: bool, err: Exception) -> None:
        verb = "evicting" if evict else "deleting"
        error = f'error when {verb} pod "{pod["metadata"]["name"]}": {err} scheduled on node {self.node}'
        log.error("drain_pod_failed", pod=pod_key(pod), node=self.node, error=str(err))
        self.tally.record(pod, "left", str(err), error)

    def _termination_deadline(self, pod: Obj) -> float:
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0
        wait = min(float(grace), self.options.timeout) + TERMINATION_BUFFER
        return min(self.clock.monotonic() + wait, self.deadline.at)

    def _wait_for_termination(self, waiting: list[_Removed]) -> None:
        """Poll (at once, then every 5 s) until each pod is gone or its wait is over."""
        first = True
        while waiting:
            if not first:
                earliest = min(item.until for item in waiting)
                self.clock.wait(
                    self.stop, max(0.0, min(POD_POLL_INTERVAL, earliest - self.clock.monotonic()))
                )
            first = False
            waiting = self._poll_terminations(waiting)
            if waiting and self.stop.is_set():
                for item in waiting:
                    self.tally.record(item.pod, "left", LEFT_STOPPED)
                return
            if waiting and self._node_missing():
                for item in waiting:
                    self.tally.record(item.pod, "left", LEFT_NODE_GONE)
                return

    def _poll_terminations(self, waiting: list[_Removed]) -> list[_Removed]:
        still: list[_Removed | None] = [None] * len(waiting)

        def check(i: int) -> None:
            item = waiting[i]
            try:
                gone = self._is_gone(item.pod)
            except API_ERRORS as err:
                name = item.pod["metadata"]["name"]
                error = f'error when waiting for pod "{name}"/{self.node} terminating: {err}'
                self.tally.record(item.pod, "left", str(err), error)
                return
            if gone:
                self.tally.record(item.pod, item.action)
            elif self.clock.monotonic() >= item.until:
                self._termination_timed_out(item)
            else:
                still[i] = item

        parallelize_until(None, max(self.options.max_parallel_evictions, 1), len(waiting), check)
        return [item for item in still if item is not None]

    def _termination_timed_out(self, item: _Removed) -> None:
        if self.clock.monotonic() >= self.deadline.at:
            self.tally.record(item.pod, "left", LEFT_DEADLINE)
            return
        error = (
            f'error when waiting for pod "{item.pod["metadata"]["name"]}"/{self.node} terminating: '
            "timed out waiting for the condition"
        )
        self.tally.record(item.pod, "left", "timed out waiting for termination", error)

    def _is_gone(self, pod: Obj) -> bool:
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
        ordered = sorted(pods, key=_priority, reverse=True)
        try:
            volumes = pod_volumes(
                ordered,
                self.listers.pvcs,
                self.listers.pvs,
                self.driver,
                clock=self.clock,
                deadline=self.deadline.at,
            )
            _SerialPass(self, volumes).run(ordered)
        except Exception as err:
            log.exception("drain_pv_path_failed", node=self.node)
            for pod in ordered:
                with self.tally.lock:
                    known = pod_key(pod) in self.tally.outcomes
                if not known:
                    self.tally.record(pod, "left", str(err), f"error draining pod {pod_key(pod)}: {err}")


def _priority(pod: Obj) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) else 0


class _SerialPass:
    """The PV pods, one at a time: passes of evictions, then one delete pass (§5.8, HEAD)."""

    def __init__(self, drain: _Drain, volumes: dict[str, list[TrackedVolume]]) -> None:
        self.d = drain
        self.volumes = volumes
        self.halted: str | None = None
        self.last_action: dict[str, str] = {}

    def run(self, pods: list[Obj]) -> None:
        pending = pods
        passes = self.d.options.max_evict_retries if self.d.evict_supported else 0
        for number in range(max(passes, 0)):
            if number > 0:
                log.debug("Eviction/deletion for some pods will be retried after 20s", node=self.d.node)
                if not self.d.deadline.sleep(EVICTION_RETRY_INTERVAL):
                    self.halted = self.d.deadline.reason()
            pending = self._recheck(self._one_pass(pending, evict=True))
            if not pending or self.halted:
                break
        if pending and not self.halted:
            pending = self._recheck(self._one_pass(pending, evict=False))
        for pod in pending:
            if self.halted:
                self.d.tally.record(pod, "left", self.halted)
                continue
            verb = "evicting" if self.last_action.get(pod_key(pod)) == "evicted" else "deleting"
            error = f'error {verb} pod {pod_key(pod)} from node "{self.d.node}"'
            self.d.tally.record(pod, "left", "could not be evicted or deleted", error)

    def _one_pass(self, pods: list[Obj], *, evict: bool) -> list[Obj]:
        retry: list[Obj] = []
        for pod in pods:
            if self.halted is None and self.d.deadline.over():
                self.halted = self.d.deadline.reason()
            if self.halted is not None:
                retry.append(pod)
                continue
            if self._handle(pod, evict):
                retry.append(pod)
        return retry

    def _handle(self, pod: Obj, evict: bool) -> bool:
        """Remove one PV pod and wait for its volumes; True if it must be retried."""
        tracked = self.volumes.get(pod_key(pod), [])
        hub = self.d.hub
        watch = hub.watch(self.d.node, [v.pv_name for v in tracked], self.d.stop) if hub and tracked else None
        try:
            return self._remove_and_wait(pod, evict, tracked, watch)
        finally:
            if watch is not None and self.d.hub is not None:
                self.d.hub.unwatch(watch)

    def _remove_and_wait(
        self, pod: Obj, evict: bool, tracked: list[TrackedVolume], watch: VolumeWatch | None
    ) -> bool:
        key = pod_key(pod)
        self.last_action[key] = "evicted" if evict else "deleted"
        started = self.d.clock.monotonic()
        try:
            action = self.d._act(pod, evict)
        except NotFound:
            self.d.tally.record(pod, "gone")
            return False
        except TooManyRequests as err:
            if evict:
                pdb_error = self.d._refused_by_pdb(pod, err)
                if pdb_error is not None:
                    self.d.tally.record(pod, "left", "misconfigured PodDisruptionBudget", pdb_error)
                    return False
            return True
        except API_ERRORS as err:
            log.debug("Error when evicting pod. Will be retried", pod=key, node=self.d.node, error=str(err))
            return True
        if not tracked:
            self.d._wait_for_termination([_Removed(pod, action, self.d._termination_deadline(pod))])
            return False
        log.info(
            "Pod eviction/deletion done. Now waiting for volume detachment.",
            pod=key,
            node=self.d.node,
            took=round(self.d.clock.since(started), 3),
        )
        detach_error = self._wait_for_detach(pod, tracked, watch)
        if detach_error is not None:
            return False
        self._wait_for_reattach(pod, tracked, watch)
        self.d.tally.record(pod, action)
        return False

    def _wait_for_detach(
        self, pod: Obj, tracked: list[TrackedVolume], watch: VolumeWatch | None
    ) -> str | None:
        """Wait until no tracked volume is attached to the node; record and return any failure."""
        grace = float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0)
        until = min(self.d.clock.monotonic() + grace + self.d.options.pv_detach_timeout, self.d.deadline.at)
        while True:
            if watch is not None:
                watch.changed.clear()
            try:
                node = self.d.nodes_api.get(self.d.node)
            except NotFound:
                log.info("Node not found anymore", node=self.d.node)
                with self.d.tally.lock:
                    self.d.tally.node_gone = True
                self.halted = LEFT_NODE_GONE
                self.d.tally.record(pod, "left", LEFT_NODE_GONE)
                return LEFT_NODE_GONE
            except API_ERRORS as err:
                self.d.tally.record(pod, "left", str(err), f"error waiting for PVs to detach: {err}")
                return str(err)
            attached = (node.get("status") or {}).get("volumesAttached") or []
            if not any(is_attached(v.volume_id, attached) for v in tracked):
                log.debug("Detached volumes", pod=pod_key(pod), node=self.d.node)
                return None
            left = until - self.d.clock.monotonic()
            if left <= 0 or self.d.stop.is_set():
                return self._detach_timed_out(pod)
            self.d.clock.wait(
                watch.changed if watch is not None else self.d.stop, min(POD_POLL_INTERVAL, left)
            )

    def _detach_timed_out(self, pod: Obj) -> str:
        if self.d.deadline.over():
            self.halted = self.d.deadline.reason()
            self.d.tally.record(pod, "left", self.halted)
            return self.halted
        log.warning(DETACH_TIMEOUT_TEXT, pod=pod_key(pod), node=self.d.node)
        self.d.tally.record(pod, "left", DETACH_TIMEOUT_TEXT, DETACH_TIMEOUT_TEXT)
        return DETACH_TIMEOUT_TEXT

    def _wait_for_reattach(self, pod: Obj, tracked: list[TrackedVolume], watch: VolumeWatch | None) -> None:
        """Wait for the volumes to attach elsewhere; a timeout only warns (the pod is drained)."""
        until = min(self.d.clock.monotonic() + self.d.options.pv_reattach_timeout, self.d.deadline.at)
        done = watch.reattached if watch is not None else self.d.stop
        while not done.is_set() or self.d.stop.is_set():
            left = until - self.d.clock.monotonic()
            if left <= 0 or self.d.stop.is_set():
                log.warning(
                    "Timeout occurred for following volumes to reattach",
                    pod=pod_key(pod),
                    volumes=[v.pv_name for v in tracked],
                    error=REATTACH_TIMEOUT_TEXT,
                )
                return
            self.d.clock.wait(done, left)
        log.info("Successfully reattached volumes", pod=pod_key(pod), volumes=[v.pv_name for v in tracked])

    def _recheck(self, pods: list[Obj]) -> list[Obj]:
        """HEAD #979: drop pending pods that are gone (or replaced) after a pass."""
        if self.halted:
            return pods
        remaining = []
        for pod in pods:
            try:
                gone = self.d._is_gone(pod)
            except API_ERRORS:
                gone = False
            if gone:
                self.d.tally.record(pod, "gone")
            else:
                remaining.append(pod)
        return remaining


def aggregate(errors: Sequence[str]) -> str | None:
    """apimachinery's aggregate: None, the one message, or the distinct ones as ``[a, b]``."""
    distinct = list(dict.fromkeys(e for e in errors if e))
    if not distinct:
        return None
    if len(distinct) == 1:
        return distinct[0]
    return "[" + ", ".join(distinct) + "]"

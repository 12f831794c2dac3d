"""Pods with PVs, one at a time (upstream's ``evictPodsWithPv`` in ``drain/drain.go``, as at HEAD):
passes of evictions, then one delete pass.

Each pod is evicted (or deleted), then the drain waits for its tracked volumes to detach from the
node and to attach elsewhere. A pod whose PVs are all untracked is waited for like a pod without
PVs (upstream counts it done at once). After each pass, pending pods that are gone are dropped
(upstream v0.59.0, #979). When the deadline passes, ``stop`` is set or the node disappears, the
remaining pods are left behind with that reason, never counted as drained.
"""

from __future__ import annotations

import structlog

from mcm.drain.shared import DrainRun
from mcm.drain.state import (
    API_ERRORS,
    DETACH_TIMEOUT_TEXT,
    EVICTION_RETRY_INTERVAL,
    LEFT_NODE_GONE,
    POD_POLL_INTERVAL,
    REATTACH_TIMEOUT_TEXT,
    Removed,
)
from mcm.drain.volumes import TrackedVolume, VolumeWatch, is_attached
from mcm.runtime.cache import object_key
from mcm.runtime.client.errors import NotFound, TooManyRequests
from mcm.runtime.objects import Obj

__all__ = ["SerialPass", "priority"]

log = structlog.get_logger(__name__)


def priority(pod: Obj) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) else 0


class SerialPass:
    """The PV pods, one at a time: passes of evictions, then one delete pass (``evictPodsWithPv``)."""

    def __init__(self, run: DrainRun, volumes: dict[str, list[TrackedVolume]]) -> None:
        self.d = run
        self.volumes = volumes
        self.halted: str | None = None
        self.last_action: dict[str, str] = {}

    def run(self, pods: list[Obj]) -> None:
        pending = pods
        passes = self.d.options.max_evict_retries if self.d.evict_supported else 0
        for number in range(max(passes, 0)):
            if number > 0:
                log.debug(
                    "pv_pods_retried_after_interval", node=self.d.node, interval=EVICTION_RETRY_INTERVAL
                )
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
            verb = "evicting" if self.last_action.get(object_key(pod)) == "evicted" else "deleting"
            error = f'error {verb} pod {object_key(pod)} from node "{self.d.node}"'
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
        tracked = self.volumes.get(object_key(pod), [])
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
        key = object_key(pod)
        self.last_action[key] = "evicted" if evict else "deleted"
        started = self.d.clock.monotonic()
        try:
            action = self.d.act(pod, evict)
        except NotFound:
            self.d.tally.record(pod, "gone")
            return False
        except TooManyRequests as err:
            if evict:
                pdb_error = self.d.refused_by_pdb(pod, err)
                if pdb_error is not None:
                    self.d.tally.record(pod, "left", "misconfigured PodDisruptionBudget", pdb_error)
                    return False
            return True
        except API_ERRORS as err:
            log.debug("pv_pod_removal_failed_will_retry", pod=key, node=self.d.node, error=str(err))
            return True
        if not tracked:
            self.d.wait_for_termination([Removed(pod, action, self.d.termination_deadline(pod))])
            return False
        log.info(
            "pv_pod_removed_waiting_for_detach",
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
        grace = float(pod["spec"].get("terminationGracePeriodSeconds") or 0)  # a selected pod has a spec
        until = min(self.d.clock.monotonic() + grace + self.d.options.pv_detach_timeout, self.d.deadline.at)
        while True:
            if watch is not None:
                watch.changed.clear()
            try:
                node = self.d.nodes_api.get(self.d.node)
            except NotFound:
                self.d.mark_node_gone()
                self.halted = LEFT_NODE_GONE
                self.d.tally.record(pod, "left", LEFT_NODE_GONE)
                return LEFT_NODE_GONE
            except API_ERRORS as err:
                self.d.tally.record(pod, "left", str(err), f"error waiting for PVs to detach: {err}")
                return str(err)
            attached = (node.get("status") or {}).get("volumesAttached") or []
            if not any(is_attached(v.volume_id, attached) for v in tracked):
                log.debug("volumes_detached", pod=object_key(pod), node=self.d.node)
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
        log.warning(
            "volumes_detach_timed_out", pod=object_key(pod), node=self.d.node, error=DETACH_TIMEOUT_TEXT
        )
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
                    "volumes_reattach_timed_out",
                    pod=object_key(pod),
                    volumes=[v.pv_name for v in tracked],
                    error=REATTACH_TIMEOUT_TEXT,
                )
                return
            self.d.clock.wait(done, left)
        log.info("volumes_reattached", pod=object_key(pod), volumes=[v.pv_name for v in tracked])

    def _recheck(self, pods: list[Obj]) -> list[Obj]:
        """HEAD #979: drop pending pods that are gone (or replaced) after a pass."""
        if self.halted:
            return pods
        remaining = []
        for pod in pods:
            try:
                gone = self.d.is_gone(pod)
            except API_ERRORS:
                gone = False
            if gone:
                self.d.tally.record(pod, "gone")
            else:
                remaining.append(pod)
        return remaining

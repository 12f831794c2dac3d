"""The node drain: upstream's ``RunDrain`` (``pkg/util/provider/drain/drain.go``, as at HEAD) with
its hangs, crashes and miscounts fixed (docs/drain.md, "Where mcm differs from upstream"):
:func:`run_drain`.

Guarantees:

- One deadline for the whole drain (``options.timeout`` from the start): every eviction retry,
  termination, detach and reattach wait ends by it, and every wait also ends promptly when
  ``stop`` is set. ``max_evict_retries <= 0`` means "delete at once" and cannot hang.
- Every selected pod gets exactly one outcome: evicted, deleted, already gone, or left behind
  with a reason. A pod left behind is never counted as drained (upstream's fast track does); a drain that
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

import structlog

from mcm.drain.metrics import DrainMetrics
from mcm.drain.parallel import remove_in_parallel
from mcm.drain.pods import select_pods
from mcm.drain.serial import SerialPass, priority
from mcm.drain.shared import DrainRun
from mcm.drain.state import (
    API_ERRORS,
    LEFT_DEADLINE,
    LEFT_STOPPED,
    REASON_DRAIN_FAILED,
    REASON_DRAIN_STARTED,
    REASON_DRAIN_SUCCEEDED,
    aggregate,
)
from mcm.drain.types import DrainListers, DrainOptions, DrainResult
from mcm.drain.volumes import VolumeAttachmentHub, pod_volumes, uses_pvc
from mcm.driver import Driver
from mcm.runtime.cache import object_key
from mcm.runtime.cache.shared_informer import wait_for_cache_sync
from mcm.runtime.client import ClusterClient
from mcm.runtime.clock import Clock
from mcm.runtime.objects import Obj
from mcm.runtime.record import EventRecorder

__all__ = ["run_drain"]

log = structlog.get_logger(__name__)


def run_drain(
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
    run = DrainRun(client, listers, driver, node_name, options, clock, stop, hub, recorder, machine_ref)
    log.info("drain_started", node=node_name, force=options.force)
    run.event("Normal", REASON_DRAIN_STARTED, f"Drain of node {node_name!r} started")
    result = _result(run, _drain(run))
    log.info(
        "drain_ended",
        node=node_name,
        took=round(result.duration, 3),
        evicted=len(result.evicted),
        deleted=len(result.deleted),
        left_behind=[p.key for p in result.left_behind],
        error=result.error,
    )
    if result.ok:
        run.event("Normal", REASON_DRAIN_SUCCEEDED, f"Drain of node {node_name!r} successful")
    else:
        run.event("Warning", REASON_DRAIN_FAILED, f"Drain of node {node_name!r} failed: {result.error}")
    if metrics is not None:
        metrics.observe(result)
    return result


def _drain(run: DrainRun) -> str | None:
    """Run the drain; return an error that happened before any pod was handled."""
    synced = run.listers.pods_synced
    if synced is not None and not wait_for_cache_sync(run.stop, synced, timeout=run.deadline.remaining()):
        return "timed out waiting for pod cache to sync"
    selection = select_pods(run.listers.pods.list(), run.node, run.options)
    run.warnings, run.skipped = tuple(selection.warning_lines()), tuple(selection.skipped)
    if run.warnings:
        log.warning("drain_pod_filter_warnings", node=run.node, warnings=list(run.warnings))
    fatal = selection.error()
    if fatal:
        return fatal
    if not selection.pods:
        log.info("drain_no_pods_on_node", node=run.node)
        return None
    if not run.options.force:
        try:
            run.evict_supported = _eviction_supported(run.client)
        except API_ERRORS as err:
            return f"error discovering eviction support: {err}"
    _remove(run, selection.pods)
    return None


def _eviction_supported(client: ClusterClient) -> bool:
    discovery = client.discovery()
    if not discovery.preferred_version("policy"):
        return False
    return discovery.has_resource("v1", "pods/eviction", "Eviction")


def _remove(run: DrainRun, pods: list[Obj]) -> None:
    if run.options.force:
        log.info("drain_force_deleting_pods", node=run.node)
        remove_in_parallel(run, pods)
        return
    log.info("drain_evicting_pods", node=run.node)
    with_pv = [p for p in pods if uses_pvc(p)]
    without_pv = [p for p in pods if not uses_pvc(p)]
    serial = threading.Thread(
        target=_remove_serially, args=(run, with_pv), name=f"drain-pv-{run.node}", daemon=True
    )
    if with_pv:
        serial.start()
    remove_in_parallel(run, without_pv)
    if with_pv:
        serial.join()


def _remove_serially(run: DrainRun, pods: list[Obj]) -> None:
    """The PV pods in descending priority; an unexpected error leaves the unhandled ones behind."""
    ordered = sorted(pods, key=priority, reverse=True)
    try:
        volumes = pod_volumes(
            ordered, run.listers.pvcs, run.listers.pvs, run.driver, clock=run.clock, deadline=run.deadline.at
        )
        SerialPass(run, volumes).run(ordered)
    except Exception as err:
        log.exception("drain_pv_path_failed", node=run.node)
        for pod in ordered:
            with run.tally.lock:
                known = object_key(pod) in run.tally.outcomes
            if not known:
                run.tally.record(pod, "left", str(err), f"error draining pod {object_key(pod)}: {err}")


def _result(run: DrainRun, error: str | None) -> DrainResult:
    errors = list(run.tally.errors) + ([error] if error else [])
    left = run.tally.left()
    timed_out = any(p.reason == LEFT_DEADLINE for p in left)
    unexplained = [p for p in left if p.reason in (LEFT_DEADLINE, LEFT_STOPPED)]
    if unexplained:
        keys = ", ".join(p.key for p in unexplained)
        errors.append(f"{unexplained[0].reason} for node {run.node!r}; pods left: {keys}")
    return DrainResult(
        node=run.node,
        duration=run.clock.since(run.started),
        evicted=run.tally.of("evicted"),
        deleted=run.tally.of("deleted"),
        gone=run.tally.of("gone"),
        left_behind=left,
        warnings=run.warnings,
        error=aggregate(errors),
        timed_out=timed_out,
        node_gone=run.tally.node_gone,
        forced=run.options.force,
        skipped=run.skipped,
    )

"""Pods without PVs (and every pod of a forced drain): removed in parallel
(upstream's ``evictPodsWithoutPv`` / ``evictPodWithoutPVInternal`` in ``drain/drain.go``, as at HEAD).

At most ``options.max_parallel_evictions`` evict/delete calls run at once. A PDB-refused eviction
(429) is retried every 20 s until the deadline; a misconfigured PDB fails the pod at once; after
``max_evict_retries`` attempts the pod is deleted. Force mode records each accepted DELETE and
waits for nothing; otherwise the removed pods are awaited until they are gone.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from mcm.drain.shared import DrainRun
from mcm.drain.state import API_ERRORS, EVICTION_RETRY_INTERVAL, Removed
from mcm.runtime.cache import object_key
from mcm.runtime.client.errors import NotFound, TooManyRequests
from mcm.runtime.objects import Obj
from mcm.runtime.workqueue import parallelize_until

__all__ = ["remove_in_parallel"]

log = structlog.get_logger(__name__)


def remove_in_parallel(run: DrainRun, pods: Sequence[Obj]) -> None:
    """Remove ``pods`` concurrently; every pod ends with one outcome in ``run.tally``."""
    removed: list[Removed | None] = [None] * len(pods)

    def remove(i: int) -> None:
        removed[i] = _evict_with_retries(run, pods[i])

    parallelize_until(None, max(run.options.max_parallel_evictions, 1), len(pods), remove)
    waiting = [r for r in removed if r is not None]
    if run.options.force:
        for item in waiting:
            run.tally.record(item.pod, item.action)
        return
    run.wait_for_termination(waiting)


def _evict_with_retries(run: DrainRun, pod: Obj) -> Removed | None:
    """Evict (retrying PDB refusals) or delete one pod; None once its outcome is recorded."""
    attempt = 0
    while True:
        if run.deadline.over():
            run.tally.record(pod, "left", run.deadline.reason())
            return None
        evict = run.evict_supported and attempt < run.options.max_evict_retries
        attempt += 1
        try:
            action = run.act(pod, evict)
        except NotFound:
            run.tally.record(pod, "gone")
            return None
        except TooManyRequests as err:
            if not evict:
                _failed(run, pod, evict, err)
                return None
            pdb_error = run.refused_by_pdb(pod, err)
            if pdb_error is not None:
                run.tally.record(pod, "left", "misconfigured PodDisruptionBudget", pdb_error)
                return None
            run.deadline.sleep(EVICTION_RETRY_INTERVAL)
            continue
        except API_ERRORS as err:
            _failed(run, pod, evict, err)
            return None
        return Removed(pod, action, run.termination_deadline(pod))


def _failed(run: DrainRun, pod: Obj, evict: bool, err: Exception) -> None:
    verb = "evicting" if evict else "deleting"
    error = f'error when {verb} pod "{pod["metadata"]["name"]}": {err} scheduled on node {run.node}'
    log.error("drain_pod_failed", pod=object_key(pod), node=run.node, error=str(err))
    run.tally.record(pod, "left", str(err), error)

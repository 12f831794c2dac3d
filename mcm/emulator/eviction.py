"""The eviction subresource, ``POST pods/{name}/eviction`` (kube-apiserver's
``pkg/registry/core/pod/storage/eviction.go``).

Guarantees:

- A returned dict is answered with HTTP 201 (also the multi-PDB ``Failure`` status, as
  upstream); refusals raise :class:`~mcm.emulator.errors.ApiStatusError` (429, 403, 404, 400).
- Pods that are not running (``Succeeded``, ``Failed``, ``Pending``), already terminating or
  selected by no budget are deleted without a budget check.
- A budget decrement (``disruptionsAllowed``, ``disruptedPods`` stamped from ``clock``) and the
  pod deletion happen in one store transaction.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcm.emulator import errors
from mcm.emulator.pdb import PDBS, PODS, disruption_allowed_condition, is_ready, selects
from mcm.emulator.store import Obj
from mcm.emulator.timefmt import format_time
from mcm.runtime.clock import REAL_CLOCK, Clock

if TYPE_CHECKING:
    from mcm.emulator.registry import ResourceType
    from mcm.emulator.storage import Storage

__all__ = ["EVICTION_BLOCKED", "MULTIPLE_PDBS", "evict"]

MAX_DISRUPTED_PODS = 2000
EVICTION_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


def _success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _multiple_pdbs() -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": MULTIPLE_PDBS,
        "code": 500,
    }


def _delete_options(body: Mapping[str, Any]) -> Obj:
    options = body.get("deleteOptions")
    return dict(options) if isinstance(options, Mapping) else {}


def _pod_type(storage: Storage) -> ResourceType:
    rt = storage.registry.by_storage(PODS)
    if rt is None:
        raise errors.resource_not_found()
    return rt


def evict(
    storage: Storage,
    namespace: str,
    name: str,
    body: Any,
    *,
    clock: Clock = REAL_CLOCK,
    dry_run: bool = False,
) -> Obj:
    """``POST pods/{name}/eviction``: delete the pod if its disruption budget allows."""
    if not isinstance(body, Mapping):
        raise errors.bad_request(
            'Eviction in version "v1" cannot be handled as a Eviction: body must be an object'
        )
    body_name = (body.get("metadata") or {}).get("name")
    if body_name and body_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = _delete_options(body)
    dry_run = dry_run or "All" in (options.get("dryRun") or [])
    rt = _pod_type(storage)
    with storage.transaction():
        pod = storage.get_stored(rt, namespace, name).obj
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending") or pod[
            "metadata"
        ].get("deletionTimestamp"):
            storage.delete(rt, namespace, name, options, dry_run=dry_run)
            return _success()
        pdbs = [s.obj for s in storage.store.items(PDBS, namespace) if selects(s.obj, pod)]
        if not pdbs:
            storage.delete(rt, namespace, name, options, dry_run=dry_run)
            return _success()
        if len(pdbs) > 1:
            return _multiple_pdbs()
        return _evict_with_budget(storage, rt, pod, pdbs[0], options, dry_run=dry_run, clock=clock)


def _evict_with_budget(
    storage: Storage, rt: ResourceType, pod: Obj, pdb: Obj, options: Obj, *, dry_run: bool, clock: Clock
) -> Obj:
    meta = pod["metadata"]
    namespace, name = str(meta.get("namespace", "")), str(meta["name"])
    status = pdb.get("status") or {}
    spec = pdb.get("spec") or {}
    pdb_name = str(pdb["metadata"]["name"])
    healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
    if not is_ready(pod) and (
        spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or healthy >= desired > 0
    ):
        guarded = {
            **options,
            "preconditions": {
                **(options.get("preconditions") or {}),
                "resourceVersion": meta.get("resourceVersion"),
            },
        }
        storage.delete(rt, namespace, name, guarded, dry_run=dry_run)
        return _success()
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        cause = {
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {pdb_name} is still being processed by the server.",
        }
        raise errors.too_many_requests(EVICTION_BLOCKED, {"causes": [cause]}, 10)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden(
            f'poddisruptionbudget.policy "{pdb_name}" is forbidden: pdb disruptions allowed is negative'
        )
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(
            f'poddisruptionbudget.policy "{pdb_name}" is forbidden: DisruptedPods map too big - '
            "too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        cause = {
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {pdb_name} needs {desired} healthy pods "
            f"and has {healthy} currently",
        }
        raise errors.too_many_requests(EVICTION_BLOCKED, {"causes": [cause]}, None)
    if dry_run:
        return _success()
    _record_disruption(storage, pdb, name, allowed - 1, clock.now())
    storage.delete(rt, namespace, name, options)
    return _success()


def _record_disruption(storage: Storage, pdb: Obj, pod_name: str, allowed: int, now: _dt.datetime) -> None:
    rt = storage.registry.by_storage(PDBS)
    if rt is None:
        return
    meta = pdb["metadata"]

    def decrement(obj: Obj) -> Obj:
        status = dict(obj.get("status") or {})
        status["disruptionsAllowed"] = allowed
        status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: format_time(now)}
        if allowed == 0:
            generation = int(obj["metadata"].get("generation") or 0)
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "DisruptionAllowed"
            ] + [disruption_allowed_condition(status, 0, generation, now)]
        return {**obj, "status": status}

    storage.guaranteed_update(
        rt, str(meta.get("namespace", "")), str(meta["name"]), decrement, subresource="status"
    )

"""PodDisruptionBudget status (the disruption controller) and the eviction subresource (spec §2.11).

Guarantees:

- :func:`compute_status` follows upstream ``trySync``: matched pods, expected pods (by controller
  scale for percentages and ``maxUnavailable``), desired and current healthy, disrupted pods that
  are still pending (2 min), ``disruptionsAllowed``, ``observedGeneration`` and the
  ``DisruptionAllowed`` condition (``lastTransitionTime`` changes only when the status flips).
  A budget that cannot be computed (e.g. a malformed ``minAvailable``) gets
  ``disruptionsAllowed: 0`` and the condition reason ``SyncFailed`` with the error as message.
- :class:`DisruptionController` recomputes a PDB after any change to it or to a pod in its
  namespace: in ``sync`` mode right after the triggering commit (before that request is
  answered), in ``async`` mode after ``delay`` seconds. It skips PDBs annotated
  ``emu.sim/pdb-controller: "off"`` and writes status only when it changed.
- :func:`evict` implements ``POST pods/{name}/eviction``: a returned dict is answered with HTTP
  201 (also the multi-PDB ``Failure`` status, as upstream); refusals raise
  :class:`~mcm.emulator.errors.ApiStatusError` (429, 403, 404, 400). A budget decrement and the pod
  deletion happen in one store transaction.
"""

from __future__ import annotations

import datetime as _dt
import math
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import structlog

from mcm.emulator import errors
from mcm.emulator.timefmt import format_time, parse_time
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.labels import selector_from_label_selector

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.registry import ResourceType
    from mcm.emulator.storage import Storage
    from mcm.emulator.store import Change

__all__ = [
    "DELETION_TIMEOUT",
    "OFF_ANNOTATION",
    "DisruptionController",
    "compute_status",
    "evict",
    "failed_status",
]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
PODS = "pods"
PDBS = "poddisruptionbudgets.policy"
OFF_ANNOTATION = "emu.sim/pdb-controller"
DELETION_TIMEOUT = 120.0
MAX_DISRUPTED_PODS = 2000
EVICTION_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)

_CONTROLLERS: weakref.WeakKeyDictionary[Storage, DisruptionController] = weakref.WeakKeyDictionary()


# --------------------------------------------------------------------------- status computation


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, Mapping)
    )


def _matches(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    try:
        selector = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
    except ValueError:
        return False
    return not selector.empty() and selector.matches_object(pod)


def _controller_uid(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid"):
            return str(ref["uid"])
    return None


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value)


def _expected_scale(pods: list[Obj], owner_replicas: Mapping[str, int]) -> int:
    counts: dict[str, int] = {}
    for pod in pods:
        uid = _controller_uid(pod)
        if uid is not None:
            counts[uid] = counts.get(uid, 0) + 1
    return sum(owner_replicas.get(uid, count) for uid, count in counts.items())


def _desired_and_expected(
    spec: Mapping[str, Any], pods: list[Obj], owner_replicas: Mapping[str, int]
) -> tuple[int, int]:
    if spec.get("maxUnavailable") is not None:
        expected = _expected_scale(pods, owner_replicas)
        return max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True)), expected
    min_available = spec.get("minAvailable")
    if isinstance(min_available, str):
        expected = _expected_scale(pods, owner_replicas)
        return _scaled(min_available, expected, round_up=True), expected
    if min_available is not None:
        return int(min_available), len(pods)
    return 0, len(pods)


def _live_disruptions(
    disrupted: Mapping[str, Any], pods_by_name: Mapping[str, Obj], now: _dt.datetime
) -> tuple[dict[str, str], _dt.datetime | None]:
    """Entries still within the deletion timeout for pods that exist and are not deleting."""
    kept: dict[str, str] = {}
    next_expiry: _dt.datetime | None = None
    for name, stamp in disrupted.items():
        pod = pods_by_name.get(name)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        try:
            expiry = parse_time(str(stamp)) + _dt.timedelta(seconds=DELETION_TIMEOUT)
        except ValueError:
            continue
        if expiry <= now:
            continue
        kept[name] = format_time(parse_time(str(stamp)))
        next_expiry = expiry if next_expiry is None else min(next_expiry, expiry)
    return kept, next_expiry


def _condition(old_status: Mapping[str, Any], allowed: int, generation: int, now: _dt.datetime) -> Obj:
    status = "True" if allowed > 0 else "False"
    reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
    previous = next(
        (
            c
            for c in old_status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == "DisruptionAllowed"
        ),
        None,
    )
    stamp = format_time(now)
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        stamp = str(previous["lastTransitionTime"])
    return {
        "type": "DisruptionAllowed",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": "",
    }


def compute_status(
    pdb: Mapping[str, Any], pods: list[Obj], owner_replicas: Mapping[str, int], now: _dt.datetime
) -> tuple[Obj, _dt.datetime | None]:
    """The PDB status for the pods of its namespace; also when the next disrupted entry expires."""
    spec = pdb.get("spec") or {}
    old_status = pdb.get("status") or {}
    matched = [p for p in pods if _matches(pdb, p)]
    desired, expected = _desired_and_expected(spec, matched, owner_replicas)
    by_name = {str(p["metadata"]["name"]): p for p in matched}
    disrupted, next_expiry = _live_disruptions(old_status.get("disruptedPods") or {}, by_name, now)
    healthy = sum(
        1
        for name, pod in by_name.items()
        if not pod["metadata"].get("deletionTimestamp") and name not in disrupted and _is_ready(pod)
    )
    allowed = healthy - desired
    if allowed <= 0 or expected <= 0:
        allowed = 0
    generation = int((pdb.get("metadata") or {}).get("generation") or 0)
    status: Obj = {
        "observedGeneration": generation,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "conditions": [_condition(old_status, allowed, generation, now)],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status, next_expiry


def failed_status(pdb: Mapping[str, Any], error: str, now: _dt.datetime) -> Obj:
    """The status written when the budget cannot be computed: nothing allowed, ``SyncFailed``."""
    old_status = pdb.get("status") or {}
    generation = int((pdb.get("metadata") or {}).get("generation") or 0)
    condition = {**_condition(old_status, 0, generation, now), "reason": "SyncFailed", "message": error}
    return {
        **{k: old_status.get(k, 0) for k in ("currentHealthy", "desiredHealthy", "expectedPods")},
        "observedGeneration": generation,
        "disruptionsAllowed": 0,
        "conditions": [condition],
    }


# --------------------------------------------------------------------------- controller


class DisruptionController:
    """Keeps PDB status up to date; ``mode`` is ``sync`` (default) or ``async`` with ``delay``."""

    def __init__(self, reactor: Reactor, scheduler: Scheduler, clock: Clock = REAL_CLOCK) -> None:
        self.reactor = reactor
        self.scheduler = scheduler
        self.clock = clock
        self.enabled = True
        self.mode: Literal["sync", "async"] = "sync"
        self.delay = 0.5
        reactor.add_handler(self._on_change)
        _CONTROLLERS[reactor.storage] = self

    def start(self) -> None:
        with self.reactor.storage.store.lock:
            for stored in self.reactor.storage.store.items(PDBS):
                meta = stored.obj["metadata"]
                self._enqueue(str(meta.get("namespace", "")), str(meta["name"]))
            self.reactor.flush()

    def resync(self) -> None:
        """Recompute every PDB now."""
        self.start()

    def _on_change(self, change: Change) -> None:
        if not self.enabled or change.resource not in (PODS, PDBS):
            return
        namespace, name = change.key
        if change.resource == PDBS:
            if change.type != "DELETED":
                self._enqueue(namespace, name)
            return
        pods = [change.new.obj] if change.old is None else [change.new.obj, change.old.obj]
        for stored in self.reactor.storage.store.items(PDBS, namespace):
            if any(_matches(stored.obj, pod) for pod in pods):
                self._enqueue(namespace, str(stored.obj["metadata"]["name"]))

    def _enqueue(self, namespace: str, name: str) -> None:
        key = ("pdb", namespace, name)
        if self.mode == "async":
            self.scheduler.schedule_once(
                key, self.delay, lambda: self.reactor.run(key, lambda: self.sync(namespace, name))
            )
            return
        self.reactor.defer(key, lambda: self.sync(namespace, name))

    def sync(self, namespace: str, name: str) -> None:
        """Recompute one PDB's status and write it if it changed."""
        storage = self.reactor.storage
        current = storage.store.get(PDBS, namespace, name)
        if current is None:
            return
        pdb = current.obj
        if ((pdb["metadata"].get("annotations") or {}).get(OFF_ANNOTATION)) == "off":
            return
        pods = [s.obj for s in storage.store.items(PODS, namespace)]
        try:
            status, next_expiry = compute_status(pdb, pods, self._owner_replicas(pods), self.clock.now())
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("pdb_sync_failed", namespace=namespace, name=name, error=str(exc))
            status, next_expiry = failed_status(pdb, str(exc), self.clock.now()), None
        if next_expiry is not None:
            delay = (next_expiry - self.clock.now()).total_seconds()
            key = ("pdb-expiry", namespace, name)
            self.scheduler.schedule(
                key,
                delay,
                lambda: self.reactor.run(("pdb", namespace, name), lambda: self.sync(namespace, name)),
            )
        if status == pdb.get("status"):
            return
        rt = storage.registry.by_storage(PDBS)
        if rt is None:
            return
        storage.guaranteed_update(
            rt, namespace, name, lambda obj: {**obj, "status": status}, subresource="status"
        )

    def _owner_replicas(self, pods: list[Obj]) -> dict[str, int]:
        """``spec.replicas`` of the custom objects that control the given pods (deviation, §2.11)."""
        result: dict[str, int] = {}
        for pod in pods:
            uid = _controller_uid(pod)
            if uid is None or uid in result:
                continue
            ref = self.reactor.index.objects.get(uid)
            if ref is None:
                continue
            owner = self.reactor.storage.store.get(ref.resource, ref.namespace, ref.name)
            replicas = ((owner.obj.get("spec") or {}) if owner is not None else {}).get("replicas")
            if isinstance(replicas, int) and not isinstance(replicas, bool):
                result[uid] = replicas
        return result


# --------------------------------------------------------------------------- eviction


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


def evict(storage: Storage, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> Obj:
    """``POST pods/{name}/eviction``: delete the pod if its disruption budget allows (spec §2.11)."""
    if not isinstance(body, Mapping):
        raise errors.bad_request(
            'Eviction in version "v1" cannot be handled as a Eviction: body must be an object'
        )
    body_name = (body.get("metadata") or {}).get("name")
    if body_name and body_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = _delete_options(body)
    dry_run = dry_run or "All" in (options.get("dryRun") or [])
    controller = _CONTROLLERS.get(storage)
    clock = controller.clock if controller is not None else REAL_CLOCK
    rt = _pod_type(storage)
    with storage.transaction():
        pod = storage.get_stored(rt, namespace, name).obj
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending") or pod[
            "metadata"
        ].get("deletionTimestamp"):
            storage.delete(rt, namespace, name, options, dry_run=dry_run)
            return _success()
        pdbs = [s.obj for s in storage.store.items(PDBS, namespace) if _matches(s.obj, pod)]
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
    if not _is_ready(pod) and (
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
            ] + [_condition(status, 0, generation, now)]
        return {**obj, "status": status}

    storage.guaranteed_update(
        rt, str(meta.get("namespace", "")), str(meta["name"]), decrement, subresource="status"
    )

"""PodDisruptionBudget status: kube-controller-manager's disruption controller. The eviction verb is
:mod:`mcm.emulator.eviction`; both share :mod:`mcm.emulator.pdb`.

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
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import structlog

from mcm.emulator.pdb import PDBS, PODS, disruption_allowed_condition, is_ready, selects
from mcm.emulator.store import Obj
from mcm.emulator.timefmt import format_time, parse_time
from mcm.runtime.clock import REAL_CLOCK, Clock

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.store import Change

__all__ = [
    "DELETION_TIMEOUT",
    "OFF_ANNOTATION",
    "DisruptionController",
    "compute_status",
    "failed_status",
]

log = structlog.get_logger(__name__)

OFF_ANNOTATION = "emu.sim/pdb-controller"
DELETION_TIMEOUT = 120.0


# --------------------------------------------------------------------------- status computation


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


def compute_status(
    pdb: Mapping[str, Any], pods: list[Obj], owner_replicas: Mapping[str, int], now: _dt.datetime
) -> tuple[Obj, _dt.datetime | None]:
    """The PDB status for the pods of its namespace; also when the next disrupted entry expires."""
    spec = pdb.get("spec") or {}
    old_status = pdb.get("status") or {}
    matched = [p for p in pods if selects(pdb, p)]
    desired, expected = _desired_and_expected(spec, matched, owner_replicas)
    by_name = {str(p["metadata"]["name"]): p for p in matched}
    disrupted, next_expiry = _live_disruptions(old_status.get("disruptedPods") or {}, by_name, now)
    healthy = sum(
        1
        for name, pod in by_name.items()
        if not pod["metadata"].get("deletionTimestamp") and name not in disrupted and is_ready(pod)
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
        "conditions": [disruption_allowed_condition(old_status, allowed, generation, now)],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status, next_expiry


def failed_status(pdb: Mapping[str, Any], error: str, now: _dt.datetime) -> Obj:
    """The status written when the budget cannot be computed: nothing allowed, ``SyncFailed``."""
    old_status = pdb.get("status") or {}
    generation = int((pdb.get("metadata") or {}).get("generation") or 0)
    condition = {
        **disruption_allowed_condition(old_status, 0, generation, now),
        "reason": "SyncFailed",
        "message": error,
    }
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
            if any(selects(stored.obj, pod) for pod in pods):
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
        """``spec.replicas`` of the custom objects that control the given pods (a deviation:
        docs/emulator.md)."""
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

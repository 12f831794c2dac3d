"""A minimal deployment controller: Deployments report their desired replicas as ready.

Guarantees:

- After a Deployment is created or its spec changes, once ``delay`` clock seconds have passed
  (default 0.2 s; 0 means in the triggering request's commit), its status is written through the
  status subresource: ``observedGeneration``, ``replicas``, ``updatedReplicas``,
  ``readyReplicas`` and ``availableReplicas`` equal to ``spec.replicas`` (zero counts are left
  out, as the real controller's omitempty encoding does), plus the ``Available`` and
  ``Progressing`` conditions. A status that already says so is not written again.
- ``hold()`` stops status updates (tests observe the not-yet-available state); ``release()``
  resumes them and catches up with every Deployment.
- Deviation: no ReplicaSets or Pods exist; deleting Deployments, rollouts, pausing and
  ``minReadySeconds`` are not simulated.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING

import structlog

from mcm.emulator.errors import ApiStatusError
from mcm.emulator.store import Obj
from mcm.emulator.timefmt import format_time

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.store import Change
    from mcm.runtime.clock import Clock

__all__ = ["DEPLOYMENTS", "DeploymentController", "desired_status"]

log = structlog.get_logger(__name__)

DEPLOYMENTS = "deployments.apps"
_COUNTS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")


def _condition(kind: str, reason: str, message: str, now: str, previous: list[Obj]) -> Obj:
    old = next((c for c in previous if c.get("type") == kind), None)
    same = old is not None and old.get("status") == "True" and old.get("reason") == reason
    return {
        "type": kind,
        "status": "True",
        "lastUpdateTime": now,
        "lastTransitionTime": str(old.get("lastTransitionTime")) if same and old else now,
        "reason": reason,
        "message": message,
    }


def desired_status(deployment: Obj, now: str) -> Obj:
    """The status the controller writes for ``deployment`` (``now``: an RFC 3339 time)."""
    meta, spec = deployment["metadata"], deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    previous = list((deployment.get("status") or {}).get("conditions") or [])
    name = meta.get("name", "")
    status: Obj = {"observedGeneration": int(meta.get("generation", 1))}
    status.update({count: replicas for count in _COUNTS if replicas})
    status["conditions"] = [
        _condition(
            "Available", "MinimumReplicasAvailable", "Deployment has minimum availability.", now, previous
        ),
        _condition(
            "Progressing",
            "NewReplicaSetAvailable",
            f'ReplicaSet "{name}" has successfully progressed.',
            now,
            previous,
        ),
    ]
    return status


def _settled(deployment: Obj) -> bool:
    status = deployment.get("status") or {}
    wanted = desired_status(deployment, "")
    return all(status.get(key) == wanted.get(key) for key in ("observedGeneration", *_COUNTS))


class DeploymentController:
    """Writes each Deployment's status ``delay`` seconds after its spec changes."""

    def __init__(self, reactor: Reactor, scheduler: Scheduler, clock: Clock) -> None:
        self.reactor = reactor
        self.scheduler = scheduler
        self.clock = clock
        self.enabled = True
        self.delay = 0.2
        reactor.add_handler(self._on_change)

    def start(self) -> None:
        self.release()

    def hold(self) -> None:
        """Stop writing statuses until :meth:`release`."""
        self.enabled = False

    def release(self) -> None:
        """Resume, and bring every Deployment's status up to date (after ``delay``)."""
        self.enabled = True
        with self.reactor.storage.store.lock:
            for stored in self.reactor.storage.store.items(DEPLOYMENTS):
                self._consider(stored.obj)
        self.reactor.flush()

    def _on_change(self, change: Change) -> None:
        if self.enabled and change.resource == DEPLOYMENTS and change.type != "DELETED":
            self._consider(change.new.obj)

    def _consider(self, deployment: Obj) -> None:
        meta = deployment["metadata"]
        if meta.get("deletionTimestamp") or _settled(deployment):
            return
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        key = ("deployment", namespace, name)
        if self.delay <= 0:
            self.reactor.defer(key, lambda: self._sync(namespace, name))
            return
        self.scheduler.schedule_once(
            key, self.delay, lambda: self.reactor.run(key, lambda: self._sync(namespace, name))
        )

    def _sync(self, namespace: str, name: str) -> None:
        storage = self.reactor.storage
        stored = storage.store.get(DEPLOYMENTS, namespace, name)
        rt = storage.registry.by_storage(DEPLOYMENTS)
        if not self.enabled or stored is None or rt is None or _settled(stored.obj):
            return
        now = format_time(self.clock.now().astimezone(_dt.UTC))

        def with_status(obj: Obj) -> Obj:
            return {**obj, "status": desired_status(obj, now)}

        try:
            storage.guaranteed_update(rt, namespace, name, with_status, subresource="status")
        except ApiStatusError as err:
            if err.code != 404:
                log.warning("deployment_status_failed", namespace=namespace, name=name, error=err.message)

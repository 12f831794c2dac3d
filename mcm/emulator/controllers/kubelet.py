"""Pods without a kubelet: the pod-termination modes and the optional pod runner.

Modes (changeable at run time through :attr:`KubeletSimulator.mode`):

- ``kubelet`` (default): a pod with ``deletionTimestamp`` and a positive grace period, bound to an
  existing node not annotated ``emu.sim/kubelet-down``, gets the kubelet's final
  ``DELETE gracePeriodSeconds=0`` after ``min(grace, max_grace) * time_scale`` clock seconds. That
  removes it, or leaves it waiting for its finalizers. With ``set_terminal_phase`` its status
  phase is first set to ``Succeeded``.
- ``immediate``: the final DELETE follows at once (before the deleting request is answered).
- ``manual``: pods stay terminating until :meth:`finish` or :meth:`finish_all` is called.

With ``run_pods`` (off by default), Pending pods bound to a live node become Running and Ready
with one running container status per container; without it created pods stay Pending (and an
eviction of a Pending pod ignores disruption budgets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import structlog

from mcm.emulator.errors import ApiStatusError
from mcm.emulator.store import Obj
from mcm.emulator.timefmt import format_time
from mcm.runtime.clock import REAL_CLOCK, Clock

if TYPE_CHECKING:
    from mcm.emulator.controllers.base import Reactor, Scheduler
    from mcm.emulator.store import Change

__all__ = ["KUBELET_DOWN_ANNOTATION", "KubeletSimulator", "running_status"]

log = structlog.get_logger(__name__)

PODS = "pods"
NODES = "nodes"
KUBELET_DOWN_ANNOTATION = "emu.sim/kubelet-down"
Mode = Literal["kubelet", "immediate", "manual"]


def running_status(pod: Obj, now: str) -> Obj:
    """The status a kubelet reports for a started pod: Running, Ready, one entry per container."""
    status = dict(pod.get("status") or {})
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    status.update(
        {
            "phase": "Running",
            "conditions": conditions,
            "startTime": status.get("startTime") or now,
            "hostIP": status.get("hostIP") or "10.0.0.1",
            "podIP": status.get("podIP") or "10.1.0.1",
            "containerStatuses": [
                {
                    "name": str(c.get("name", "")),
                    "image": str(c.get("image", "")),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in containers
            ],
        }
    )
    return status


class KubeletSimulator:
    """Finishes terminating pods (and optionally starts pods) as a node's kubelet would."""

    def __init__(self, reactor: Reactor, scheduler: Scheduler, clock: Clock = REAL_CLOCK) -> None:
        self.reactor = reactor
        self.scheduler = scheduler
        self.clock = clock
        self.mode: Mode = "kubelet"
        self.max_grace = 2.0
        self.time_scale = 1.0
        self.set_terminal_phase = False
        self.run_pods = False
        reactor.add_handler(self._on_change)

    def start(self) -> None:
        """Look at every existing pod once (e.g. after switching modes)."""
        store = self.reactor.storage.store
        with store.lock:
            for stored in store.items(PODS):
                self._consider(stored.obj)
            self.reactor.flush()

    def _on_change(self, change: Change) -> None:
        if change.type == "DELETED":
            if change.resource == PODS:
                namespace, name = change.key
                self.scheduler.cancel(("kubelet", namespace, name))
            return
        if change.resource == PODS:
            self._consider(change.new.obj)
        elif change.resource == NODES and _kubelet_came_up(change):
            node = change.key[1]
            for stored in self.reactor.storage.store.items(PODS):
                if (stored.obj.get("spec") or {}).get("nodeName") == node:
                    self._consider(stored.obj)

    def _node_alive(self, pod: Obj) -> bool:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return False
        node = self.reactor.storage.store.get(NODES, "", str(node_name))
        if node is None:
            return False
        return KUBELET_DOWN_ANNOTATION not in (node.obj["metadata"].get("annotations") or {})

    def _consider(self, pod: Obj) -> None:
        meta = pod["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        if meta.get("deletionTimestamp"):
            grace = meta.get("deletionGracePeriodSeconds") or 0
            if not grace or self.mode == "manual" or not self._node_alive(pod):
                return
            if self.mode == "immediate":
                self.reactor.defer(
                    ("kubelet-finish", namespace, name), lambda: self._finish_quietly(namespace, name)
                )
                return
            delay = min(float(grace), self.max_grace) * self.time_scale
            self.scheduler.schedule_once(
                ("kubelet", namespace, name),
                delay,
                lambda: self.reactor.run(
                    ("kubelet-finish", namespace, name), lambda: self._finish_quietly(namespace, name)
                ),
            )
            return
        phase = (pod.get("status") or {}).get("phase")
        if self.run_pods and phase in (None, "Pending") and self._node_alive(pod):
            self.reactor.defer(("kubelet-run", namespace, name), lambda: self._run(namespace, name))

    def _run(self, namespace: str, name: str) -> None:
        storage = self.reactor.storage
        stored = storage.store.get(PODS, namespace, name)
        rt = storage.registry.by_storage(PODS)
        if stored is None or rt is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        if (stored.obj.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        now = format_time(self.clock.now())
        storage.guaranteed_update(
            rt, namespace, name, lambda obj: {**obj, "status": running_status(obj, now)}, subresource="status"
        )

    def _finish_quietly(self, namespace: str, name: str) -> None:
        self.finish(namespace, name)

    def finish(self, namespace: str, name: str) -> bool:
        """The kubelet's final DELETE of one terminating pod; return whether it was terminating."""
        storage = self.reactor.storage
        rt = storage.registry.by_storage(PODS)
        with storage.store.lock:
            stored = storage.store.get(PODS, namespace, name)
            if rt is None or stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
                return False
            self.scheduler.cancel(("kubelet", namespace, name))
            try:
                if self.set_terminal_phase:
                    storage.guaranteed_update(rt, namespace, name, _terminated, subresource="status")
                storage.delete(rt, namespace, name, {"gracePeriodSeconds": 0})
            except ApiStatusError as err:
                if err.code != 404:
                    log.warning("kubelet_finish_failed", namespace=namespace, name=name, error=err.message)
            return True

    def finish_all(self, node: str | None = None) -> int:
        """Finish every terminating pod (of one node); return how many were finished."""
        store = self.reactor.storage.store
        with store.lock:
            doomed = [
                s.obj["metadata"]
                for s in store.items(PODS)
                if s.obj["metadata"].get("deletionTimestamp")
                and (node is None or (s.obj.get("spec") or {}).get("nodeName") == node)
            ]
        return sum(self.finish(str(m.get("namespace", "")), str(m["name"])) for m in doomed)


def _kubelet_down(obj: Obj) -> bool:
    return KUBELET_DOWN_ANNOTATION in (obj["metadata"].get("annotations") or {})


def _kubelet_came_up(change: Change) -> bool:
    """A node appeared, or lost its kubelet-down annotation: its pods need another look."""
    if change.old is None:
        return not _kubelet_down(change.new.obj)
    return _kubelet_down(change.old.obj) and not _kubelet_down(change.new.obj)


def _terminated(obj: Obj) -> Obj:
    status = dict(obj.get("status") or {})
    status["phase"] = "Succeeded"
    return {**obj, "status": status}

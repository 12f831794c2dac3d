"""The chaos tracker: one ordered record of everything that happened during a run.

Sources, each turned into :class:`Event` values in one list:

- **API side** (store hooks of the in-process emulators, so nothing is missed even when the
  controller's watches are dropped or the history is compacted): every version of every
  Machine in the run's namespace (phase, last operation, provider ID, deletion, finalizers),
  every Node (provider ID, readiness, deletion), and the bystander's marks on Machines, Nodes,
  Secrets and MachineClasses.
- **Cloud side**: every VM record created and deleted in the cloud cluster, with the UID and
  name of the Machine it was made for.
- **Driver side**: the driver's call log (``start``/``end`` of every call, from every process),
  tailed by a background thread.
- **Harness notes**: scenario boundaries, faults switched on and off, processes started,
  killed and exited, the bystander's writes.

Hooks run under an emulator's store lock: they only append (under the tracker's own lock) and
wake listeners, never block. Times are ``time.monotonic()`` readings, comparable across
processes on one machine. ``seq`` orders events as they were recorded; the driver's call log
arrives a little late, so checks about calls use ``t``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcm.apis.machine import constants as c
from mcm.testing.chaos.cloud import CLOUD_NAMESPACE, LABEL_MACHINE, LABEL_MACHINE_UID, LABEL_VM

__all__ = ["BYSTANDER_PREFIX", "Event", "Tracker", "bystander_marks"]

BYSTANDER_PREFIX = "bystander.chaos.mcm.dev/"
"""Finalizers, labels and annotations of the bystander all start with this."""

MACHINES = "machines.machine.sapcloud.io"
CLASSES = "machineclasses.machine.sapcloud.io"


@dataclass(frozen=True)
class Event:
    """One thing that happened: ``source`` says where it was seen, ``kind`` what it was."""

    seq: int
    t: float
    source: str
    """``machine``, ``node``, ``vm``, ``call``, ``marks`` (bystander-relevant versions),
    ``bystander``, ``fault``, ``process``, ``scenario``, ``owner``, ``check``."""
    kind: str
    key: str = ""
    """Machine name (machine, call, vm), node name, object id, process name, ..."""
    uid: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def describe(self, origin: float) -> str:
        """One line for a history: time since ``origin``, source, kind, key, details."""
        details = " ".join(f"{k}={v}" for k, v in self.data.items() if v not in ("", None, [], {}))
        return f"{self.t - origin:9.3f}s {self.source:<9} {self.kind:<10} {self.key} {details}".rstrip()


def bystander_marks(obj: Mapping[str, Any]) -> frozenset[str]:
    """The bystander's finalizers (``f:``), labels (``l:k=v``) and annotations (``a:k=v``) on ``obj``."""
    meta = obj.get("metadata") or {}
    marks = {f"f:{f}" for f in meta.get("finalizers") or [] if str(f).startswith(BYSTANDER_PREFIX)}
    for prefix, values in (("l", meta.get("labels") or {}), ("a", meta.get("annotations") or {})):
        marks |= {f"{prefix}:{k}={v}" for k, v in values.items() if str(k).startswith(BYSTANDER_PREFIX)}
    return frozenset(marks)


def object_id(resource: str, obj: Mapping[str, Any]) -> str:
    """``resource/namespace/name`` (cluster-scoped: ``resource//name``)."""
    meta = obj.get("metadata") or {}
    return f"{resource}/{meta.get('namespace', '')}/{meta.get('name', '')}"


def _machine_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    operation = status.get("lastOperation") or {}
    return {
        "rv": int(meta.get("resourceVersion") or 0),
        "phase": (status.get("currentStatus") or {}).get("phase", ""),
        "op": operation.get("type", ""),
        "state": operation.get("state", ""),
        "desc": operation.get("description", ""),
        "providerID": (obj.get("spec") or {}).get("providerID", ""),
        "node": (meta.get("labels") or {}).get(c.LABEL_NODE, ""),
        "deleting": bool(meta.get("deletionTimestamp")),
        "finalizers": [f for f in meta.get("finalizers") or [] if not str(f).startswith(BYSTANDER_PREFIX)],
    }


def _node_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready = next((str(x.get("status")) for x in conditions if x.get("type") == "Ready"), "")
    return {
        "providerID": (obj.get("spec") or {}).get("providerID", ""),
        "ready": ready,
        "deleting": bool(meta.get("deletionTimestamp")),
        "machine": (meta.get("labels") or {}).get(c.LABEL_NODE, ""),
    }


class Tracker:
    """Collects :class:`Event` values; see the module docstring."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.origin = time.monotonic()
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._listeners: list[Callable[[Event], None]] = []
        self._last_view: dict[str, Mapping[str, Any]] = {}
        self._unsubscribe: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._tail: threading.Thread | None = None
        self.call_log = ""
        self._call_offset = 0
        self._partial = b""

    # --- recording ------------------------------------------------------------------------------

    def record(
        self, source: str, kind: str, key: str = "", uid: str = "", t: float | None = None, **data: Any
    ) -> Event:
        """Append one event (now, unless ``t`` is given) and tell the listeners."""
        with self._lock:
            event = Event(
                len(self._events), time.monotonic() if t is None else t, source, kind, key, uid, data
            )
            self._events.append(event)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)
        return event

    def listen(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for every later event (it must not block); returns a remover."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def events(self) -> list[Event]:
        """A snapshot of every event so far, in recording order."""
        self.read_call_log()
        with self._lock:
            return list(self._events)

    # --- the emulators --------------------------------------------------------------------------

    def attach(self, control: Any, target: Any, cloud: Any) -> None:
        """Subscribe to the stores of the three in-process emulators."""
        self._unsubscribe += [
            control.store.subscribe(self._control_change),
            target.store.subscribe(self._target_change),
            cloud.store.subscribe(self._cloud_change),
        ]

    def detach(self) -> None:
        """Stop listening to the stores and stop tailing the call log."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        self._stop.set()
        if self._tail is not None:
            self._tail.join(5)
        self.read_call_log()

    def _marks(self, resource: str, change: Any) -> None:
        obj = change.new.obj
        ident = object_id(resource, obj)
        marks = bystander_marks(obj) if change.type != "DELETED" else frozenset()
        view = {"marks": marks, "type": change.type}
        if self._last_view.get(ident) == view and change.type == "MODIFIED":
            return
        self._last_view[ident] = view
        uid = (obj.get("metadata") or {}).get("uid", "")
        self.record("marks", change.type, ident, uid, t=change.at, rv=change.rv, marks=sorted(marks))

    def _control_change(self, change: Any) -> None:
        if change.key[0] != self.namespace:
            return
        if change.resource == MACHINES:
            obj = change.new.obj
            meta = obj.get("metadata") or {}
            self.record(
                "machine",
                change.type,
                meta.get("name", ""),
                meta.get("uid", ""),
                t=change.at,
                **_machine_view(obj),
            )
            self._marks(MACHINES, change)
        elif change.resource in (CLASSES, "secrets"):
            self._marks(change.resource, change)

    def _target_change(self, change: Any) -> None:
        if change.resource != "nodes":
            return
        obj = change.new.obj
        view = {"type": change.type, **_node_view(obj)}
        name = change.key[1]
        if self._last_view.get(f"node/{name}") != view or change.type != "MODIFIED":
            self._last_view[f"node/{name}"] = view
            self.record(
                "node",
                change.type,
                name,
                (obj.get("metadata") or {}).get("uid", ""),
                t=change.at,
                **_node_view(obj),
            )
        self._marks("nodes", change)

    def _cloud_change(self, change: Any) -> None:
        if change.resource != "configmaps" or change.key[0] != CLOUD_NAMESPACE:
            return
        if change.type == "MODIFIED":
            return
        labels = (change.new.obj.get("metadata") or {}).get("labels") or {}
        if LABEL_VM not in labels:
            return
        self.record(
            "vm",
            "created" if change.type == "ADDED" else "deleted",
            labels.get(LABEL_MACHINE, ""),
            labels.get(LABEL_MACHINE_UID, ""),
            t=change.at,
            vm=change.key[1],
        )

    # --- the driver's call log ------------------------------------------------------------------

    def tail_call_log(self, path: str, interval: float = 0.05) -> None:
        """Read ``path`` (the driver's call log) in a background thread every ``interval`` s."""
        self.call_log = path
        if self._tail is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval):
                self.read_call_log()

        self._tail = threading.Thread(target=loop, name="chaos-call-log", daemon=True)
        self._tail.start()

    def read_call_log(self) -> None:
        """Turn the call log's new complete lines into ``call`` events."""
        if not self.call_log or not os.path.exists(self.call_log):
            return
        with self._lock:
            with open(self.call_log, "rb") as handle:
                handle.seek(self._call_offset)
                chunk = handle.read()
            self._call_offset += len(chunk)
            data = self._partial + chunk
            lines = data.split(b"\n")
            self._partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            self.record(
                "call",
                f"{entry.pop('op', '?')}:{entry.pop('phase', '?')}",
                entry.pop("machine", ""),
                entry.pop("uid", ""),
                t=float(entry.pop("t")),
                **entry,
            )

    # --- views for reports ----------------------------------------------------------------------

    def history(self, machine: str, uid: str = "", limit: int = 80) -> list[str]:
        """Everything that happened to one machine (its versions, VMs, driver calls, its node,
        and the faults and processes around it), as lines in time order."""
        events = self.events()
        owners = {e.key for e in events if e.source == "vm" and e.data.get("vm") == machine}
        if owners and not any(e.source == "machine" and e.key == machine for e in events):
            machine, uid = owners.pop(), ""  # a VM or Node name: show its Machine's history
        vms = {str(e.data.get("vm")) for e in events if e.source == "vm" and e.key == machine}
        nodes = {str(e.data.get("node")) for e in events if e.source == "machine" and e.key == machine}
        nodes |= vms
        relevant = [
            e
            for e in events
            if (
                e.source in ("machine", "vm", "call") and e.key == machine and (not uid or e.uid in ("", uid))
            )
            or (e.source == "node" and e.key in nodes)
            or e.source in ("fault", "process", "scenario")
        ]
        relevant.sort(key=lambda e: e.t)
        mine = [i for i, e in enumerate(relevant) if e.source not in ("fault", "process", "scenario")]
        if mine:
            relevant = relevant[max(0, mine[0] - 5) : mine[-1] + 6]
        lines = [e.describe(self.origin) for e in relevant]
        if len(lines) > limit:
            lines = [*lines[: limit // 2], f"... {len(lines) - limit} lines ...", *lines[-limit // 2 :]]
        return lines

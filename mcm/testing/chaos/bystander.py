"""The bystander: another controller that writes to the same objects as the machine controller.

Every ``interval`` seconds :class:`Bystander` picks one of the run's Machines, Nodes, Secrets or
MachineClasses and adds one mark of its own: its finalizer (once per object), a new label or a
new annotation, all under :data:`~mcm.testing.chaos.tracker.BYSTANDER_PREFIX`. It never changes
or removes a mark, except its finalizer on an object being deleted, which it releases as a
well-behaved controller does (so deletions still finish). Each write is a compare-and-swap on
the emulator's store, so the machine controller's own writes race with it for real.

Each successful write is recorded on the tracker (``bystander``/``marked`` or ``unmarked``,
with the object's UID and the resourceVersion the write produced); the ``bystander`` invariant
then demands every mark on every later version of the object.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable
from typing import Any

from mcm.runtime.objects import Obj
from mcm.testing.chaos.tracker import BYSTANDER_PREFIX, Tracker, object_id

__all__ = ["FINALIZER", "Bystander"]

FINALIZER = f"{BYSTANDER_PREFIX}guard"
MAX_MARKS = 4
"""Labels (and, separately, annotations) the bystander adds to one object at most."""


class Bystander:
    """Marks objects of ``control`` (namespace ``namespace``) and ``target``; see the module docstring."""

    def __init__(
        self,
        tracker: Tracker,
        control: Any,
        target: Any,
        namespace: str,
        *,
        seed: int = 0,
        interval: float = 0.25,
    ) -> None:
        self.tracker = tracker
        self.namespace = namespace
        self.interval = interval
        self.writes = 0
        self._random = random.Random(seed)
        self._kinds: list[tuple[Any, str, str]] = [
            (control, "machines.machine.sapcloud.io", namespace),
            (control, "machineclasses.machine.sapcloud.io", namespace),
            (control, "secrets", namespace),
            (target, "nodes", ""),
        ]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counter = 0

    def start(self) -> Bystander:
        """Write in a background thread until :meth:`stop`."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="chaos-bystander", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop writing (marks stay)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # an object gone between list and write
                self.step()

    # --- one step -------------------------------------------------------------------------------

    def step(self) -> None:
        """Release the finalizer of objects being deleted, then add one mark somewhere."""
        self.release_deleting()
        emulator, resource, namespace = self._random.choice(self._kinds)
        candidates = [o for o in emulator.list(resource, namespace or None) if self._wanted(resource, o)]
        if not candidates:
            return
        obj = self._random.choice(candidates)
        self._mark(emulator, resource, obj)

    def _wanted(self, resource: str, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return False
        return resource != "secrets" or str(meta.get("name", "")).startswith("chaos-")

    def release_deleting(self, everything: bool = False) -> int:
        """Remove the bystander finalizer from objects being deleted (from all, with
        ``everything``); returns how many were released."""
        released = 0
        for emulator, resource, namespace in self._kinds:
            for obj in emulator.list(resource, namespace or None):
                meta = obj.get("metadata") or {}
                if FINALIZER in (meta.get("finalizers") or []) and (
                    everything or meta.get("deletionTimestamp")
                ):
                    with contextlib.suppress(Exception):
                        self._release(emulator, resource, obj)
                        released += 1
        return released

    def _mark(self, emulator: Any, resource: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        choice = self._random.random()
        self._counter += 1
        if choice < 0.3 and FINALIZER not in (meta.get("finalizers") or []):
            mark = f"f:{FINALIZER}"
            change: Callable[[Obj], Obj] = lambda o: _with_finalizer(o, FINALIZER)  # noqa: E731
        elif choice < 0.65 and _count(meta.get("labels")) < MAX_MARKS:
            key, value = f"{BYSTANDER_PREFIX}l{self._counter}", f"v{self._counter}"
            mark = f"l:{key}={value}"
            change = lambda o: _with_map_entry(o, "labels", key, value)  # noqa: E731
        elif _count(meta.get("annotations")) < MAX_MARKS:
            key, value = f"{BYSTANDER_PREFIX}a{self._counter}", f"note {self._counter}"
            mark = f"a:{key}={value}"
            change = lambda o: _with_map_entry(o, "annotations", key, value)  # noqa: E731
        else:
            return
        written = self._write(emulator, resource, meta, change)
        if written is not None:
            self.tracker.record(
                "bystander",
                "marked",
                object_id(resource, written),
                _uid(written),
                rv=int(written["metadata"]["resourceVersion"]),
                marks=[mark],
            )

    def _release(self, emulator: Any, resource: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        ident, uid = object_id(resource, obj), _uid(obj)
        written = self._write(emulator, resource, meta, lambda o: _without_finalizer(o, FINALIZER))
        if written is not None:
            rv = int(written["metadata"]["resourceVersion"])
            self.tracker.record("bystander", "unmarked", ident, uid, rv=rv, marks=[f"f:{FINALIZER}"])

    def _write(self, emulator: Any, resource: str, meta: Obj, change: Callable[[Obj], Obj]) -> Obj | None:
        """Apply ``change`` to the object ``meta`` names, only if its UID is still the same."""
        rt = emulator.resource_type(resource)
        uid = meta.get("uid")

        def mutate(current: Obj) -> Obj:
            if (current.get("metadata") or {}).get("uid") != uid:
                raise LookupError("replaced")
            return change(current)

        result = emulator.storage.guaranteed_update(rt, meta.get("namespace", ""), meta["name"], mutate)
        self.writes += 1
        if not result.committed:
            return None
        obj: Obj = result.obj
        return obj


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _count(values: Any) -> int:
    return sum(1 for k in (values or {}) if str(k).startswith(BYSTANDER_PREFIX))


def _with_finalizer(obj: Obj, finalizer: str) -> Obj:
    meta = dict(obj["metadata"])
    meta["finalizers"] = [*(meta.get("finalizers") or []), finalizer]
    return {**obj, "metadata": meta}


def _without_finalizer(obj: Obj, finalizer: str) -> Obj:
    meta = dict(obj["metadata"])
    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != finalizer]
    return {**obj, "metadata": meta}


def _with_map_entry(obj: Obj, field: str, key: str, value: str) -> Obj:
    meta = dict(obj["metadata"])
    meta[field] = {**(meta.get(field) or {}), key: value}
    return {**obj, "metadata": meta}

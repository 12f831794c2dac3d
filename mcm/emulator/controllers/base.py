"""Plumbing shared by the simulated controllers: a reaction queue, a UID index and a timer thread.

Guarantees:

- :class:`Reactor` subscribes once to the store's post-commit hook. Controllers register handlers
  that look at each committed :class:`~mcm.emulator.store.Change` and *defer* work under a key.
  Deferred work runs right after the triggering commit, still under the store lock and before
  the triggering request is answered (synchronous mode), but never recursively: commits made by
  deferred work only queue more work, which the same drain loop runs. Work deferred twice under
  one key before it runs runs once. A failing reaction is logged and never reaches the request
  that triggered it.
- :class:`UidIndex` maps every live object's ``metadata.uid`` to where it is stored, and every
  owner UID to its dependents, updated by the reactor before any handler runs.
- :class:`Scheduler` runs callbacks at clock deadlines on one daemon thread (works with
  ``FakeClock``); each callback runs inside a reactor drain, under the store lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from mcm.emulator.store import Obj
from mcm.runtime.clock import Clock

if TYPE_CHECKING:
    from mcm.emulator.registry import ResourceType
    from mcm.emulator.storage import Storage
    from mcm.emulator.store import Change

__all__ = ["ObjectRef", "Reactor", "Scheduler", "UidIndex"]

log = structlog.get_logger(__name__)

Handler = Callable[["Change"], None]


@dataclass(frozen=True)
class ObjectRef:
    """Where one object lives: store key (resource) and ``(namespace, name)``."""

    resource: str
    namespace: str
    name: str


class UidIndex:
    """Live objects by UID and dependents by owner UID (maintained from committed changes)."""

    def __init__(self) -> None:
        self.objects: dict[str, ObjectRef] = {}
        self.dependents: dict[str, set[ObjectRef]] = {}
        self._owners: dict[ObjectRef, tuple[str, ...]] = {}

    def observe(self, resource: str, obj: Obj, deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        ref = ObjectRef(resource, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        uid = meta.get("uid")
        for owner in self._owners.pop(ref, ()):
            bucket = self.dependents.get(owner)
            if bucket is not None:
                bucket.discard(ref)
                if not bucket:
                    del self.dependents[owner]
        if deleted:
            if uid and self.objects.get(uid) == ref:
                del self.objects[uid]
            return
        if uid:
            self.objects[uid] = ref
        owners = tuple(
            str(o["uid"]) for o in meta.get("ownerReferences") or [] if isinstance(o, dict) and o.get("uid")
        )
        if owners:
            self._owners[ref] = owners
            for owner in owners:
                self.dependents.setdefault(owner, set()).add(ref)

    def forget_resource(self, resource: str) -> None:
        """Drop every entry of a resource whose data is gone (a deleted CRD's objects)."""
        for uid, ref in list(self.objects.items()):
            if ref.resource == resource:
                del self.objects[uid]
        for ref in [r for r in self._owners if r.resource == resource]:
            self.observe(resource, {"metadata": {"namespace": ref.namespace, "name": ref.name}}, deleted=True)

    def dependents_of(self, uid: str) -> list[ObjectRef]:
        return sorted(self.dependents.get(uid, ()), key=lambda r: (r.resource, r.namespace, r.name))


class Reactor:
    """Runs controller reactions after commits, de-duplicated by key, without recursion."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.index = UidIndex()
        self._handlers: list[Handler] = []
        self._pending: OrderedDict[Hashable, Callable[[], None]] = OrderedDict()
        self._draining = False
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        """Index the existing objects and subscribe to commits."""
        store = self.storage.store
        with store.lock:
            for resource in store.resources():
                for stored in store.items(resource):
                    self.index.observe(resource, stored.obj, deleted=False)
            if self._unsubscribe is None:
                self._unsubscribe = store.subscribe(self._on_change)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def defer(self, key: Hashable, work: Callable[[], None]) -> None:
        """Queue ``work`` (call with the store lock held, e.g. from a handler)."""
        self._pending.pop(key, None)
        self._pending[key] = work

    def run(self, key: Hashable, work: Callable[[], None]) -> None:
        """Queue ``work`` and drain now (any thread); used by timers and explicit triggers."""
        with self.storage.store.lock:
            self.defer(key, work)
            self._drain()

    def flush(self) -> None:
        """Run all queued work now (any thread)."""
        with self.storage.store.lock:
            self._drain()

    def rt(self, resource: str) -> ResourceType | None:
        return self.storage.registry.by_storage(resource)

    def _on_change(self, change: Change) -> None:
        self.index.observe(change.resource, change.new.obj, deleted=change.type == "DELETED")
        for handler in self._handlers:
            try:
                handler(change)
            except Exception:
                log.exception("controller_handler_failed", resource=change.resource, type=change.type)
        self._drain()

    def _drain(self) -> None:
        if self._draining:
            return
        self._draining = True
        try:
            while self._pending:
                key, work = self._pending.popitem(last=False)
                try:
                    work()
                except Exception:
                    log.exception("controller_reaction_failed", key=str(key))
        finally:
            self._draining = False


class Scheduler:
    """Calls ``callback()`` at clock deadlines on one daemon thread; cancellable by key."""

    def __init__(self, clock: Clock, name: str = "emulator-scheduler") -> None:
        self.clock = clock
        self._name = name
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, Hashable]] = []
        self._entries: dict[Hashable, tuple[float, int, Callable[[], None]]] = {}
        self._counter = itertools.count()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopped.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)

    def schedule(self, key: Hashable, delay: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` after ``delay`` clock seconds, replacing any entry with the same key."""
        deadline = self.clock.monotonic() + max(0.0, delay)
        with self._lock:
            seq = next(self._counter)
            self._entries[key] = (deadline, seq, callback)
            heapq.heappush(self._heap, (deadline, seq, key))
        self._wake.set()

    def schedule_once(self, key: Hashable, delay: float, callback: Callable[[], None]) -> None:
        """Like :meth:`schedule` but keeps an earlier existing deadline for ``key``."""
        deadline = self.clock.monotonic() + max(0.0, delay)
        with self._lock:
            existing = self._entries.get(key)
            if existing is not None and existing[0] <= deadline:
                return
        self.schedule(key, delay, callback)

    def cancel(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def pending(self) -> int:
        with self._lock:
            return len(self._entries)

    def _pop_due(self) -> tuple[list[Callable[[], None]], float | None]:
        now = self.clock.monotonic()
        due: list[Callable[[], None]] = []
        with self._lock:
            while self._heap:
                deadline, seq, key = self._heap[0]
                entry = self._entries.get(key)
                if entry is None or entry[1] != seq:
                    heapq.heappop(self._heap)
                    continue
                if deadline > now:
                    return due, deadline - now
                heapq.heappop(self._heap)
                del self._entries[key]
                due.append(entry[2])
        return due, None

    def _run(self) -> None:
        while not self._stopped.is_set():
            due, delay = self._pop_due()
            for callback in due:
                try:
                    callback()
                except Exception:
                    log.exception("scheduled_callback_failed")
            if due:
                continue
            self.clock.wait(self._wake, delay)
            self._wake.clear()

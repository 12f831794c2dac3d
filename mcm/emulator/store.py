"""VersionedStore: the emulator's etcd plus watch cache.

One store per emulator (one cluster). It keeps, per resource (storage key such as ``pods`` or
``machines.machine.sapcloud.io``), the current objects, a bounded history of changes and a
compaction floor; one global resourceVersion counter orders every commit.

Guarantees:

- One ``RLock`` (``store.lock``) guards objects, history, floors and watcher registration.
  Holding it makes a sequence of reads and commits one atomic transaction
  (``with store.transaction(): ...``); it is re-entrant, so post-commit hooks may commit too.
- History is bounded per resource by ``history_size`` events and, optionally, ``history_age``
  seconds (off by default; upstream's watch cache keeps about 75 s). Events leaving it raise
  the resource's floor.
- Every commit takes the next RV, records ``(rv, type, key, new, old)`` in the resource's history
  and offers the change to that resource's watchers and to every hook, in RV order, while the
  lock is held. Watchers and hooks must not block or do I/O.
- Committed object dicts are never mutated. :class:`Stored` wraps one object version with its RV
  and caches its JSON encoding, so lists, GETs and watch events reuse the bytes. Write responses
  encode their own copy, so versions nobody reads or watches hold no bytes (memory:
  benchmarks/emulator.py, P4).
  Encodings (of a stored object, and of a change's watch line per event type) are computed at most
  once, by whichever thread asks first, outside the store lock (watch threads, readers); a small
  encoding lock makes concurrent first requests wait instead of encoding twice.
- ``commit(..., expect=s)`` succeeds only if the current version is exactly ``s`` (``None`` = the
  key is absent); otherwise it raises :class:`StaleObjectError` and changes nothing. This is the
  compare-and-swap that update loops retry on.
- A read or watch "at RV N" is possible iff ``N >= floor(resource)``; older ones are expired.
- Secondary indexes (``add_index``) are updated in the same commit as the objects.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

__all__ = [
    "MAX_OBJECT_BYTES",
    "Change",
    "ChangeType",
    "Obj",
    "ObjectTooLarge",
    "StaleObjectError",
    "Stored",
    "VersionedStore",
    "WatcherSink",
    "encode",
]

Obj = dict[str, Any]
"""An API object as JSON: the one alias of the emulator's modules (the emulator imports nothing
from ``mcm.runtime`` but the clock and labels, so not :data:`mcm.runtime.objects.Obj`)."""
Key = tuple[str, str]
ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]


def encode(value: Any) -> bytes:
    """Compact JSON bytes (no raw newlines, UTF-8; lone surrogates are escaped). orjson when it can
    (it is several times faster, and every stored object is encoded at least once); the standard
    library for what orjson refuses (lone surrogates, integers beyond 64 bits, non-string keys)."""
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        pass
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


_ENCODING = threading.RLock()
"""Taken only on a cache miss, so each encoding is computed once even when threads race for it."""


class Stored:
    """One committed, immutable object version with its RV and cached encodings."""

    __slots__ = ("_full", "_item", "obj", "rv")

    def __init__(self, obj: Obj, rv: int) -> None:
        self.obj = obj
        self.rv = rv
        self._item: bytes | None = None
        self._full: bytes | None = None

    @property
    def key(self) -> Key:
        """``(namespace, name)``."""
        meta = self.obj["metadata"]
        return (meta.get("namespace", ""), meta["name"])

    def item(self) -> bytes:
        """The encoding without ``kind``/``apiVersion`` (list items of built-in kinds)."""
        cached = self._item
        if cached is None:
            with _ENCODING:
                cached = self._item
                if cached is None:
                    cached = encode({k: v for k, v in self.obj.items() if k not in ("kind", "apiVersion")})
                    self._item = cached
        return cached

    def full(self) -> bytes:
        """The encoding with ``kind`` and ``apiVersion`` first."""
        cached = self._full
        if cached is None:
            with _ENCODING:
                cached = self._full
                if cached is None:
                    head = b'{"kind":' + encode(self.obj.get("kind", "")) + b',"apiVersion":'
                    head += encode(self.obj.get("apiVersion", ""))
                    body = self.item()
                    cached = head + (b"," + body[1:] if body != b"{}" else b"}")
                    self._full = cached
        return cached


def with_resource_version(obj: Obj, rv: int) -> Obj:
    """A shallow copy of ``obj`` whose ``metadata.resourceVersion`` is ``rv``."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


@dataclass(eq=False)
class Change:
    """One committed change. For DELETED, ``new`` is the last state carrying the deletion RV."""

    rv: int
    type: ChangeType
    resource: str
    key: Key
    new: Stored
    old: Stored | None
    at: float = 0.0
    """Monotonic time of the commit (for the optional history age limit)."""
    _lines: dict[str, bytes] = field(default_factory=dict)
    _old_at_rv: Stored | None = None

    def old_at_rv(self) -> Stored:
        """The previous state stamped with this change's RV (for selector-exit DELETED events)."""
        with _ENCODING:
            if self._old_at_rv is None:
                base = self.old.obj if self.old is not None else self.new.obj
                self._old_at_rv = Stored(with_resource_version(base, self.rv), self.rv)
            return self._old_at_rv

    def line(self, event_type: str) -> bytes:
        """The watch line for this change delivered as ``event_type`` (memoised per type)."""
        cached = self._lines.get(event_type)
        if cached is None:
            with _ENCODING:
                cached = self._lines.get(event_type)
                if cached is None:
                    deleted = event_type == "DELETED" and self.type != "DELETED"
                    stored = self.old_at_rv() if deleted else self.new
                    cached = b'{"type":"' + event_type.encode() + b'","object":' + stored.full() + b"}\n"
                    self._lines[event_type] = cached
        return cached


class StaleObjectError(Exception):
    """The object changed since the caller read it (compare-and-swap failed)."""


MAX_OBJECT_BYTES = 3 * 512 * 1024
"""etcd's default request limit (1.5 MiB): no stored object may encode to more."""


class ObjectTooLarge(Exception):
    """A write whose object encodes to more than :data:`MAX_OBJECT_BYTES` (nothing is committed)."""


class WatcherSink(Protocol):
    """What the store needs from a watcher: a non-blocking ``offer`` of each change."""

    def offer(self, change: Change) -> None: ...

    def close(self, reason: str, mode: str = "close") -> None: ...


Hook = Callable[[Change], None]


IndexFn = Callable[[Obj], str | None]


class _Index:
    __slots__ = ("buckets", "key_of")

    def __init__(self, key_of: IndexFn) -> None:
        self.key_of = key_of
        self.buckets: dict[str, set[Key]] = {}

    def update(self, key: Key, old: Obj | None, new: Obj | None) -> None:
        before = None if old is None else self.key_of(old)
        after = None if new is None else self.key_of(new)
        if before == after:
            return
        if before is not None:
            bucket = self.buckets.get(before)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self.buckets[before]
        if after is not None:
            self.buckets.setdefault(after, set()).add(key)


class _Resource:
    __slots__ = ("floor", "history", "indexes", "objects", "sorted_keys", "watchers")

    def __init__(self, floor: int) -> None:
        self.objects: dict[Key, Stored] = {}
        self.sorted_keys: list[Key] | None = []
        self.history: deque[Change] = deque()
        self.floor = floor
        self.watchers: set[WatcherSink] = set()
        self.indexes: dict[str, _Index] = {}

    def keys_in_order(self) -> list[Key]:
        if self.sorted_keys is None:
            self.sorted_keys = sorted(self.objects)
        return self.sorted_keys


class VersionedStore:
    """Objects, global RV, per-resource history and floors, watcher registry."""

    def __init__(
        self, base_rv: int = 1, history_size: int = 10_000, history_age: float | None = None
    ) -> None:
        self.lock = threading.RLock()
        self._rv = base_rv
        self._base = base_rv
        self.history_size = history_size
        self.history_age = history_age
        self._resources: dict[str, _Resource] = {}
        self._hooks: list[Hook] = []
        self._changed = threading.Condition(self.lock)

    # ------------------------------------------------------------------ reads

    @property
    def rv(self) -> int:
        """The current global resourceVersion."""
        return self._rv

    def _res(self, resource: str) -> _Resource:
        data = self._resources.get(resource)
        if data is None:
            data = self._resources[resource] = _Resource(self._base)
        return data

    def get(self, resource: str, namespace: str, name: str) -> Stored | None:
        """The current version of one object, or None."""
        data = self._resources.get(resource)
        return None if data is None else data.objects.get((namespace, name))

    def items(self, resource: str, namespace: str | None = None) -> list[Stored]:
        """Current objects in ``(namespace, name)`` order, optionally of one namespace."""
        with self.lock:
            data = self._resources.get(resource)
            if data is None:
                return []
            objects = data.objects
            keys = data.keys_in_order()
            if namespace is None:
                return [objects[k] for k in keys]
            return [objects[k] for k in keys if k[0] == namespace]

    def add_index(self, resource: str, name: str, key_of: IndexFn) -> None:
        """Maintain a secondary index ``name`` over ``resource`` (e.g. pods by ``spec.nodeName``)."""
        with self.lock:
            data = self._res(resource)
            index = _Index(key_of)
            for key, stored in data.objects.items():
                index.update(key, None, stored.obj)
            data.indexes[name] = index

    def items_by_index(
        self, resource: str, name: str, value: str, namespace: str | None = None
    ) -> list[Stored] | None:
        """Current objects whose index ``name`` equals ``value``, in key order; None if no such index."""
        with self.lock:
            data = self._resources.get(resource)
            index = None if data is None else data.indexes.get(name)
            if data is None or index is None:
                return None
            keys = sorted(index.buckets.get(value, ()))
            return [data.objects[k] for k in keys if namespace is None or k[0] == namespace]

    def floor(self, resource: str) -> int:
        """The oldest RV from which this resource can still be read or watched."""
        data = self._resources.get(resource)
        return self._base if data is None else data.floor

    def items_at(self, resource: str, rv: int, namespace: str | None = None) -> list[Stored]:
        """The objects as they were at ``rv`` (requires ``rv >= floor``, else ``ValueError``)."""
        with self.lock:
            data = self._res(resource)
            if rv < data.floor:
                raise ValueError("too old")
            objects = dict(data.objects)
            for change in reversed(data.history):
                if change.rv <= rv:
                    break
                if change.type == "ADDED":
                    objects.pop(change.key, None)
                elif change.old is not None:
                    objects[change.key] = change.old
        keys = sorted(objects)
        if namespace is not None:
            keys = [k for k in keys if k[0] == namespace]
        return [objects[k] for k in keys]

    def changes_since(self, resource: str, rv: int) -> list[Change]:
        """Retained changes with RV > ``rv`` (caller checked the floor), oldest first."""
        with self.lock:
            data = self._res(resource)
            result: list[Change] = []
            for change in reversed(data.history):
                if change.rv <= rv:
                    break
                result.append(change)
            result.reverse()
            return result

    def history(self, resource: str) -> list[Change]:
        """All retained changes of a resource, oldest first."""
        with self.lock:
            return list(self._res(resource).history)

    def resources(self) -> list[str]:
        """Every storage key that has held data."""
        with self.lock:
            return list(self._resources)

    # ------------------------------------------------------------------ writes

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the store lock: reads and commits inside are one atomic step."""
        with self.lock:
            yield

    def commit(self, resource: str, change_type: ChangeType, obj: Obj, expect: Stored | None) -> Change:
        """Write ``obj`` (or delete its key when ``change_type`` is DELETED) at the next RV.

        ``expect`` must be the current version (None: the key must be absent, except DELETED);
        otherwise :class:`StaleObjectError`. The stored object gets ``metadata.resourceVersion``.
        """
        meta = obj["metadata"]
        key: Key = (meta.get("namespace", ""), meta["name"])
        if change_type != "DELETED" and len(encode(obj)) > MAX_OBJECT_BYTES:
            raise ObjectTooLarge(f"{resource} {key}")
        with self.lock:
            data = self._res(resource)
            current = data.objects.get(key)
            if current is not expect:
                raise StaleObjectError(f"{resource} {key}")
            if change_type == "DELETED" and current is None:
                raise StaleObjectError(f"{resource} {key} is gone")
            rv = self._rv + 1
            self._rv = rv
            stored = Stored(with_resource_version(obj, rv), rv)
            if change_type == "DELETED":
                del data.objects[key]
                data.sorted_keys = None
            else:
                if current is None:
                    data.sorted_keys = None
                data.objects[key] = stored
            for index in data.indexes.values():
                index.update(
                    key, None if current is None else current.obj, None if change_type == "DELETED" else obj
                )
            change = Change(rv, change_type, resource, key, stored, current, time.monotonic())
            self._record(data, change)
            return change

    def _record(self, data: _Resource, change: Change) -> None:
        data.history.append(change)
        while len(data.history) > self.history_size:
            data.floor = max(data.floor, data.history.popleft().rv)
        if self.history_age is not None:
            oldest = change.at - self.history_age
            while data.history and data.history[0].at < oldest:
                data.floor = max(data.floor, data.history.popleft().rv)
        for watcher in list(data.watchers):
            watcher.offer(change)
        for hook in list(self._hooks):
            hook(change)
        self._changed.notify_all()

    def compact(self, rv: int | None = None) -> None:
        """Raise every resource's floor to ``rv`` (default: the current RV)."""
        with self.lock:
            target = self._rv if rv is None else min(rv, self._rv)
            self._base = max(self._base, target)
            for data in self._resources.values():
                data.floor = max(data.floor, target)
                while data.history and data.history[0].rv <= data.floor:
                    data.history.popleft()

    def drop(self, resource: str) -> None:
        """Forget a resource entirely (its CRD is gone); its watchers are closed."""
        with self.lock:
            data = self._resources.pop(resource, None)
            if data is None:
                return
            for watcher in list(data.watchers):
                watcher.close("resource_removed")

    # ------------------------------------------------------------------ subscriptions

    def add_watcher(self, resource: str, watcher: WatcherSink) -> None:
        """Start offering ``resource``'s changes to ``watcher`` (call under the lock)."""
        with self.lock:
            self._res(resource).watchers.add(watcher)

    def remove_watcher(self, resource: str, watcher: WatcherSink) -> None:
        """Stop offering changes to ``watcher``."""
        with self.lock:
            data = self._resources.get(resource)
            if data is not None:
                data.watchers.discard(watcher)

    def watchers(self, resource: str | None = None) -> list[WatcherSink]:
        """Registered watchers, of one resource or of all."""
        with self.lock:
            if resource is not None:
                data = self._resources.get(resource)
                return [] if data is None else list(data.watchers)
            return [w for d in self._resources.values() for w in d.watchers]

    def subscribe(self, hook: Hook) -> Callable[[], None]:
        """Call ``hook(change)`` after every commit, under the lock; return an unsubscribe function."""
        with self.lock:
            self._hooks.append(hook)

        def unsubscribe() -> None:
            with self.lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return unsubscribe

    def wait_changed(self, timeout: float) -> None:
        """Block (holding nothing afterwards) until the next commit or ``timeout`` seconds."""
        with self.lock:
            self._changed.wait(timeout)

    def wait_for_rv(self, rv: int, timeout: float) -> bool:
        """Block until the global RV reaches ``rv`` or ``timeout`` seconds pass."""
        with self.lock:
            return self._changed.wait_for(lambda: self._rv >= rv, timeout)

"""The mutation cache (client-go ``cache.NewIntegerResourceVersionMutationCache``).

A controller that writes an object and then reads it back from its informer cache can see the
copy from before its own write: the watch event has not arrived yet. The mutation cache keeps
the objects the API server returned for the controller's writes (``mutation``) and serves, for
each key, the newer of that copy and the informer's, by integer ``resourceVersion``.

Guarantees (client-go's):

- :meth:`MutationCache.get_by_key`, :meth:`MutationCache.list` and :meth:`MutationCache.by_index`
  return, per object, the newer of the backing store's copy and the last mutation recorded for
  its key; a mutation that the backing store has caught up with (equal or newer
  ``resourceVersion``) is dropped on read.
- A key missing from the backing store is reported missing (one cannot tell "create not seen
  yet" from "deleted since"), unless ``include_adds`` is set; then the mutation is returned.
- Recording never replaces a newer mutation with an older one. Entries expire ``ttl`` seconds
  after they were recorded (on the injectable clock) and the least recently used entry is
  evicted beyond ``max_entries`` (client-go: 100); so a read is only ever *at least as new as the
  backing store*, never guaranteed to hold the recorded write. Recording also drops the expired
  entries at the least recently used end.
- :meth:`MutationCache.observe` (to be called by an informer event handler with the object the
  informer delivered, which its store already holds) drops a mutation that copy has caught up
  with, and :meth:`MutationCache.forget` one whose object was deleted; a write whose answer the
  store already holds (the watch was faster than the answer) is not recorded. So a write's
  answer is kept only while the informer lags behind it, not until it expires or is read
  (client-go keeps it; at thousands of objects those copies were a third of the cache's memory).
- A ``resourceVersion`` that is not an unsigned integer (client-go panics: a coder error) is
  reported through :func:`~mcm.runtime.errors.handle_error` and the backing copy wins; a written
  object without a name or with such a version is not recorded.
- The defaults suit a controller of thousands of objects: 60 s and 10,000 entries (client-go
  keeps 100, fewer than a large fleet writes between two informer deliveries).

:class:`MutationLister` is a namespace lister whose ``get`` reads through the cache
(:class:`MutationClusterLister` the same for a cluster-scoped resource);
:class:`RecordingRESTClient` is a REST client that records what its writes return.
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from typing import Any

from mcm.runtime.cache.keys import deletion_handling_meta_namespace_key_func
from mcm.runtime.cache.listers import Lister, NamespaceLister, new_not_found
from mcm.runtime.cache.store import Indexer
from mcm.runtime.client.rest import PatchKind, RESTClient
from mcm.runtime.client.types import Object
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import handle_error

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MUTATION_TTL",
    "MutationCache",
    "MutationClusterLister",
    "MutationLister",
    "RecordingRESTClient",
    "compare_resource_versions",
]

DEFAULT_MUTATION_TTL = 60.0
"""Seconds a recorded write is served while the informer lags (an informer that lags a minute
has bigger problems; after that the cache is trusted again)."""

DEFAULT_MAX_ENTRIES = 10_000
"""Entries kept (client-go: 100)."""


def _resource_version(obj: Any) -> int:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not version:
        return 0
    if not isinstance(version, str) or not version.isdigit():
        raise ValueError(f"resourceVersion {version!r} is not an unsigned integer")
    return int(version)


def compare_resource_versions(lhs: Any, rhs: Any) -> int:
    """-1, 0 or 1 as ``lhs``'s integer resourceVersion is below, equal to or above ``rhs``'s
    (an empty one counts as 0); ``ValueError`` when one is not an integer."""
    left, right = _resource_version(lhs), _resource_version(rhs)
    return (left > right) - (left < right)


class _LRUExpireCache:
    """apimachinery's ``LRUExpireCache``: a bounded LRU whose entries expire. Not locked."""

    def __init__(self, max_entries: int, clock: Clock) -> None:
        self._max = max(1, max_entries)
        self._clock = clock
        self._entries: OrderedDict[str, tuple[Any, float]] = OrderedDict()

    def get(self, key: str) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._clock.monotonic() > entry[1]:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def add(self, key: str, value: Any, ttl: float) -> None:
        now = self._clock.monotonic()
        self._entries[key] = (value, now + ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        for _ in range(2):  # two expired entries at the LRU end go per add: they never pile up
            if not self._entries:
                break
            oldest = next(iter(self._entries.items()))
            if oldest[1][1] >= now:
                break
            del self._entries[oldest[0]]

    def peek(self, key: str) -> Any | None:
        """The entry for ``key`` (expired or not) without touching its recency."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def remove(self, key: str) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def keys_oldest_first(self) -> list[str]:
        """Keys from least to most recently used (expired ones included, as upstream)."""
        return list(self._entries)


class MutationCache:
    """See the module docstring. Thread-safe."""

    def __init__(
        self,
        backing: Indexer,
        ttl: float = DEFAULT_MUTATION_TTL,
        *,
        include_adds: bool = False,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self._backing = backing
        self._ttl = ttl
        self._include_adds = include_adds
        self._lock = threading.Lock()
        self._mutations = _LRUExpireCache(max_entries, clock)

    def get_by_key(self, key: str) -> Any | None:
        """The newer of the backing copy and the recorded mutation; ``None`` when missing."""
        with self._lock:
            obj = self._backing.get_by_key(key)
            if obj is None:
                return self._mutations.get(key) if self._include_adds else None
            return self._newer(key, obj)

    def list(self) -> builtins.list[Any]:
        """Every object of the backing store, each the newer of its copy and its mutation
        (with ``include_adds``, recorded objects the store does not hold yet as well)."""
        with self._lock:
            keys = self._backing.list_keys()
            items = []
            for key in keys:
                obj = self._backing.get_by_key(key)
                if obj is not None:
                    items.append(self._newer(key, obj))
            if self._include_adds:
                seen = set(keys)
                items.extend(
                    obj
                    for key in self._mutations.keys_oldest_first()
                    if key not in seen and (obj := self._mutations.get(key)) is not None
                )
            return items

    def by_index(self, index_name: str, value: str) -> builtins.list[Any]:
        """The objects of an index value, each the newer of backing copy and mutation."""
        with self._lock:
            keys = self._backing.index_keys(index_name, value)
            items = []
            for key in keys:
                obj = self._backing.get_by_key(key)
                if obj is not None:
                    items.append(self._newer(key, obj))
            if self._include_adds:
                items.extend(self._added_in_index(index_name, value, set(keys)))
            return items

    def _added_in_index(self, index_name: str, value: str, seen: set[str]) -> builtins.list[Any]:
        index_func = self._backing.get_indexers()[index_name]
        added = []
        for key in self._mutations.keys_oldest_first():
            obj = self._mutations.get(key)
            if obj is None or key in seen:
                continue
            try:
                values = index_func(obj)
            except Exception:
                continue
            if value in values:
                added.append(obj)
        return added

    def mutation(self, obj: Any) -> None:
        """Record ``obj`` (the API server's answer to a write) unless a newer one is recorded."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or not meta.get("name"):
            return
        try:
            _resource_version(obj)
            key = deletion_handling_meta_namespace_key_func(obj)
        except Exception as err:
            handle_error(err)  # a "nice to have": a failure changes nothing
            return
        with self._lock:
            stored = self._backing.get_by_key(key)
            if stored is not None and self._not_newer(obj, stored):
                return  # the informer delivered it first: nothing to overlay
            recorded = self._mutations.get(key)
            if recorded is not None:
                try:
                    if compare_resource_versions(obj, recorded) < 0:
                        return
                except ValueError as err:
                    handle_error(err)
            self._mutations.add(key, obj, self._ttl)

    @staticmethod
    def _not_newer(obj: Any, stored: Any) -> bool:
        try:
            return compare_resource_versions(obj, stored) <= 0
        except ValueError:
            return False  # read() reports it

    def observe(self, obj: Any) -> None:
        """The informer delivered ``obj`` (its store holds it): drop the mutation of its key if
        ``obj`` is at least as new. Cheap enough for every event: a dict lookup under the lock."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or not meta.get("name"):
            return
        namespace = meta.get("namespace")
        key = f"{namespace}/{meta['name']}" if namespace else str(meta["name"])
        with self._lock:
            recorded = self._mutations.peek(key)
            if recorded is None:
                return
            try:
                caught_up = compare_resource_versions(obj, recorded) >= 0
            except ValueError:
                return  # read() reports it
            if caught_up:
                self._mutations.remove(key)

    def forget(self, obj: Any) -> None:
        """The informer saw ``obj`` (or its tombstone) deleted: drop its key's mutation."""
        try:
            key = deletion_handling_meta_namespace_key_func(obj)
        except Exception:  # a key that cannot be built was never recorded
            return
        with self._lock:
            self._mutations.remove(key)

    def __len__(self) -> int:
        """Recorded entries (expired ones included until they are read, evicted or swept)."""
        with self._lock:
            return len(self._mutations)

    def _newer(self, key: str, backing: Any) -> Any:
        """Must hold the lock. Drops a mutation the backing copy has caught up with."""
        mutated = self._mutations.get(key)
        if mutated is None:
            return backing
        try:
            backing_is_newer = compare_resource_versions(backing, mutated) >= 0
        except ValueError as err:
            handle_error(err)
            backing_is_newer = True
        if backing_is_newer:
            self._mutations.remove(key)
            return backing
        return mutated


class MutationLister(NamespaceLister):
    """A namespace lister whose :meth:`get` returns the newer of cache and recorded write."""

    def __init__(self, lister: Lister, namespace: str, mutations: MutationCache) -> None:
        super().__init__(lister, namespace)
        self._base = lister
        self.mutations = mutations

    def get(self, name: str) -> Object:
        key = f"{self.namespace}/{name}" if self.namespace else name
        obj: Object | None = self.mutations.get_by_key(key)
        if obj is None:
            raise new_not_found(self._base.group, self._base.resource, name)
        return obj


class MutationClusterLister(Lister):
    """A lister of a cluster-scoped resource whose :meth:`get` returns the newer of cache and
    recorded write (:class:`MutationLister` for namespaced ones)."""

    def __init__(self, lister: Lister, mutations: MutationCache) -> None:
        namespaced = lister.namespaced_resource
        super().__init__(lister.indexer, group=lister.group, resource=lister.resource, namespaced=namespaced)
        self.mutations = mutations

    def get(self, name: str) -> Object:
        obj: Object | None = self.mutations.get_by_key(name)
        if obj is None:
            raise new_not_found(self.group, self.resource, name)
        return obj


class RecordingRESTClient(RESTClient):
    """A REST client that records every object its create, update and patch calls return."""

    def __init__(self, client: RESTClient, mutations: MutationCache) -> None:
        super().__init__(client.transport, client.resource)
        self.mutations = mutations

    def _recorded(self, obj: Object) -> Object:
        self.mutations.mutation(obj)
        return obj

    def create(self, body: Object, *, namespace: str | None = None, subresource: str | None = None) -> Object:
        return self._recorded(super().create(body, namespace=namespace, subresource=subresource))

    def update(self, body: Object, *, namespace: str | None = None, subresource: str | None = None) -> Object:
        return self._recorded(super().update(body, namespace=namespace, subresource=subresource))

    def update_status(self, body: Object, *, namespace: str | None = None) -> Object:
        return self._recorded(super().update_status(body, namespace=namespace))

    def patch(
        self,
        name: str,
        body: Object | builtins.list[Object],
        *,
        kind: PatchKind = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        return self._recorded(
            super().patch(name, body, kind=kind, namespace=namespace, subresource=subresource)
        )

"""The newer of an informer's object and the object this process's own write returned
(client-go's ``cache.NewIntegerResourceVersionMutationCache``).

An informer delivers a write of ours some milliseconds after the API server answered it. A
reconcile that runs in between (another event, a requeue) reads the old object from the cache,
builds its next write on it and gets a 409 Conflict: a conflict the controller caused itself.
:class:`MutationCache` remembers what each write returned and serves it until the informer has
caught up.

Guarantees:

- :meth:`MutationCache.get_by_key` returns the backing indexer's object unless a recorded
  mutation of the same key has a higher integer ``metadata.resourceVersion``; then the mutation.
  Once the indexer holds the same or a newer version, the mutation is forgotten. So another
  writer's change is never hidden: a newer object in the cache always wins, and an object the
  cache has not seen yet at worst costs the 409 it would have cost anyway.
- A key missing from the indexer is missing (as client-go without ``includeAdds``: a deletion
  is not undone by an older mutation).
- Mutations expire after ``ttl`` seconds on the clock and at most ``max_entries`` are kept
  (oldest dropped first); non-integer resourceVersions are never compared (the indexer wins).
- Thread-safe; cached objects are shared and must not be mutated, like the indexer's.

:class:`MutationLister` is a namespace lister whose ``get`` reads through the cache;
:class:`RecordingRESTClient` is a REST client that records what its writes return.
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from typing import Any

from mcm.runtime.cache.keys import meta_namespace_key_func
from mcm.runtime.cache.listers import Lister, NamespaceLister, new_not_found
from mcm.runtime.cache.store import Indexer
from mcm.runtime.client.rest import PatchKind, RESTClient
from mcm.runtime.client.types import Object
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["DEFAULT_MUTATION_TTL", "MutationCache", "MutationLister", "RecordingRESTClient"]

DEFAULT_MUTATION_TTL = 60.0
"""Seconds a recorded write is served while the informer lags (an informer that lags a minute
has bigger problems; after that the cache is trusted again)."""

MAX_MUTATIONS = 10_000


def _resource_version(obj: Any) -> int | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(value, str) or not value.isdigit():
        return None
    return int(value)


class MutationCache:
    """Reads through ``indexer``, preferring newer objects that writes of this process returned."""

    def __init__(
        self,
        indexer: Indexer,
        *,
        ttl: float = DEFAULT_MUTATION_TTL,
        clock: Clock = REAL_CLOCK,
        max_entries: int = MAX_MUTATIONS,
    ) -> None:
        self._indexer = indexer
        self._ttl = ttl
        self._clock = clock
        self._max = max_entries
        self._lock = threading.Lock()
        self._mutations: OrderedDict[str, tuple[float, Object]] = OrderedDict()

    def mutation(self, obj: Object) -> None:
        """Record the object a write returned (ignored without a name or resourceVersion)."""
        if _resource_version(obj) is None or not (obj.get("metadata") or {}).get("name"):
            return
        key = meta_namespace_key_func(obj)
        with self._lock:
            self._mutations.pop(key, None)
            self._mutations[key] = (self._clock.monotonic(), obj)
            while len(self._mutations) > self._max:
                self._mutations.popitem(last=False)

    def get_by_key(self, key: str) -> Object | None:
        """The newer of the indexer's object and the recorded mutation; None if not cached."""
        cached = self._indexer.get_by_key(key)
        if cached is None:
            return None
        with self._lock:
            entry = self._mutations.get(key)
            if entry is None:
                return cached
            stamp, mutated = entry
            mutated_rv, cached_rv = _resource_version(mutated), _resource_version(cached)
            expired = self._ttl > 0 and self._clock.monotonic() - stamp > self._ttl
            if expired or mutated_rv is None or cached_rv is None or cached_rv >= mutated_rv:
                del self._mutations[key]
                return cached
            return mutated

    def __len__(self) -> int:
        with self._lock:
            return len(self._mutations)


class MutationLister(NamespaceLister):
    """A namespace lister whose :meth:`get` returns the newer of cache and recorded write."""

    def __init__(self, lister: Lister, namespace: str, mutations: MutationCache) -> None:
        super().__init__(lister, namespace)
        self._base = lister
        self.mutations = mutations

    def get(self, name: str) -> Object:
        key = f"{self.namespace}/{name}" if self.namespace else name
        obj = self.mutations.get_by_key(key)
        if obj is None:
            raise new_not_found(self._base.group, self._base.resource, name)
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

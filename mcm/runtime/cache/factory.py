"""SharedInformerFactory: one shared informer (and lister) per resource, started together.

Guarantees:

- :meth:`SharedInformerFactory.informer_for` returns the same informer for the same resource;
  requesting an informer or lister is what registers it, so do it before :meth:`start`.
- Every informer lists and watches only ``namespace`` (``None`` = all; ignored for
  cluster-scoped resources), with ``tweak_list_options`` applied to every list and watch, and
  registers the ``namespace`` index.
- :meth:`start` starts each requested informer that is not running yet, in its own thread;
  calling it again after requesting more informers starts only the new ones.
- :meth:`wait_for_cache_sync` waits for the started informers, one after another.
- :meth:`shutdown` (after ``stop`` is set) waits for every informer thread to end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from mcm.runtime.cache.listers import Lister
from mcm.runtime.cache.reflector import new_default_backoff_manager
from mcm.runtime.cache.shared_informer import SharedIndexInformer, new_namespace_indexers, wait_for_cache_sync
from mcm.runtime.client.listwatch import TweakListOptions, list_watch
from mcm.runtime.client.resources import Resource
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.wait import BackoffManager

__all__ = ["ResourceClientSource", "SharedInformerFactory"]


class ResourceClientSource(Protocol):
    """What the factory needs from a cluster client (``ClusterClient`` has it)."""

    def resource(self, resource: Resource) -> RESTClient: ...


class SharedInformerFactory:
    """Shared informers for one cluster client, namespace and list-option tweak."""

    def __init__(
        self,
        client: ResourceClientSource,
        namespace: str | None = None,
        resync: float = 0.0,
        tweak_list_options: TweakListOptions | None = None,
        *,
        custom_resync: dict[Resource, float] | None = None,
        clock: Clock = REAL_CLOCK,
        new_backoff_manager: Callable[[Clock], BackoffManager] = new_default_backoff_manager,
        use_real_fifo: bool = False,
    ) -> None:
        self._new_backoff_manager = new_backoff_manager
        self._use_real_fifo = use_real_fifo
        self._client = client
        self.namespace = namespace or None
        self.default_resync = resync
        self._tweak = tweak_list_options
        self._custom_resync = dict(custom_resync or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._informers: dict[Resource, SharedIndexInformer] = {}
        self._threads: dict[Resource, threading.Thread] = {}
        self._shutting_down = False

    def informer_for(self, resource: Resource) -> SharedIndexInformer:
        """The shared informer of ``resource``, created on first request."""
        with self._lock:
            informer = self._informers.get(resource)
            if informer is None:
                informer = self._informers[resource] = self._new_informer(resource)
            return informer

    def lister(self, resource: Resource) -> Lister:
        """A lister over ``resource``'s informer cache (registers the informer)."""
        informer = self.informer_for(resource)
        return Lister(
            informer.get_indexer(),
            group=resource.group,
            resource=resource.kind.lower(),
            namespaced=resource.namespaced,
        )

    def _new_informer(self, resource: Resource) -> SharedIndexInformer:
        namespace = self.namespace if resource.namespaced else None
        lw = list_watch(self._client.resource(resource), namespace, self._tweak)
        return SharedIndexInformer(
            lw,
            self._custom_resync.get(resource, self.default_resync),
            new_namespace_indexers(),
            name=f"{resource.qualified_name}",
            object_description=resource.qualified_name,
            expected_kind=resource.kind,
            clock=self._clock,
            new_backoff_manager=self._new_backoff_manager,
            use_real_fifo=self._use_real_fifo,
        )

    def start(self, stop: threading.Event) -> None:
        """Start every requested informer that is not running yet."""
        with self._lock:
            if self._shutting_down:
                return
            for resource, informer in self._informers.items():
                if resource in self._threads:
                    continue
                thread = threading.Thread(
                    target=informer.run, args=(stop,), name=f"informer-{resource.qualified_name}", daemon=True
                )
                self._threads[resource] = thread
                thread.start()

    def wait_for_cache_sync(
        self, stop: threading.Event, timeout: float | None = None
    ) -> dict[Resource, bool]:
        """Wait for each started informer in turn; maps resource → synced.

        Polls in real time (100 ms) even when the factory runs on a fake clock, as client-go does,
        so tests driving a ``FakeClock`` can still wait for the initial lists.
        """
        with self._lock:
            started = [(r, self._informers[r]) for r in self._threads]
        return {
            resource: wait_for_cache_sync(stop, informer.has_synced, timeout=timeout)
            for resource, informer in started
        }

    def shutdown(self, timeout: float | None = None) -> None:
        """Refuse further starts and wait for the informer threads (set ``stop`` first)."""
        with self._lock:
            self._shutting_down = True
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)

"""Informer machinery (client-go ``tools/cache``): the pipeline reads off the module list.

``reflector`` lists and watches the API into a ``delta_fifo``; the ``controller`` loop pops it
into an indexer (``store`` over ``thread_safe_store``, keys from ``keys``) and the
``shared_informer`` fans the changes out to handlers through ``processor_listener`` threads.
``factory`` builds one informer per resource; ``listers`` read the caches; a
``mutation_cache`` overlays a controller's own writes on them. Smaller client-go
pieces stand beside them: a plain keyed ``fifo``, a keyed priority ``heap`` and an
``expiration_cache`` (TTL store).

Start with :class:`SharedInformerFactory` (``informer_for``/``lister``, ``start``,
``wait_for_cache_sync``) and :class:`ResourceEventHandlerFuncs`. Cached objects are the
decoded JSON dicts themselves, shared by every reader: never mutate them, copy first.
"""

from mcm.runtime.cache.controller import Config, Controller, process_deltas
from mcm.runtime.cache.delta_fifo import (
    Delta,
    DeltaFIFO,
    Deltas,
    DeltaType,
    FIFOClosedError,
    RequeueError,
)
from mcm.runtime.cache.expiration_cache import (
    ExpirationCache,
    ExpirationPolicy,
    TimestampedEntry,
    TTLPolicy,
    new_ttl_store,
)
from mcm.runtime.cache.factory import SharedInformerFactory
from mcm.runtime.cache.fifo import FIFO
from mcm.runtime.cache.handlers import (
    FilteringResourceEventHandler,
    ResourceEventHandler,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
)
from mcm.runtime.cache.heap import Heap, HeapClosedError, LessFunc, ObjectNotFoundError
from mcm.runtime.cache.index import IndexerError, Indexers, IndexFunc, index_func_to_key_func_adapter
from mcm.runtime.cache.keys import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    ExplicitKey,
    KeyFuncError,
    deletion_handling_meta_namespace_key_func,
    meta_namespace_index_func,
    meta_namespace_key_func,
    object_key,
    split_meta_namespace_key,
)
from mcm.runtime.cache.listers import Lister, NamespaceLister, new_not_found
from mcm.runtime.cache.mutation_cache import MutationCache, compare_resource_versions
from mcm.runtime.cache.mutation_detector import CacheMutationDetector, CacheMutationError
from mcm.runtime.cache.pager import ListPager
from mcm.runtime.cache.processor_listener import ProcessorListener
from mcm.runtime.cache.real_fifo import RealFIFO
from mcm.runtime.cache.reflector import Reflector, VeryShortWatchError
from mcm.runtime.cache.shared_informer import (
    InformerStartedError,
    InformerStoppedError,
    SharedIndexInformer,
    new_namespace_indexers,
    wait_for_cache_sync,
)
from mcm.runtime.cache.store import Indexer, Store
from mcm.runtime.cache.thread_safe_store import IndexFuncError, ThreadSafeStore
from mcm.runtime.labels import Selector, everything, parse_selector, selector_from_set

ResourceEventHandlerRegistration = ProcessorListener
"""What ``add_event_handler`` returns: ``has_synced()``, and the handle for ``remove_event_handler``."""

__all__ = [
    "FIFO",
    "NAMESPACE_INDEX",
    "CacheMutationDetector",
    "CacheMutationError",
    "Config",
    "Controller",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "ExpirationCache",
    "ExpirationPolicy",
    "ExplicitKey",
    "FIFOClosedError",
    "FilteringResourceEventHandler",
    "Heap",
    "HeapClosedError",
    "IndexFunc",
    "IndexFuncError",
    "Indexer",
    "IndexerError",
    "Indexers",
    "InformerStartedError",
    "InformerStoppedError",
    "KeyFuncError",
    "LessFunc",
    "ListPager",
    "Lister",
    "MutationCache",
    "NamespaceLister",
    "ObjectNotFoundError",
    "ProcessorListener",
    "RealFIFO",
    "Reflector",
    "RequeueError",
    "ResourceEventHandler",
    "ResourceEventHandlerDetailedFuncs",
    "ResourceEventHandlerFuncs",
    "ResourceEventHandlerRegistration",
    "Selector",
    "SharedIndexInformer",
    "SharedInformerFactory",
    "Store",
    "TTLPolicy",
    "ThreadSafeStore",
    "TimestampedEntry",
    "VeryShortWatchError",
    "compare_resource_versions",
    "deletion_handling_meta_namespace_key_func",
    "everything",
    "index_func_to_key_func_adapter",
    "meta_namespace_index_func",
    "meta_namespace_key_func",
    "new_namespace_indexers",
    "new_not_found",
    "new_ttl_store",
    "object_key",
    "parse_selector",
    "process_deltas",
    "selector_from_set",
    "split_meta_namespace_key",
    "wait_for_cache_sync",
]

"""The informer controller loop: a reflector feeds a DeltaFIFO, one loop pops and processes it.

Guarantees:

- Deltas of one key are processed oldest first, one key at a time, in FIFO order.
- :func:`process_deltas` updates the store *before* calling the handler: ``Added``, ``Updated``,
  ``Replaced`` and ``Sync`` become ``on_update(old, new)`` if the key is cached and
  ``on_add(obj, is_in_initial_list)`` otherwise; ``Deleted`` removes the key and calls
  ``on_delete`` with the object or tombstone. A delta the store rejects (an index function
  raising) changes nothing and is reported with ``handle_error``; the deltas after it still apply.
- ``run(stop)`` returns after ``stop`` is set, the queue is closed and the reflector has ended.
- An exception from ``process`` is reported with ``handle_error``; with ``retry_on_error`` the
  deltas go back into the queue unless the key was queued again meanwhile.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from mcm.runtime.cache.delta_fifo import (
    Delta,
    Deltas,
    DeltaType,
    FIFOClosedError,
    PopProcessFunc,
    RequeueError,
)
from mcm.runtime.cache.handlers import ResourceEventHandler
from mcm.runtime.cache.reflector import (
    Reflector,
    ReflectorStore,
    WatchErrorHandler,
    default_watch_error_handler,
    new_default_backoff_manager,
)
from mcm.runtime.cache.store import Indexer
from mcm.runtime.client.types import ListerWatcher
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import handle_crash, handle_error
from mcm.runtime.wait import BackoffManager, until

__all__ = ["Config", "Controller", "Queue", "process_deltas"]

log = structlog.get_logger(__name__)

ProcessFunc = Callable[[Deltas, bool], None]


class Queue(ReflectorStore, Protocol):
    """What the controller pops from: a DeltaFIFO or a RealFIFO."""

    def pop(self, process: PopProcessFunc, timeout: float | None = None) -> Deltas: ...

    def has_synced(self) -> bool: ...

    def close(self) -> None: ...


@dataclass
class Config:
    """Everything a :class:`Controller` needs."""

    queue: Queue
    lister_watcher: ListerWatcher
    process: ProcessFunc
    """Called with each popped delta list and whether it belongs to the initial list."""
    name: str = "controller"
    object_description: str = "objects"
    expected_kind: str | None = None
    full_resync_period: float = 0.0
    should_resync: Callable[[], bool] | None = None
    retry_on_error: bool = False
    watch_error_handler: WatchErrorHandler = default_watch_error_handler
    watch_list_page_size: int = 0
    clock: Clock = REAL_CLOCK
    rng: random.Random = field(default_factory=random.Random)
    new_backoff_manager: Callable[[Clock], BackoffManager] = new_default_backoff_manager
    """Builds the reflector's list/watch and watch-connection back-offs (0.8 s → 30 s by default)."""


class Controller:
    """Runs a reflector into the queue and the process loop out of it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._reflector: Reflector | None = None
        self._lock = threading.Lock()

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set."""
        cfg = self.config
        threading.Thread(
            target=_close_on, args=(stop, cfg.queue), name=f"{cfg.name}-closer", daemon=True
        ).start()
        reflector = Reflector(
            cfg.lister_watcher,
            cfg.queue,
            name=cfg.name,
            type_description=cfg.object_description,
            expected_kind=cfg.expected_kind,
            resync_period=cfg.full_resync_period,
            should_resync=cfg.should_resync,
            watch_list_page_size=cfg.watch_list_page_size,
            clock=cfg.clock,
            rng=cfg.rng,
            watch_error_handler=cfg.watch_error_handler,
            backoff_manager=cfg.new_backoff_manager(cfg.clock),
            init_conn_backoff_manager=cfg.new_backoff_manager(cfg.clock),
        )
        with self._lock:
            self._reflector = reflector
        reflector_thread = threading.Thread(
            target=reflector.run, args=(stop,), name=f"{cfg.name}-reflector", daemon=True
        )
        reflector_thread.start()
        until(self._process_loop, 1.0, stop, clock=cfg.clock)
        reflector_thread.join()

    def has_synced(self) -> bool:
        return self.config.queue.has_synced()

    def last_sync_resource_version(self) -> str:
        with self._lock:
            return self._reflector.last_sync_resource_version() if self._reflector else ""

    def _process_loop(self) -> None:
        while True:
            try:
                self.config.queue.pop(self._process)
            except FIFOClosedError:
                return

    def _process(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        try:
            self.config.process(deltas, is_in_initial_list)
        except Exception as exc:
            handle_error(exc, controller=self.config.name, msg="failed to process deltas")
            if self.config.retry_on_error:
                raise RequeueError() from exc


def _close_on(stop: threading.Event, queue: Queue) -> None:
    stop.wait()
    queue.close()


def process_deltas(
    handler: ResourceEventHandler, store: Indexer, deltas: Deltas, is_in_initial_list: bool
) -> None:
    """Apply ``deltas`` to ``store`` oldest first, calling ``handler`` after each store change.

    Every delta is tried: one the store rejects (its key or an index function raising) is
    reported with ``handle_error`` and skipped, leaving the store as it was and the handler
    uncalled. A handler exception is handled by ``handle_crash`` (logged with its traceback, or
    fatal with ``REALLY_CRASH``). Either way the deltas after it are still applied; client-go
    panics in both cases, so the rest of the batch is lost there.
    """
    for delta in deltas:
        notify = _apply_to_store(store, delta)
        if notify is None:
            continue
        with handle_crash():
            notify(handler, is_in_initial_list)


_Notify = Callable[[ResourceEventHandler, bool], None]


def _apply_to_store(store: Indexer, delta: Delta) -> _Notify | None:
    """Apply one delta to the store; the handler call it calls for, or None if it failed."""
    obj = delta.object
    try:
        if delta.type is DeltaType.DELETED:
            store.delete(obj)
            return lambda handler, _initial: handler.on_delete(obj)
        old = store.get(obj)
        if old is not None:
            store.update(obj)
            return lambda handler, _initial: handler.on_update(old, obj)
        store.add(obj)
        return lambda handler, initial: handler.on_add(obj, initial)
    except Exception as exc:
        handle_error(exc, msg="failed to apply a delta to the cache; skipped", delta_type=delta.type.value)
        return None

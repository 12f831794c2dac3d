"""SharedIndexInformer: one list/watch and one cache per resource, shared by many handlers.

Guarantees (as client-go states them):

- The indexer is updated before a notification goes out, so a lister may already show a newer
  state than the notification carries.
- Each handler has its own buffer and thread (:mod:`~mcm.runtime.cache.processor_listener`):
  it sees notifications in order, never blocks the informer or other handlers, and a failing
  handler is reported without stopping delivery. mcm: a handler added with ``inline=True`` is
  called on the informer's own thread instead, in order, with the same failure reporting; it
  must return promptly (it delays the informer) and must not add or remove handlers.
- A handler added after start first gets an ``on_add(obj, is_in_initial_list=True)`` for every
  cached object, queued under the same lock as live events, so replay and live events never
  interleave wrongly.
- An update whose old and new ``resourceVersion`` are equal is a resync: it goes only to handlers
  whose own resync period is due. Resync replays the cache; it never calls the API.
- A delete notification carries the last known state, possibly a
  :class:`~mcm.runtime.cache.keys.DeletedFinalStateUnknown` after a relist. A delete and
  re-create during a gap may arrive as one update; compare UIDs where that matters.
- ``has_synced`` is true once the first list has been fully processed into the indexer.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import structlog

from mcm.runtime.cache.controller import Config, Controller, Queue, process_deltas
from mcm.runtime.cache.delta_fifo import DeltaFIFO, Deltas, TransformFunc
from mcm.runtime.cache.handlers import ResourceEventHandler
from mcm.runtime.cache.index import IndexFunc
from mcm.runtime.cache.keys import (
    NAMESPACE_INDEX,
    deletion_handling_meta_namespace_key_func,
    meta_namespace_index_func,
)
from mcm.runtime.cache.mutation_detector import CacheMutationDetector, detection_enabled_by_env
from mcm.runtime.cache.processor_listener import (
    AddNotification,
    DeleteNotification,
    Notification,
    ProcessorListener,
    UpdateNotification,
    determine_resync_period,
)
from mcm.runtime.cache.real_fifo import RealFIFO
from mcm.runtime.cache.reflector import (
    WatchErrorHandler,
    default_watch_error_handler,
    new_default_backoff_manager,
)
from mcm.runtime.cache.store import Indexer
from mcm.runtime.client.types import ListerWatcher
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.wait import BackoffManager, WaitTimeoutError, poll_immediate, poll_immediate_until

__all__ = [
    "MINIMUM_RESYNC_PERIOD",
    "InformerStartedError",
    "InformerStoppedError",
    "SharedIndexInformer",
    "new_namespace_indexers",
    "wait_for_cache_sync",
]

log = structlog.get_logger(__name__)

MINIMUM_RESYNC_PERIOD = 1.0
SYNCED_POLL_PERIOD = 0.1


class InformerStartedError(Exception):
    def __init__(self) -> None:
        super().__init__("informer has already started")


class InformerStoppedError(Exception):
    """A handler was added to an informer that has already stopped."""


class _SharedProcessor:
    """The informer's listeners and which of them are due for a resync."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._listeners: dict[ProcessorListener, bool] = {}  # listener -> currently syncing
        self._started = False

    def add_listener(self, listener: ProcessorListener) -> None:
        with self._lock:
            self._listeners[listener] = True
            if self._started:
                listener.start()

    def remove_listener(self, listener: ProcessorListener) -> None:
        with self._lock:
            if self._listeners.pop(listener, None) is None:
                return
            if self._started:
                listener.stop()

    def distribute(self, notification: Notification, sync: bool) -> None:
        with self._lock:
            for listener, syncing in self._listeners.items():
                if not sync or syncing:
                    listener.add(notification)

    def start(self) -> None:
        with self._lock:
            for listener in self._listeners:
                listener.start()
            self._started = True

    def stop(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
            self._listeners = {}
            self._started = False
        for listener in listeners:
            listener.stop()
        for listener in listeners:
            listener.join()

    def should_resync(self) -> bool:
        """Mark the listeners whose resync is due; True if any is."""
        with self._lock:
            now = self._clock.monotonic()
            needed = False
            for listener in self._listeners:
                due = listener.should_resync(now)
                self._listeners[listener] = due
                if due:
                    needed = True
                    listener.determine_next_resync(now)
            return needed

    def resync_check_period_changed(self, period: float) -> None:
        with self._lock:
            for listener in self._listeners:
                listener.set_resync_period(determine_resync_period(listener.requested_resync_period, period))


class SharedIndexInformer:
    """List/watch one resource into an indexer and fan changes out to handlers.

    ``default_resync`` is every handler's resync period unless it asks for its own (0 = never);
    ``use_real_fifo`` switches the DeltaFIFO of client-go 0.28 for the RealFIFO of 0.33+;
    ``new_backoff_manager`` builds the reflector's back-offs (tests shorten them);
    ``detect_mutations`` (default: ``$KUBE_CACHE_MUTATION_DETECTOR``) checks that nobody changes
    cached objects (:mod:`~mcm.runtime.cache.mutation_detector`).
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        default_resync: float = 0.0,
        indexers: dict[str, IndexFunc] | None = None,
        *,
        name: str = "informer",
        object_description: str = "objects",
        expected_kind: str | None = None,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
        new_backoff_manager: Callable[[Clock], BackoffManager] = new_default_backoff_manager,
        use_real_fifo: bool = False,
        detect_mutations: bool | None = None,
    ) -> None:
        self._lw = lister_watcher
        detect = detection_enabled_by_env() if detect_mutations is None else detect_mutations
        self._mutation_detector = CacheMutationDetector(name, clock=clock) if detect else None
        self._use_real_fifo = use_real_fifo
        self._new_backoff_manager = new_backoff_manager
        self._name = name
        self._object_description = object_description
        self._expected_kind = expected_kind
        self._clock = clock
        self._rng = rng or random.Random()
        self._indexer = Indexer(deletion_handling_meta_namespace_key_func, indexers)
        self._processor = _SharedProcessor(clock)
        self._default_handler_resync = default_resync
        self._resync_check_period = default_resync
        self._started_lock = threading.Lock()
        self._block_deltas = threading.Lock()
        self._started = False
        self._stopped = False
        self._controller: Controller | None = None
        self._transform: TransformFunc | None = None
        self._watch_error_handler: WatchErrorHandler = default_watch_error_handler

    # -- configuration (before start) -----------------------------------------------------------
    def add_indexers(self, indexers: dict[str, IndexFunc]) -> None:
        with self._started_lock:
            if self._started:
                raise InformerStartedError()
            self._indexer.add_indexers(indexers)

    def set_transform(self, transform: TransformFunc) -> None:
        with self._started_lock:
            if self._started:
                raise InformerStartedError()
            self._transform = transform

    def set_watch_error_handler(self, handler: WatchErrorHandler) -> None:
        with self._started_lock:
            if self._started:
                raise InformerStartedError()
            self._watch_error_handler = handler

    # -- handlers -------------------------------------------------------------------------------
    def add_event_handler(
        self, handler: ResourceEventHandler, resync_period: float | None = None, *, inline: bool = False
    ) -> ProcessorListener:
        """Register ``handler``; returns its registration (``has_synced()``, for removal).

        ``resync_period=None`` uses the informer's default. A handler added after start is first
        sent every cached object as an initial-list add (an inline one on the caller's thread,
        before this returns). ``inline``: see the module docstring.
        """
        period = self._default_handler_resync if resync_period is None else resync_period
        with self._started_lock:
            if self._stopped:
                raise InformerStoppedError(
                    f"handler {type(handler).__name__} was not added to shared informer "
                    "because it has stopped already"
                )
            period = self._normalise_resync_period(period)
            listener = ProcessorListener(
                handler,
                period,
                determine_resync_period(period, self._resync_check_period),
                self._clock.monotonic(),
                self.has_synced,
                inline=inline,
            )
            if not self._started:
                self._processor.add_listener(listener)
                return listener
            with self._block_deltas:
                self._processor.add_listener(listener)
                for obj in self._indexer.list():
                    listener.add(AddNotification(obj, True))
            return listener

    def _normalise_resync_period(self, period: float) -> float:
        if period <= 0:
            return period
        if period < MINIMUM_RESYNC_PERIOD:
            log.warning("resync_period_too_small", requested=period, minimum=MINIMUM_RESYNC_PERIOD)
            period = MINIMUM_RESYNC_PERIOD
        if period >= self._resync_check_period:
            return period
        if self._started:
            log.warning("resync_period_below_check_period", requested=period, check=self._resync_check_period)
            return self._resync_check_period
        self._resync_check_period = period
        self._processor.resync_check_period_changed(period)
        return period

    def remove_event_handler(self, registration: ProcessorListener) -> None:
        """Stop delivering to a handler; unknown registrations are ignored."""
        with self._started_lock, self._block_deltas:
            self._processor.remove_listener(registration)

    # -- running --------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """List, watch and deliver until ``stop`` is set. Runs at most once."""
        with self._started_lock:
            if self._started:
                log.warning("informer_already_started", informer=self._name)
                return
            fifo = self._new_queue()
            self._controller = Controller(
                Config(
                    queue=fifo,
                    lister_watcher=self._lw,
                    process=self._handle_deltas,
                    name=self._name,
                    object_description=self._object_description,
                    expected_kind=self._expected_kind,
                    full_resync_period=self._resync_check_period,
                    should_resync=self._processor.should_resync,
                    watch_error_handler=self._watch_error_handler,
                    clock=self._clock,
                    rng=self._rng,
                    new_backoff_manager=self._new_backoff_manager,
                )
            )
            self._started = True
        self._processor.start()
        detector_stop = threading.Event()
        detector = self._start_mutation_detector(detector_stop)
        try:
            self._controller.run(stop)
        finally:
            with self._started_lock:
                self._stopped = True
            self._processor.stop()
            detector_stop.set()
            if detector is not None:
                detector.join()

    def _start_mutation_detector(self, stop: threading.Event) -> threading.Thread | None:
        if self._mutation_detector is None:
            return None
        thread = threading.Thread(
            target=self._mutation_detector.run, args=(stop,), name=f"{self._name}-mutations", daemon=True
        )
        thread.start()
        return thread

    def _new_queue(self) -> Queue:
        if self._use_real_fifo:
            return RealFIFO(
                key_function=deletion_handling_meta_namespace_key_func,
                known_objects=self._indexer,
                transformer=self._transform,
            )
        return DeltaFIFO(
            key_function=deletion_handling_meta_namespace_key_func,
            known_objects=self._indexer,
            emit_delta_type_replaced=True,
            transformer=self._transform,
        )

    def _handle_deltas(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        with self._block_deltas:
            process_deltas(self, self._indexer, deltas, is_in_initial_list)

    # -- ResourceEventHandler used by process_deltas (runs under _block_deltas) -----------------
    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self._mutation_detector is not None:
            self._mutation_detector.add_object(obj)
        self._processor.distribute(AddNotification(obj, is_in_initial_list), False)

    def on_update(self, old: Any, new: Any) -> None:
        if self._mutation_detector is not None:
            self._mutation_detector.add_object(new)
        self._processor.distribute(UpdateNotification(old, new), _same_resource_version(old, new))

    def on_delete(self, obj: Any) -> None:
        self._processor.distribute(DeleteNotification(obj), False)

    # -- state ----------------------------------------------------------------------------------
    def has_synced(self) -> bool:
        with self._started_lock:
            controller = self._controller
        return controller is not None and controller.has_synced()

    def has_started(self) -> bool:
        with self._started_lock:
            return self._started

    def is_stopped(self) -> bool:
        with self._started_lock:
            return self._stopped

    def last_sync_resource_version(self) -> str:
        with self._started_lock:
            controller = self._controller
        return controller.last_sync_resource_version() if controller else ""

    @property
    def mutation_detector(self) -> CacheMutationDetector | None:
        return self._mutation_detector

    def get_indexer(self) -> Indexer:
        return self._indexer

    get_store = get_indexer

    @property
    def resync_check_period(self) -> float:
        return self._resync_check_period


def _same_resource_version(old: Any, new: Any) -> bool:
    """client-go's sync test: equal ``resourceVersion``, a missing one reading as ``""``."""
    old_rv, new_rv = _resource_version(old), _resource_version(new)
    return old_rv is not None and old_rv == new_rv


def _resource_version(obj: Any) -> str | None:
    """The object's resourceVersion (``""`` if unset); ``None`` for something without metadata."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(metadata, dict):
        return None
    return str(metadata.get("resourceVersion") or "")


def wait_for_cache_sync(
    stop: threading.Event,
    *has_synced: Callable[[], bool],
    timeout: float | None = None,
    clock: Clock = REAL_CLOCK,
) -> bool:
    """Poll every 100 ms until every ``has_synced()`` is true (True), or stop/timeout (False).

    ``clock`` measures the poll period and timeout; keep the real clock unless a test steps it.
    """

    def all_synced() -> bool:
        return all(fn() for fn in has_synced)

    try:
        if timeout is None:
            poll_immediate_until(SYNCED_POLL_PERIOD, all_synced, stop, clock=clock)
        else:
            poll_immediate(SYNCED_POLL_PERIOD, timeout, all_synced, stop=stop, clock=clock)
    except WaitTimeoutError:
        log.info("cache_sync_not_reached")
        return False
    return True


def new_namespace_indexers() -> dict[str, IndexFunc]:
    """The indexers every generated informer registers."""
    return {NAMESPACE_INDEX: meta_namespace_index_func}

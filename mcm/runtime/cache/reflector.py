"""Reflector: keeps a store in step with the server by listing, then watching (client-go 0.28).

Guarantees:

- The first list asks for resourceVersion ``"0"``; later relists ask for the last synced RV
  ("not older than"), or ``""`` (a consistent read) after the server said that RV is gone. A
  list that fails with 410 Expired or "too large resource version" is retried at once with ``""``.
- The store gets ``replace(items, rv)`` with the list's own ``metadata.resourceVersion``, then
  every watch event in order; the last synced RV follows every event, bookmarks included. A
  store with ``update_resource_version(rv)`` is told the RV of every watch event (bookmarks
  included); the list's RV reaches it only through ``replace``.
- A watch that ends normally is reopened at once from the last RV, without a relist. A watch
  that ends with an error (410 Expired, an ``ERROR`` event, a very short watch with no events)
  ends :meth:`Reflector.list_and_watch`; :meth:`Reflector.run` relists after one back-off step
  (800 ms doubling to 30 s, jittered, reset after 2 min quiet). Connection refused and 429 on
  opening a watch back off and re-watch without relisting.
- A watch that ends with an internal error (500, e.g. "etcdserver: no leader") is re-watched
  without a relist, after one back-off step, while the internal errors have lasted at most
  ``max_internal_error_retry_duration`` seconds (client-go's ``MaxInternalErrorRetryDuration``,
  default 0: never); after that the reflector gives up and relists. client-go re-watches at
  once, without a back-off.
- Every watch asks for bookmarks and a random server timeout in [300, 600) s (``rng``).
- With ``resync_period > 0``, ``store.resync()`` is called every period while watching, when
  ``should_resync`` (if given) agrees. Resync never touches the API.
- ``stop`` ends a running watch promptly (the stream is stopped from another thread). A list
  in flight, or a watch still waiting for its response headers, is not interrupted; the client's
  request timeout bounds it (the watch's longer read timeout applies only after the headers).
  A lister-watcher that offers ``with_cancel(event)`` (:class:`CancellableListerWatcher`, as
  ``mcm.runtime.client.ListWatch`` does) is used through ``with_cancel(stop)``, so ``stop`` also
  ends a list's or a watch's wait for the client's rate limiter or a server's ``Retry-After``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

import structlog

from mcm.runtime.cache.pager import DEFAULT_PAGE_SIZE, ListPager
from mcm.runtime.client import errors as client_errors
from mcm.runtime.client.types import ListerWatcher, ListOptions, Object, WatchEvent, WatchStream
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import handle_error
from mcm.runtime.wait import BackoffManager, ExponentialBackoffManager, backoff_until

__all__ = [
    "MIN_WATCH_TIMEOUT",
    "CancellableListerWatcher",
    "Reflector",
    "ReflectorStore",
    "RetryWithDeadline",
    "VeryShortWatchError",
    "WatchErrorHandler",
    "default_watch_error_handler",
    "new_default_backoff_manager",
]

log = structlog.get_logger(__name__)

MIN_WATCH_TIMEOUT = 300.0
"""Watches ask the server to end them after a random time in [this, 2 * this) seconds."""

BACKOFF_INITIAL, BACKOFF_MAX, BACKOFF_RESET, BACKOFF_FACTOR, BACKOFF_JITTER = 0.8, 30.0, 120.0, 2.0, 1.0

INTERNAL_ERROR_RESET_PERIOD = 60.0
"""Internal errors further apart than this start a new retry window (client-go: one minute)."""


class ReflectorStore(Protocol):
    """What a reflector writes to (a DeltaFIFO in an informer)."""

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None: ...

    def resync(self) -> None: ...


class VeryShortWatchError(Exception):
    """The server closed a watch within a second without sending anything."""


WatchErrorHandler = Callable[["Reflector", BaseException], None]


@runtime_checkable
class CancellableListerWatcher(ListerWatcher, Protocol):
    """A lister-watcher whose requests can be told to stop waiting (client-go's context)."""

    def with_cancel(self, cancel: threading.Event) -> ListerWatcher:
        """The same lister-watcher whose throttle and Retry-After waits end once ``cancel`` is set."""
        ...


def default_watch_error_handler(reflector: Reflector, err: BaseException) -> None:
    """Log expiry quietly; report everything else through ``handle_error``."""
    if client_errors.is_resource_expired(err):
        log.debug("watch_expired", reflector=reflector.name, error=str(err))
        return
    handle_error(err, reflector=reflector.name, msg=f"failed to watch {reflector.type_description}")


def new_default_backoff_manager(clock: Clock) -> BackoffManager:
    """0.8 s doubling to 30 s, jitter 1.0, starting over after 2 min without a back-off."""
    return ExponentialBackoffManager(
        BACKOFF_INITIAL, BACKOFF_MAX, BACKOFF_RESET, BACKOFF_FACTOR, BACKOFF_JITTER, clock=clock
    )


class RetryWithDeadline:
    """Says whether a failure may be retried: only while a run of retryable failures, none more
    than ``reset_period`` apart, has lasted at most ``max_duration`` (client-go's
    ``RetryWithDeadline``). ``max_duration <= 0`` never retries."""

    def __init__(
        self,
        max_duration: float,
        reset_period: float,
        is_retryable: Callable[[BaseException], bool],
        clock: Clock,
    ) -> None:
        self._max = max_duration
        self._reset_period = reset_period
        self._is_retryable = is_retryable
        self._clock = clock
        self._first: float | None = None
        self._last: float | None = None

    def after(self, err: BaseException | None) -> None:
        """Note how an attempt ended (``None``: it succeeded, which is not counted)."""
        if err is None or not self._is_retryable(err):
            return
        now = self._clock.monotonic()
        if self._last is not None and now - self._last >= self._reset_period:
            self._first = None
        if self._first is None:
            self._first = now
        self._last = now

    def should_retry(self) -> bool:
        if self._max <= 0:
            return False
        if self._first is not None and self._clock.monotonic() - self._first <= self._max:
            return True
        self._first = self._last = None
        return False


class Reflector:
    """Lists and watches one resource through ``lister_watcher`` into ``store``."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        store: ReflectorStore,
        *,
        name: str = "reflector",
        type_description: str = "objects",
        expected_kind: str | None = None,
        resync_period: float = 0.0,
        should_resync: Callable[[], bool] | None = None,
        watch_list_page_size: int = 0,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
        backoff_manager: BackoffManager | None = None,
        init_conn_backoff_manager: BackoffManager | None = None,
        watch_error_handler: WatchErrorHandler = default_watch_error_handler,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        max_internal_error_retry_duration: float = 0.0,
    ) -> None:
        self.name = name
        self.type_description = type_description
        self._lw = lister_watcher
        self._store = store
        self._expected_kind = expected_kind
        self.resync_period = resync_period
        self.should_resync = should_resync
        self.watch_list_page_size = watch_list_page_size
        self._clock = clock
        self._rng = rng or random.Random()
        self._backoff = backoff_manager or new_default_backoff_manager(clock)
        self._init_conn_backoff = init_conn_backoff_manager or new_default_backoff_manager(clock)
        self.watch_error_handler = watch_error_handler
        self._min_watch_timeout = min_watch_timeout
        self.max_internal_error_retry_duration = max_internal_error_retry_duration
        self._lock = threading.Lock()
        self._last_sync_rv = ""
        self._rv_unavailable = False
        self._paginated_result = False
        self._watch: WatchStream | None = None
        self._cancel: threading.Event | None = None
        self._relayed_stop: threading.Event | None = None

    # -- public ---------------------------------------------------------------------------------
    def last_sync_resource_version(self) -> str:
        with self._lock:
            return self._last_sync_rv

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set, backing off between attempts."""
        log.debug("reflector_starting", reflector=self.name, type=self.type_description)
        self._relay_stop(stop)
        backoff_until(self._list_and_watch_reporting, self._backoff, True, stop, clock=self._clock)
        log.debug("reflector_stopped", reflector=self.name, type=self.type_description)

    def _list_and_watch_reporting(self) -> None:
        stop = self._relayed_stop
        assert stop is not None
        try:
            self.list_and_watch(stop)
        except Exception as exc:
            self.watch_error_handler(self, exc)

    def list_and_watch(self, stop: threading.Event) -> None:
        """List once, then watch until an error, a relist-worthy event or ``stop``.

        Raises when the list (or opening a watch, for errors other than connection refused
        and 429) fails; returns normally otherwise.
        """
        self._relay_stop(stop)
        if stop.is_set():
            return
        self._list(stop)
        log.debug("caches_populated", reflector=self.name, type=self.type_description)
        cancel = threading.Event()
        resync_errors: list[BaseException] = []
        with self._lock:
            self._cancel = cancel
        if stop.is_set():
            cancel.set()
        resyncer = self._start_resync(cancel, resync_errors)
        try:
            self._watch_loop(stop, resync_errors)
        finally:
            cancel.set()
            with self._lock:
                self._cancel = None
            if resyncer is not None:
                resyncer.join()

    # -- stop relay -----------------------------------------------------------------------------
    def _relay_stop(self, stop: threading.Event) -> None:
        """Make ``stop`` end the current watch and resync loop (one helper thread per stop event)."""
        if self._relayed_stop is stop:
            return
        self._relayed_stop = stop
        threading.Thread(target=self._abort_on, args=(stop,), name=f"{self.name}-stop", daemon=True).start()

    def _abort_on(self, stop: threading.Event) -> None:
        while not stop.is_set():  # FakeClock.wait wakes other waiters of the same event spuriously
            stop.wait()
        with self._lock:
            watch, cancel = self._watch, self._cancel
        if cancel is not None:
            cancel.set()
        if watch is not None:
            watch.stop()

    # -- list -----------------------------------------------------------------------------------
    def _relist_resource_version(self) -> str:
        if self._rv_unavailable:
            return ""
        return self._last_sync_rv or "0"

    def _lister_watcher(self, stop: threading.Event) -> ListerWatcher:
        """The lister-watcher whose waits end when ``stop`` is set, when it can be told so."""
        if isinstance(self._lw, CancellableListerWatcher):
            return self._lw.with_cancel(stop)
        return self._lw

    def _new_pager(self, options: ListOptions, stop: threading.Event) -> ListPager:
        pager = ListPager(self._lister_watcher(stop).list)
        if self.watch_list_page_size:
            pager.page_size = self.watch_list_page_size
        elif self._paginated_result:
            pager.page_size = DEFAULT_PAGE_SIZE
        elif options.resource_version not in (None, "", "0"):
            pager.page_size = 0  # let the watch cache answer: it ignores limits only for RV "0"
        return pager

    def _list(self, stop: threading.Event) -> None:
        options = ListOptions(resource_version=self._relist_resource_version())
        try:
            result, paginated = self._new_pager(options, stop).list(options)
        except Exception as exc:
            if not (client_errors.is_resource_expired(exc) or _is_too_large_resource_version(exc)):
                log.warning("list_failed", reflector=self.name, type=self.type_description, error=str(exc))
                raise
            self._rv_unavailable = True
            options = ListOptions(resource_version=self._relist_resource_version())
            result, paginated = self._new_pager(options, stop).list(options)
        if options.resource_version == "0" and paginated:
            self._paginated_result = True
        self._rv_unavailable = False
        resource_version = str((result.get("metadata") or {}).get("resourceVersion") or "")
        self._store.replace(list(result.get("items") or ()), resource_version)
        self._set_last_sync_resource_version(resource_version)

    def _set_last_sync_resource_version(self, rv: str) -> None:
        with self._lock:
            self._last_sync_rv = rv

    # -- resync ---------------------------------------------------------------------------------
    def _start_resync(self, cancel: threading.Event, errors: list[BaseException]) -> threading.Thread | None:
        if self.resync_period <= 0:
            return None
        thread = threading.Thread(
            target=self._resync_loop, args=(cancel, errors), name=f"{self.name}-resync", daemon=True
        )
        thread.start()
        return thread

    def _resync_loop(self, cancel: threading.Event, errors: list[BaseException]) -> None:
        while not self._clock.wait(cancel, self.resync_period):
            if self.should_resync is not None and not self.should_resync():
                continue
            log.debug("forcing_resync", reflector=self.name)
            try:
                self._store.resync()
            except Exception as exc:
                errors.append(exc)
                self._stop_current_watch()
                return

    def _stop_current_watch(self) -> None:
        with self._lock:
            watch = self._watch
        if watch is not None:
            watch.stop()

    # -- watch ----------------------------------------------------------------------------------
    def _watch_loop(self, stop: threading.Event, errors: list[BaseException]) -> None:
        internal_errors = RetryWithDeadline(
            self.max_internal_error_retry_duration,
            INTERNAL_ERROR_RESET_PERIOD,
            client_errors.is_internal_error,
            self._clock,
        )
        while not stop.is_set():
            stream = self._open_watch(stop)
            if stream is None:
                continue
            try:
                self._handle_watch(stream, stop, errors)
            except Exception as exc:
                internal_errors.after(exc)
                if self._retry_watch_after(exc, stop, internal_errors):
                    continue
                return
            finally:
                stream.stop()
                with self._lock:
                    self._watch = None
            if errors:
                log.warning("watch_ended", reflector=self.name, error=str(errors[0]))
                return

    def _open_watch(self, stop: threading.Event) -> WatchStream | None:
        """Open a watch from the last RV; ``None`` after a back-off for a retriable failure."""
        options = ListOptions(
            resource_version=self.last_sync_resource_version(),
            timeout_seconds=int(self._min_watch_timeout * (self._rng.random() + 1.0)),
            allow_watch_bookmarks=True,
        )
        try:
            stream = self._lister_watcher(stop).watch(options)
        except Exception as exc:
            if not _is_watch_error_retriable(exc):
                raise
            log.debug("watch_open_backing_off", reflector=self.name, error=str(exc))
            self._clock.wait(stop, self._init_conn_backoff.next_backoff())
            return None
        with self._lock:
            self._watch = stream
        if stop.is_set():
            stream.stop()
        return stream

    def _retry_watch_after(
        self, err: BaseException, stop: threading.Event, internal_errors: RetryWithDeadline
    ) -> bool:
        """Log how a watch ended; True to re-watch after a back-off (429, internal errors within
        their deadline), False to relist."""
        if stop.is_set():
            return False
        if client_errors.is_resource_expired(err):
            log.debug("watch_expired", reflector=self.name, error=str(err))
        elif client_errors.is_too_many_requests(err):
            log.info("watch_throttled", reflector=self.name)
            self._clock.wait(stop, self._init_conn_backoff.next_backoff())
            return True
        elif client_errors.is_internal_error(err) and internal_errors.should_retry():
            log.info("watch_internal_error_retrying", reflector=self.name, error=str(err))
            self._clock.wait(stop, self._init_conn_backoff.next_backoff())
            return True
        else:
            log.warning("watch_ended", reflector=self.name, type=self.type_description, error=str(err))
        return False

    def _handle_watch(self, stream: WatchStream, stop: threading.Event, errors: list[BaseException]) -> None:
        """Apply events to the store until the stream ends; raise for an error ending."""
        start = self._clock.monotonic()
        count = 0
        try:
            for event in stream:
                if stop.is_set() or errors:
                    return
                self._apply(event)
                count += 1
        except client_errors.ConnectionFailed as exc:
            log.debug("watch_connection_broke", reflector=self.name, error=str(exc))
        if stop.is_set() or errors:
            return
        if count == 0 and self._clock.since(start) < 1.0:
            raise VeryShortWatchError(
                f"very short watch: {self.name}: Unexpected watch close - "
                "watch lasted less than a second and no items received"
            )
        log.debug("watch_closed", reflector=self.name, events=count)

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        if event.type == "ERROR":
            raise _error_from_event(obj)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            handle_error(ValueError(f"{self.name}: unable to understand watch event {event.type}"))
            return
        if self._expected_kind and obj.get("kind") not in (None, self._expected_kind):
            handle_error(
                ValueError(f"{self.name}: expected kind {self._expected_kind}, got {obj.get('kind')}")
            )
            return
        try:
            self._store_event(event.type, obj)
        except Exception as exc:
            handle_error(exc, reflector=self.name, msg=f"unable to apply watch event {event.type}")
        resource_version = str(meta.get("resourceVersion") or "")
        self._set_last_sync_resource_version(resource_version)
        updater = getattr(self._store, "update_resource_version", None)
        if updater is not None:  # client-go's ResourceVersionUpdater: told about watch events only
            updater(resource_version)

    def _store_event(self, event_type: str, obj: Object) -> None:
        if event_type == "ADDED":
            self._store.add(obj)
        elif event_type == "MODIFIED":
            self._store.update(obj)
        elif event_type == "DELETED":
            self._store.delete(obj)
        elif event_type != "BOOKMARK":
            handle_error(ValueError(f"{self.name}: unable to understand watch event {event_type}"))


def _error_from_event(status: Object) -> client_errors.ApiError:
    code = status.get("code")
    return client_errors.error_from_status(status, code if isinstance(code, int) else 500)


def _is_watch_error_retriable(err: BaseException) -> bool:
    if isinstance(err, ConnectionRefusedError):
        return True
    if isinstance(err, client_errors.ConnectionFailed) and err.refused:
        return True
    return client_errors.is_too_many_requests(err)


def _is_too_large_resource_version(err: BaseException) -> bool:
    if not client_errors.is_timeout(err):
        return False
    assert isinstance(err, client_errors.ApiError)
    causes = err.details.get("causes") or []
    if any(isinstance(c, dict) and c.get("reason") == "ResourceVersionTooLarge" for c in causes):
        return True
    return "too large resource version" in err.message.lower()

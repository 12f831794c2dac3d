"""The controller worker: takes keys off a rate-limiting queue and reconciles them.

The loop of k8s.io/sample-controller (``controller.go``, ``processNextWorkItem``) and upstream
MCM's ``pkg/util/worker``. Guarantees:

- :func:`process_next_work_item` handles exactly one item and returns ``False`` only when the
  queue has shut down and is empty; it calls ``done`` for every item it took, whatever happens.
- A key that is not a ``str`` is forgotten and reported, never reconciled.
- A reconcile exception never ends the worker thread; :func:`start_workers` also restarts the
  loop after 1 s if anything else escapes it (``wait.until`` with ``handle_crash``).

What a reconcile's outcome means (controller-runtime's ``reconcile`` contract, on one screen):

========================================  =======================================================
the reconcile ...                         the worker ...
========================================  =======================================================
returns ``DONE`` / ``None``               ``forget`` (back-off starts over); nothing more until an
                                          event adds the key again
returns ``Result.after(d)``               ``forget``, then ``add_after(key, d)`` (``d <= 0``: at
                                          once; a pending delayed add keeps the earliest time)
raises a ``TransientError`` (an *error*)  logs it once (``handle_error`` with ``key``, ``worker``,
                                          ``requeues``, ``outcome="requeued"``, no stack) and
                                          ``add_rate_limited(key)``: per-item exponential back-off,
                                          capped by the queue's rate limiter (client-go's default:
                                          5 ms doubling to 1000 s). Never a crash, never dropped.
raises any other ``Exception`` (a *bug*)  with ``REALLY_CRASH`` on: the panic handlers log it with
                                          its stack and ``ON_FATAL`` ends the process, as a Go
                                          panic would (client-go ``TestPanicPropagated``); the
                                          exception is then re-raised. Off (the library default):
                                          reported with its stack and re-added rate-limited while
                                          ``num_requeues < max_retries``, then forgotten (dropped)
========================================  =======================================================

How the two are told apart: by type. :class:`~mcm.runtime.errors.TransientError` is the base of
every failure that comes from outside the process's code. The REST transport wraps every network
exception (reset, refused, timed out, TLS, protocol) into ``ConnectionFailed``; it and every
error answer (``ApiError``) are ``RequestError``, a ``TransientError``; driver errors
(``MachineError``) are too. A reconciler that wants a retry for its own reason raises its own
``TransientError`` subclass or, better, returns ``Result.after``. Anything else that escapes is
a programming error. Unlike MCM's worker, which drops any key after 15 failed passes, an error
is retried for as long as it lasts: a key dropped during a 3-minute API outage would otherwise
wait for the next resync (hours) before its object is looked at again.

Two rules go with it, for everything built on this loop: informer event handlers only enqueue
(they read caches, never call an API server or a driver), and no lock is held across an API or
a driver call (a per-object marker that others test without waiting is used instead).

Stopping: set ``stop`` **and** shut the queue down. Workers blocked in ``get`` return only when
the queue shuts down; they then poll ``stop`` once a second until it is set.

Replacing a stuck worker: code running on a worker thread of :func:`start_workers` can take
:func:`current_worker` (its :class:`WorkerSlot`) and hand it to a watchdog. ``slot.replace()``
(from any thread) gives the worker's place in its pool to a new thread, so the pool keeps its
size while the old thread is stuck (in a driver call past its deadline, say). The old thread
keeps its item until it is done with it, so the item is never processed twice at the same time,
and then ends; if it never returns it is a daemon thread and nothing waits for it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import traceback
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from mcm.runtime import errors
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import TransientError, handle_error
from mcm.runtime.wait import until
from mcm.runtime.workqueue.rate_limiting_queue import RateLimitingQueue

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DONE",
    "WORKER_IDLE_TIMEOUT",
    "WORKER_RESTART_PERIOD",
    "Reconciler",
    "Result",
    "WorkerSlot",
    "current_worker",
    "join_workers",
    "process_next_work_item",
    "run_worker",
    "start_workers",
]

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks of its worker (controller-runtime's ``reconcile.Result``).

    ``requeue_after=None``: done, nothing more unless an event adds the key again.
    ``requeue_after=d``: the key is forgotten (back-off reset) and added again after ``d``
    seconds. A reconciler that knows when to look again returns one; one that failed raises a
    :class:`~mcm.runtime.errors.TransientError` (rate-limited back-off).
    """

    requeue_after: float | None = None

    @classmethod
    def after(cls, seconds: float) -> Result:
        """Requeue after ``seconds``."""
        return cls(requeue_after=seconds)


DONE = Result()
"""Nothing more to do for this key."""

Reconciler = Callable[[str], "Result | None"]
"""Reconciles one key (``"namespace/name"``) and says when to look again; ``None`` = :data:`DONE`.

Raising a :class:`~mcm.runtime.errors.TransientError` is an error (retried with back-off);
raising anything else is a bug (see the module docstring).
"""

DEFAULT_MAX_RETRIES = 15
"""MCM's limit of rate-limited retries per key; mcm applies it to bugs (with ``REALLY_CRASH``
off) only: errors are retried until they stop."""

WORKER_RESTART_PERIOD = 1.0
"""Seconds before a worker loop that returned is started again (``wait.Until(worker, 1s)``)."""

WORKER_IDLE_TIMEOUT = 30.0
"""Seconds a queue keeps more than one idle worker thread before the extra ones end."""


def process_next_work_item(
    queue: RateLimitingQueue[T],
    reconcile: Reconciler,
    max_retries: int = DEFAULT_MAX_RETRIES,
    forget_after_success: bool = True,
    *,
    name: str = "",
    busy: Callable[[bool], None] | None = None,
) -> bool:
    """Take one item from ``queue`` and reconcile it. ``False`` means the queue shut down.

    ``busy(True)`` is called once an item is taken, ``busy(False)`` once it is done."""
    taken, shutdown = queue.get()
    if shutdown:
        return False
    _process(
        queue,
        cast(T, taken),  # not shut down: a real item (even if someone queued None)
        reconcile,
        max_retries,
        forget_after_success,
        name=name,
        busy=busy,
    )
    return True


def _process(
    queue: RateLimitingQueue[T],
    item: T,
    reconcile: Reconciler,
    max_retries: int,
    forget_after_success: bool,
    *,
    name: str,
    busy: Callable[[bool], None] | None,
) -> None:
    """Reconcile one item taken from ``queue``; ``done`` is called for it whatever happens."""
    if busy is not None:
        busy(True)
    try:
        if isinstance(item, str):
            _reconcile(
                queue,
                item,
                reconcile,
                max_retries=max_retries,
                forget_after_success=forget_after_success,
                name=name,
            )
        else:
            queue.forget(item)
            handle_error(TypeError(f"expected string in workqueue but got {item!r}"), worker=name)
    finally:
        queue.done(item)
        if busy is not None:
            busy(False)


def _reconcile(
    queue: RateLimitingQueue[T],
    item: T,
    reconcile: Reconciler,
    *,
    max_retries: int,
    forget_after_success: bool,
    name: str,
) -> None:
    """Run ``reconcile`` for ``item`` (a ``str``) and apply the retry policy."""
    try:
        result = reconcile(str(item))
    except TransientError as err:
        _retry(queue, item, err, name)
        return
    except Exception as err:
        if errors.REALLY_CRASH:
            _crash(err)
            raise
        _retry_or_drop(queue, item, err, max_retries, name)
        return
    if forget_after_success:
        queue.forget(item)
    if result is not None and result.requeue_after is not None:
        queue.add_after(item, result.requeue_after)


def _crash(err: Exception) -> None:
    """Log ``err`` with the panic handlers, then call ``ON_FATAL`` (ends the process by default)."""
    for handler in errors.PANIC_HANDLERS:
        with contextlib.suppress(Exception):  # reporting must not stop the crash
            handler(err)
    errors.ON_FATAL(err)


def _retry(queue: RateLimitingQueue[T], item: T, err: TransientError, name: str) -> None:
    """An error: log it once with the key and re-add the key rate-limited."""
    requeues = queue.num_requeues(item)
    queue.add_rate_limited(item)
    handle_error(err, worker=name, key=item, requeues=requeues, outcome="requeued")


def _retry_or_drop(queue: RateLimitingQueue[T], item: T, err: Exception, max_retries: int, name: str) -> None:
    requeues = queue.num_requeues(item)
    stack = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    if requeues < max_retries:
        queue.add_rate_limited(item)
        handle_error(err, worker=name, key=item, requeues=requeues, outcome="requeued", traceback=stack)
        return
    queue.forget(item)
    handle_error(err, worker=name, key=item, requeues=requeues, outcome="dropped", traceback=stack)


def run_worker(
    queue: RateLimitingQueue[T],
    reconcile: Reconciler,
    max_retries: int = DEFAULT_MAX_RETRIES,
    forget_after_success: bool = True,
    *,
    name: str = "",
    busy: Callable[[bool], None] | None = None,
) -> None:
    """Process items until the queue shuts down."""
    while process_next_work_item(queue, reconcile, max_retries, forget_after_success, name=name, busy=busy):
        pass


def start_workers(  # noqa: PLR0917 - mirrors MCM's createWorker parameters
    queue: RateLimitingQueue[T],
    name: str,
    count: int,
    reconcile: Reconciler,
    max_retries: int,
    stop: threading.Event,
    *,
    forget_after_success: bool = True,
    clock: Clock = REAL_CLOCK,
    idle_timeout: float = WORKER_IDLE_TIMEOUT,
) -> list[threading.Thread]:
    """Run up to ``count`` daemon worker threads on ``queue``; join the returned threads to wait.

    Each runs :func:`run_worker`'s loop under ``wait.until(…, 1 s, stop)``. Threads start as
    the work needs them: one at first, and one more whenever every started thread holds an
    item, until ``count`` run. So an idle worker always waits in ``get`` (an item never waits
    for a busy worker while fewer than ``count`` are busy), and a quiet queue costs one or two
    threads instead of ``count``. They end as the work goes away: once the queue has had two
    or more idle workers for ``idle_timeout`` seconds (on ``clock``, which must be the
    queue's), idle workers end until one is left idle, as an idle goroutine would be gone. So
    after a burst the thread count returns to where it was.

    The returned list holds the threads in service (and, after shut-down, those still
    ending): it grows as threads start and loses those that ended idle. A thread is never
    removed from it once ``stop`` is set, so joining its members then waits for every worker.
    """
    workers = _Workers(
        queue,
        name,
        count,
        reconcile,
        max_retries,
        stop,
        forget_after_success,
        clock,
        idle_timeout=idle_timeout,
    )
    return workers.threads


_CURRENT = threading.local()
"""``slot``: the :class:`WorkerSlot` of the calling thread when it is a pool worker."""


class WorkerSlot:
    """One worker thread's place in its :func:`start_workers` pool."""

    __slots__ = ("_thread", "_workers")

    def __init__(self, workers: _Workers[Any], thread: threading.Thread) -> None:
        self._workers = workers
        self._thread = thread

    def replace(self) -> bool:
        """Give this worker's place to a new thread (started at once if every other worker is
        busy and the queue has not stopped); the worker ends once its current item is done.
        Safe from any thread; ``False`` when it was already replaced or has ended."""
        return self._workers.replace(self._thread)


def current_worker() -> WorkerSlot | None:
    """The calling thread's :class:`WorkerSlot`; ``None`` unless it is a pool worker."""
    slot: WorkerSlot | None = getattr(_CURRENT, "slot", None)
    return slot


def join_workers(threads: list[threading.Thread], timeout: float | None = None) -> None:
    """Join every thread of a :func:`start_workers` list (once ``stop`` is set), each at most
    ``timeout`` seconds, including threads that started while joining."""
    joined: set[threading.Thread] = set()
    while pending := [t for t in list(threads) if t not in joined]:
        for thread in pending:
            thread.join(timeout)
            joined.add(thread)


class _Workers(Generic[T]):
    """The worker threads of one queue, started and ended on demand (see :func:`start_workers`).

    ``_busy`` counts threads holding an item; ``_spare_since`` is when the queue last came to
    have two or more idle threads (``None`` while it has fewer); ``_replaced`` holds the threads
    whose place went to another (:meth:`replace`) and that still hold their item. All change
    under ``_lock``.
    """

    def __init__(  # noqa: PLR0917 - the parameters of start_workers
        self,
        queue: RateLimitingQueue[T],
        name: str,
        count: int,
        reconcile: Reconciler,
        max_retries: int,
        stop: threading.Event,
        forget_after_success: bool,
        clock: Clock,
        *,
        idle_timeout: float,
    ) -> None:
        self._queue = queue
        self._name = name
        self._count = count
        self._reconcile = reconcile
        self._max_retries = max_retries
        self._stop = stop
        self._forget = forget_after_success
        self._clock = clock
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._busy = 0
        self._spare_since: float | None = None
        self._started = 0
        self._replaced: set[threading.Thread] = set()
        self.threads: list[threading.Thread] = []
        if count > 0:
            with self._lock:
                self._start_one()

    def _start_one(self) -> None:
        """Start the next worker thread (the caller holds ``_lock``)."""
        ended = threading.Event()
        thread = threading.Thread(
            target=until,
            args=(functools.partial(self._work, ended), WORKER_RESTART_PERIOD, ended),
            kwargs={"clock": self._clock},
            name=f"worker-{self._name}-{self._started}",
            daemon=True,
        )
        self._started += 1
        self.threads.append(thread)
        self._count_spares()
        thread.start()

    def _work(self, ended: threading.Event) -> None:
        """Serve the queue until it shuts down or this thread is a spare idle one.

        Sets ``ended`` (which ends the thread's ``until`` loop) when the thread retires or was
        replaced, or when the queue has shut down and ``stop`` is set."""
        _CURRENT.slot = WorkerSlot(self, threading.current_thread())
        while True:
            wait = self._idle_wait()
            taken = self._queue.get() if wait is None else self._queue.get_within(wait)
            if taken is not None:
                item, shutdown = taken
                if shutdown:
                    break
                _process(
                    self._queue,
                    cast(T, item),
                    self._reconcile,
                    self._max_retries,
                    self._forget,
                    name=self._name,
                    busy=self._note,
                )
            if self._replaced and self._leave_if_replaced():
                ended.set()
                return
            if self._retire():
                ended.set()
                return
        if self._stop.is_set():
            ended.set()

    def replace(self, thread: threading.Thread) -> bool:
        """Take ``thread`` (busy with an item) out of the pool and start another in its place
        when every remaining thread is busy; see :meth:`WorkerSlot.replace`."""
        with self._lock:
            if thread not in self.threads or thread in self._replaced:
                return False
            self.threads.remove(thread)
            self._replaced.add(thread)
            self._busy -= 1
            if self._busy >= len(self.threads) < self._count and not self._stop.is_set():
                self._start_one()
            else:
                self._count_spares()
            return True

    def _leave_if_replaced(self) -> bool:
        """True (and forgotten) when the calling thread's place went to another thread."""
        with self._lock:
            thread = threading.current_thread()
            if thread not in self._replaced:
                return False
            self._replaced.discard(thread)
            return True

    def _note(self, busy: bool) -> None:
        with self._lock:
            if not busy and self._replaced and threading.current_thread() in self._replaced:
                return  # its place, and its count, went to the thread that replaced it
            self._busy += 1 if busy else -1
            if busy and self._busy >= len(self.threads) < self._count and not self._stop.is_set():
                self._start_one()
            else:
                self._count_spares()

    def _count_spares(self) -> None:
        """Start or stop the spare clock (the caller holds ``_lock``)."""
        if len(self.threads) - self._busy < 2:
            self._spare_since = None
        elif self._spare_since is None:
            self._spare_since = self._clock.monotonic()

    def _idle_wait(self) -> float | None:
        """How long an idle thread waits for an item before asking whether it may end; ``None``
        (no limit) while the queue has fewer than two idle threads: none of them may end then."""
        with self._lock:
            if self._spare_since is None:
                return None
            return self._spare_since + self._idle_timeout - self._clock.monotonic()

    def _retire(self) -> bool:
        """End the calling (idle) thread if the queue has had a spare one for ``idle_timeout``."""
        if self._spare_since is None:  # the common case, read without the lock: asked again later
            return False
        with self._lock:
            if self._stop.is_set() or self._spare_since is None:
                return False
            if self._clock.since(self._spare_since) < self._idle_timeout:
                return False
            self.threads.remove(threading.current_thread())
            self._count_spares()
            return True

"""Driver calls as the controller makes them: bounded by a deadline, measured, never raising
anything but :class:`~mcm.driver.MachineError`.

Guarantees of :meth:`DriverCaller.call`:

- The call runs on a bounded thread pool (a thread idle for :data:`IDLE_TIMEOUT` ends) and
  gets a :class:`~mcm.driver.CallContext` with ``deadline`` seconds (waiting for a pool thread
  counts). A driver that has not answered by then is abandoned (its context is cancelled so a
  cooperative driver stops) and the call fails with ``DeadlineExceeded``; the worker is never
  held longer.
- An abandoned call that has started still runs until the driver returns; one still waiting for
  a pool thread never starts. ``on_abandon``, when given, is called at the moment the call is
  abandoned (never when it returned in time) and returns a function that is called once the
  driver really returns (or the call was dropped unstarted): the creation flow uses it to keep
  its Machine "in creation" (no second ``CreateMachine``) until then.
- A driver whose :meth:`~mcm.driver.Driver.returns_promptly` says so (``prompt`` is asked
  before each call) is called on the caller's thread instead: it cannot overrun the deadline,
  and the two thread wake-ups of the hand-off were most of such a call's cost.
- A call that changes VMs (CreateMachine, InitializeMachine, DeleteMachine) is made only while
  ``holds_lease`` answers true (the leader elector's :meth:`holds_lease`: leading, renew
  deadline not passed); otherwise :class:`LeaseNotHeld` is raised and the driver is not called.
  :func:`check_lease_fence` is that check. It runs when the call is made and again right before
  the driver is called (a call may wait for a pool thread meanwhile), and a call whose context
  has expired or was cancelled by then is not started either (``Canceled`` or
  ``DeadlineExceeded``). A leader paused past its deadline, whose successor may already have
  deleted the Machine, thus creates no VM for it in the moment before its watchdog notices.
- A driver exception that is not a ``MachineError`` becomes ``MachineError(Internal, ...)``
  (a Go driver's panic would end the process): its text is kept but it never reaches the worker as a crash.
- Every call is observed in ``mcm_cloud_api_driver_request_duration_seconds`` and failures in
  ``mcm_cloud_api_driver_requests_failed_total`` (label ``error_code`` = the code name), with
  label ``provider`` = the MachineClass's ``provider``. The call's context carries the same
  label to the driver's own cloud API metrics (:meth:`~mcm.driver.CallContext.cloud_api_request`).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TypeVar, cast

import structlog

from mcm.controller.metrics import ControllerMetrics
from mcm.driver import CallContext, Code, MachineError, code_name
from mcm.runtime.clock import Clock
from mcm.runtime.errors import TransientError

__all__ = ["IDLE_TIMEOUT", "DriverCaller", "LeaseNotHeld", "check_lease_fence"]

log = structlog.get_logger(__name__)

R = TypeVar("R")


class LeaseNotHeld(TransientError):
    """A VM-changing driver call was refused: this process no longer surely holds the Lease.
    The key is retried with back-off (and the workers stop once leadership ends)."""


IDLE_TIMEOUT = 30.0
"""Seconds a driver-call thread waits for work before it ends."""

_OPERATIONS = {
    "create_machine": "CreateMachine",
    "initialize_machine": "InitializeMachine",
    "delete_machine": "DeleteMachine",
    "get_machine_status": "GetMachineStatus",
    "list_machines": "ListMachines",
    "get_volume_ids": "GetVolumeIDs",
}
_CHANGES_VMS = frozenset({"create_machine", "initialize_machine", "delete_machine"})


def check_lease_fence(method: str, holds_lease: Callable[[], bool] | None) -> None:
    """Raise :class:`LeaseNotHeld` when ``method`` changes VMs and ``holds_lease`` (if given)
    answers false. Call it as late as possible: right before the driver is called."""
    if method in _CHANGES_VMS and holds_lease is not None and not holds_lease():
        raise LeaseNotHeld(f"{_OPERATIONS[method]} not called: the leader Lease is not surely held")


def _check_not_expired(method: str, ctx: CallContext) -> None:
    """Raise the ``MachineError`` of a call whose context was cancelled or whose deadline passed
    before it started."""
    operation = _OPERATIONS.get(method, method)
    if ctx.cancelled.is_set():
        raise MachineError(Code.Canceled, f"{operation} not called: the call was cancelled before it started")
    if ctx.expired():
        raise MachineError(
            Code.DeadlineExceeded, f"{operation} not called: its deadline passed before it started"
        )


class DriverCaller:
    """Runs driver methods with a deadline on a helper thread and records metrics."""

    def __init__(
        self,
        clock: Clock,
        metrics: ControllerMetrics,
        deadline: float,
        *,
        max_threads: int = 64,
        prompt: Callable[[], bool] | None = None,
        holds_lease: Callable[[], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._metrics = metrics
        self._deadline = deadline
        self._pool = _DaemonPool(max_threads, clock=clock)
        self._prompt = prompt
        self._holds_lease = holds_lease

    @property
    def pool_threads(self) -> int:
        """Driver-call threads alive now (busy or idle)."""
        return self._pool.threads

    def call(
        self,
        method: str,
        fn: Callable[[CallContext], R],
        *,
        on_abandon: Callable[[], Callable[[], None]] | None = None,
        provider: str | None = None,
    ) -> R:
        """Run ``fn(ctx)``; see the module docstring. ``method`` is the driver method name,
        ``provider`` the MachineClass's ``provider`` (the metrics' label)."""
        check_lease_fence(method, self._holds_lease)
        provider = provider or ""
        ctx = CallContext.with_timeout(
            self._deadline, self._clock, cloud_api=self._metrics.cloud_api(provider)
        )
        started = self._clock.monotonic()
        guarded = self._guarded(method, fn)
        try:
            if self._prompt is not None and self._prompt():
                result = self._run_here(ctx, guarded)
            else:
                result = self._run(ctx, guarded, on_abandon)
        except MachineError as err:
            self._observe(method, started, err, provider)
            raise
        self._observe(method, started, None, provider)
        return result

    def _guarded(self, method: str, fn: Callable[[CallContext], R]) -> Callable[[CallContext], R]:
        """``fn`` behind the checks made when it starts: the lease fence and the context."""

        def start(ctx: CallContext) -> R:
            check_lease_fence(method, self._holds_lease)
            _check_not_expired(method, ctx)
            return fn(ctx)

        return start

    @staticmethod
    def _run_here(ctx: CallContext, fn: Callable[[CallContext], R]) -> R:
        """The call on this thread, its errors as :meth:`_run` reports them."""
        try:
            return fn(ctx)
        except (MachineError, LeaseNotHeld):
            raise
        except Exception as error:
            raise MachineError(Code.Internal, f"{type(error).__name__}: {error}") from error

    def _run(
        self,
        ctx: CallContext,
        fn: Callable[[CallContext], R],
        on_abandon: Callable[[], Callable[[], None]] | None,
    ) -> R:
        box: dict[str, object] = {}
        done = threading.Event()
        lock = threading.Lock()  # decides, once, between "returned in time" and "abandoned"

        def target() -> None:
            try:
                box["result"] = fn(ctx)
            except BaseException as exc:
                box["error"] = exc
            finally:
                with lock:
                    done.set()
                    late = box.get("late")
                if late is not None:
                    cast(Callable[[], None], late)()

        self._pool.submit(target)
        if not self._clock.wait(done, self._deadline) and self._abandon(done, lock, box, on_abandon):
            ctx.cancel()
            raise MachineError(
                Code.DeadlineExceeded, f"driver call did not return within {self._deadline:g}s"
            )
        error = box.get("error")
        if isinstance(error, MachineError | LeaseNotHeld):
            raise error
        if isinstance(error, Exception):
            raise MachineError(Code.Internal, f"{type(error).__name__}: {error}") from error
        if isinstance(error, BaseException):
            raise error
        return box["result"]  # type: ignore[return-value]

    @staticmethod
    def _abandon(
        done: threading.Event,
        lock: threading.Lock,
        box: dict[str, object],
        on_abandon: Callable[[], Callable[[], None]] | None,
    ) -> bool:
        """Give the call up unless it returned meanwhile; register what its late return releases."""
        with lock:
            if done.is_set():
                return False
            if on_abandon is not None:
                box["late"] = on_abandon()
        log.warning("driver_call_abandoned")
        return True

    def _observe(self, method: str, started: float, err: MachineError | None, provider: str) -> None:
        operation = _OPERATIONS.get(method, method)
        code = None if err is None else code_name(err.code)
        self._metrics.observe_driver_call(operation, self._clock.since(started), code, provider)


class _DaemonPool:
    """At most ``max_threads`` reused daemon threads running submitted callables in order.

    Daemon threads (unlike ``ThreadPoolExecutor``'s) never hold up interpreter exit, so an
    abandoned driver call that never returns cannot block a shutdown. A thread idle for
    ``idle_timeout`` seconds (on ``clock``) ends, so a burst of calls leaves no threads behind.
    """

    def __init__(self, max_threads: int, *, clock: Clock, idle_timeout: float = IDLE_TIMEOUT) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be positive, got {max_threads}")
        self._max = max_threads
        self._clock = clock
        self._idle_timeout = idle_timeout
        self._cond = threading.Condition()
        self._tasks: collections.deque[Callable[[], None]] = collections.deque()
        self._threads = 0
        self._idle = 0

    @property
    def threads(self) -> int:
        """Threads alive now (running a call or idle)."""
        with self._cond:
            return self._threads

    def submit(self, task: Callable[[], None]) -> None:
        with self._cond:
            self._tasks.append(task)
            if self._idle >= len(self._tasks) or self._threads >= self._max:
                self._cond.notify()
                return
            self._threads += 1
        threading.Thread(target=self._work, name="driver-call", daemon=True).start()

    def _work(self) -> None:
        while True:
            task = self._next_task()
            if task is None:
                return
            task()

    def _next_task(self) -> Callable[[], None] | None:
        """The next task; ``None`` once this thread was idle for ``idle_timeout`` (it then ends)."""
        with self._cond:
            deadline = self._clock.monotonic() + self._idle_timeout
            while not self._tasks:
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    self._threads -= 1
                    return None
                self._idle += 1
                try:
                    self._clock.wait_condition(self._cond, remaining)
                finally:
                    self._idle -= 1
            return self._tasks.popleft()

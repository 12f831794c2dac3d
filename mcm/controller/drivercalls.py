"""Driver calls as the controller makes them: bounded by a deadline, measured, never raising
anything but :class:`~mcm.driver.MachineError` (or :class:`LeaseNotHeld`).

Guarantees of :meth:`DriverCaller.call`:

- The driver is called on the caller's own thread (a worker), as upstream's in-process providers
  are called in the worker goroutine: no hand-off to another thread, no thread wake-up. The call
  gets a :class:`~mcm.driver.CallContext` with ``deadline`` seconds.
- A watchdog (one timer on the clock for every call in flight, not a thread per call) enforces
  the deadline. A call still running when it passes is *abandoned* at that moment: ``on_abandon``,
  when given, is called and returns a function that is called once the driver really returns
  (the creation flow keeps its Machine "in creation", so no second ``CreateMachine``, until
  then); when the caller is a pool worker (:func:`~mcm.runtime.worker.current_worker`) its place
  goes to a new thread, so the pool keeps its configured size; the context is cancelled (a
  cooperative driver stops, the gRPC client cancels the call in flight); the failure is counted
  with code ``DeadlineExceeded``. The stuck thread keeps its work-queue key until the driver
  returns, so that key is never reconciled twice at the same time; it then runs what
  ``on_abandon`` returned, its call fails with ``DeadlineExceeded`` whatever the driver answered,
  and the thread ends once its reconcile is done. A driver that never returns holds one daemon
  thread and its one key, nothing else.
- ``on_abandon`` is never called for a call that returned in time.
- A call that changes VMs (CreateMachine, InitializeMachine, DeleteMachine) is made only while
  ``holds_lease`` answers true (the leader elector's :meth:`holds_lease`: leading, renew
  deadline not passed); otherwise :class:`LeaseNotHeld` is raised and the driver is not called.
  :func:`check_lease_fence` is that check. It runs right before the driver is called, and a call
  whose context has expired or was cancelled by then (the process paused after the call was
  made, say) is not started either (``Canceled`` or ``DeadlineExceeded``). A leader paused past
  its deadline, whose successor may already have deleted the Machine, thus creates no VM for it
  in the moment before its elector's watchdog notices.
- A driver exception that is not a ``MachineError`` becomes ``MachineError(Internal, ...)``
  (a Go driver's panic would end the process): its text is kept but it never reaches the worker
  as a crash.
- Every call is observed in ``mcm_cloud_api_driver_request_duration_seconds`` and failures in
  ``mcm_cloud_api_driver_requests_failed_total`` (label ``error_code`` = the code name), with
  label ``provider`` = the MachineClass's ``provider``; an abandoned call is observed when it is
  abandoned, not again when it returns. The call's context carries the same label to the
  driver's own cloud API metrics (:meth:`~mcm.driver.CallContext.cloud_api_request`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import structlog

from mcm.controller.metrics import ControllerMetrics
from mcm.driver import CallContext, Code, MachineError, code_name
from mcm.runtime.clock import Clock
from mcm.runtime.errors import TransientError
from mcm.runtime.worker import WorkerSlot, current_worker

__all__ = ["DriverCaller", "LeaseNotHeld", "check_lease_fence"]

log = structlog.get_logger(__name__)

R = TypeVar("R")


class LeaseNotHeld(TransientError):
    """A VM-changing driver call was refused: this process no longer surely holds the Lease.
    The key is retried with back-off (and the workers stop once leadership ends)."""


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
    """Runs driver methods on the calling thread under a deadline watchdog; records metrics."""

    def __init__(
        self,
        clock: Clock,
        metrics: ControllerMetrics,
        deadline: float,
        *,
        holds_lease: Callable[[], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._metrics = metrics
        self._deadline = deadline
        self._holds_lease = holds_lease
        self._watchdog = _Watchdog(clock, deadline, self._abandoned)

    @property
    def in_flight(self) -> int:
        """Calls running now that have not passed their deadline."""
        return self._watchdog.in_flight

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
        provider = provider or ""
        ctx = CallContext.with_timeout(
            self._deadline, self._clock, cloud_api=self._metrics.cloud_api(provider)
        )
        started = self._clock.monotonic()
        watch = self._watchdog.watch(_Watch(method, provider, ctx, on_abandon, current_worker(), started))
        try:
            check_lease_fence(method, self._holds_lease)
            _check_not_expired(method, ctx)
            result = fn(ctx)
        except (MachineError, LeaseNotHeld) as err:
            self._settle(watch)
            if isinstance(err, MachineError):
                self._observe(method, started, err, provider)
            raise
        except Exception as error:
            self._settle(watch)
            failed = MachineError(Code.Internal, f"{type(error).__name__}: {error}")
            self._observe(method, started, failed, provider)
            raise failed from error
        except BaseException:
            self._settle(watch)
            raise
        self._settle(watch)
        self._observe(method, started, None, provider)
        return result

    def _settle(self, watch: _Watch) -> None:
        """End the watch of a call that returned; if it had been abandoned meanwhile, run what its
        late return releases and raise ``DeadlineExceeded`` (already counted when abandoned)."""
        if self._watchdog.unwatch(watch):
            return
        with watch.lock:  # held by the watchdog until the abandonment is complete
            late = watch.late
        if late is not None:
            late()
        raise MachineError(Code.DeadlineExceeded, f"driver call did not return within {self._deadline:g}s")

    def _abandoned(self, watch: _Watch) -> None:
        """The watchdog gave ``watch`` up (its ``lock`` is held by the caller): keep what its late
        return must release, give its worker's place away, cancel its context, count it."""
        if watch.on_abandon is not None:
            watch.late = watch.on_abandon()
        if watch.worker is not None:
            watch.worker.replace()
        watch.ctx.cancel()
        err = MachineError(Code.DeadlineExceeded, f"driver call did not return within {self._deadline:g}s")
        self._observe(watch.method, watch.started, err, watch.provider)
        log.warning(
            "driver_call_abandoned",
            operation=_OPERATIONS.get(watch.method, watch.method),
            timeout=self._deadline,
            worker_replaced=watch.worker is not None,
        )

    def _observe(self, method: str, started: float, err: MachineError | None, provider: str) -> None:
        operation = _OPERATIONS.get(method, method)
        code = None if err is None else code_name(err.code)
        self._metrics.observe_driver_call(operation, self._clock.since(started), code, provider)


class _Watch:
    """One call in flight. ``lock`` is held by the watchdog while it abandons the call, so the
    call's own thread reads ``late`` only once the abandonment is complete."""

    __slots__ = ("ctx", "deadline", "late", "lock", "method", "on_abandon", "provider", "started", "worker")

    def __init__(  # noqa: PLR0917 - a record
        self,
        method: str,
        provider: str,
        ctx: CallContext,
        on_abandon: Callable[[], Callable[[], None]] | None,
        worker: WorkerSlot | None,
        started: float,
    ) -> None:
        self.method = method
        self.provider = provider
        self.ctx = ctx
        self.on_abandon = on_abandon
        self.worker = worker
        self.started = started
        self.deadline = 0.0
        self.late: Callable[[], None] | None = None
        self.lock = threading.Lock()


class _Watchdog:
    """The deadline of every call in flight, kept with one clock timer.

    Calls are kept in a dict in the order they were watched; every call gets the same
    ``timeout``, read under the lock, so that order is also the order of their deadlines. At
    most one timer is armed, for the first call's deadline (or for the deadline of the call that
    armed it, which the calls watched since cannot precede): watching and unwatching a call is a
    dict insert and delete under a lock, and the timer fires about once per ``timeout`` while
    calls keep coming, whatever their number. When it fires it abandons every call whose deadline
    has passed (``abandon(watch)``, called with ``watch.lock`` held) and re-arms itself for the
    first call left.
    """

    def __init__(self, clock: Clock, timeout: float, abandon: Callable[[_Watch], None]) -> None:
        self._clock = clock
        self._timeout = timeout
        self._abandon = abandon
        self._lock = threading.Lock()
        self._watches: dict[_Watch, None] = {}
        self._armed = False

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._watches)

    def watch(self, watch: _Watch) -> _Watch:
        with self._lock:
            watch.deadline = self._clock.monotonic() + self._timeout
            self._watches[watch] = None
            arm = not self._armed
            self._armed = True
        if arm:
            self._clock.after_func(self._timeout, self._fire)
        return watch

    def unwatch(self, watch: _Watch) -> bool:
        """True for a call that returned in time; False when it had been abandoned."""
        with self._lock:
            return self._watches.pop(watch, False) is None

    def _fire(self) -> None:
        """The timer: abandon the calls past their deadline, re-arm for the first one left."""
        due: list[_Watch] = []
        with self._lock:
            now = self._clock.monotonic()
            for watch in self._watches:
                if watch.deadline > now:
                    break
                due.append(watch)
            for watch in due:
                del self._watches[watch]
                watch.lock.acquire()
            first = next(iter(self._watches), None)
            self._armed = first is not None
        if first is not None:
            self._clock.after_func(first.deadline - now, self._fire)
        for watch in due:
            try:
                self._abandon(watch)
            except Exception as err:  # on the clock's timer thread: never raise there
                log.error("driver_call_abandon_failed", error=f"{type(err).__name__}: {err}")
            finally:
                watch.lock.release()

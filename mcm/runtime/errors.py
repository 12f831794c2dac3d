"""Reporting errors and crashes: the port of apimachinery's ``util/runtime``.

Guarantees:

- :func:`handle_error` never raises. It ignores ``None``, otherwise it calls every function in
  :data:`ERROR_HANDLERS`: by default one that logs the error with its context at error level
  (a context key that clashes with the logger's own fields, such as ``error`` or ``event``, is
  logged as ``context_<key>``, so no error is ever dropped),
  and a crude process-wide rate limit that keeps handled errors at least 1 ms apart (it sleeps,
  like client-go, so a hot error loop cannot flood the log).
- :func:`handle_crash` guards a block or a function. An ``Exception`` escaping it is logged with
  its stack (every function in :data:`PANIC_HANDLERS`), then passed to the extra handlers given to
  ``handle_crash``. If :data:`REALLY_CRASH` is true the exception is re-raised after
  :data:`ON_FATAL` has been called; otherwise it is swallowed. ``BaseException`` subclasses that
  are not ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``) pass through
  untouched, as Go's handler ignores ``http.ErrAbortHandler``.

Why ``REALLY_CRASH`` defaults to ``False`` (client-go's ``ReallyCrash`` defaults to ``true``):
an uncaught exception in a Python thread ends only that thread, so "crash" here means calling
:data:`ON_FATAL`, whose default ends the whole process with ``os._exit(1)``. mcm is also used as
a library (tests, the driver conformance kit, embedding processes), where one buggy handler must
not kill the host. The ``machine-controller`` command turns the Go behaviour on at start-up with
``configure_crash(really_crash=True)``. Tests toggle the module attributes directly (e.g. with
``monkeypatch.setattr(errors, "REALLY_CRASH", True)``); they are read on every call.

Errors and bugs: :class:`TransientError` is the base class of every failure that comes from
outside this process's code: an API server's error answer and a broken or refused connection
(``mcm.runtime.client.errors.RequestError``: the transport wraps every network exception into
one), a driver's error (``mcm.driver.MachineError``), a wait that timed out. Such a failure is
an *error*, the Python form of a Go ``error`` return: retrying later may succeed, and it never
ends the process. Any other exception escaping a reconcile or a handler is a *bug*, the form of
a Go panic: with ``REALLY_CRASH`` on it ends the process. :mod:`mcm.runtime.worker` applies the
distinction.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from types import TracebackType

import structlog

__all__ = [
    "ERROR_HANDLERS",
    "ON_FATAL",
    "PANIC_HANDLERS",
    "REALLY_CRASH",
    "TransientError",
    "configure_crash",
    "handle_crash",
    "handle_error",
    "must",
]

log = structlog.get_logger(__name__)


class TransientError(Exception):
    """A failure outside this process's code; retried with back-off, never a crash.

    Base of ``RequestError`` (``ApiError``, ``ConnectionFailed``) and ``MachineError``.
    A reconciler raises one (or lets one escape) to ask its worker for a rate-limited retry;
    a library raises its own subclass for failures the caller cannot prevent.
    """


ErrorHandler = Callable[[BaseException, Mapping[str, object]], None]
"""Called with the error and the keyword context given to :func:`handle_error`."""

PanicHandler = Callable[[BaseException], None]
"""Called with the exception that escaped a :func:`handle_crash` guard."""

MAX_STACK_BYTES = 64 * 1024
"""Logged stack traces are cut to this size, like client-go's panic logger."""

ERROR_MIN_PERIOD = 0.001
"""Minimum spacing, in seconds, between two handled errors process-wide."""


RESERVED_LOG_KEYS = frozenset({"event", "error", "error_type", "exc_info", "stack_info"})
"""Log fields the error logger sets itself; a context key with one of these names is renamed."""


def _log_fields(err: BaseException, context: Mapping[str, object]) -> dict[str, object]:
    """The error's log fields; clashing context keys become ``context_<key>`` instead of a TypeError."""
    fields: dict[str, object] = {"error": str(err), "error_type": type(err).__name__}
    for key, value in context.items():
        name = f"context_{key}" if key in RESERVED_LOG_KEYS else key
        while name in fields:
            name = f"context_{name}"
        fields[name] = value
    return fields


def _log_error(err: BaseException, context: Mapping[str, object]) -> None:
    log.error("unhandled_error", **_log_fields(err, context))


class _ErrorBackoff:
    """Sleeps the caller so that consecutive handled errors are ``min_period`` apart.

    Real time on purpose: it throttles log volume of the process, not simulated work.
    """

    def __init__(self, min_period: float) -> None:
        self._min_period = min_period
        self._lock = threading.Lock()
        self._last = 0.0

    def on_error(self, _err: BaseException, _context: Mapping[str, object]) -> None:
        now = time.monotonic()
        with self._lock:
            since_last = now - self._last
            self._last = time.monotonic()
        remaining = self._min_period - since_last
        if remaining > 0:  # never sleep with the lock held: only this caller waits
            time.sleep(remaining)


def _log_panic(exc: BaseException) -> None:
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(stack) > MAX_STACK_BYTES:
        stack = stack[:MAX_STACK_BYTES] + "\n... (truncated)"
    log.error("observed_a_panic", panic=repr(exc), error_type=type(exc).__name__, stack=stack)


def _exit_process(_exc: BaseException) -> None:
    """Default :data:`ON_FATAL`: flush what was logged, then end the process at once."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(1)


ERROR_HANDLERS: list[ErrorHandler] = [_log_error, _ErrorBackoff(ERROR_MIN_PERIOD).on_error]
"""Functions :func:`handle_error` calls, in order. Replace or extend at start-up only."""

PANIC_HANDLERS: list[PanicHandler] = [_log_panic]
"""Functions :func:`handle_crash` calls first for an escaping exception."""

REALLY_CRASH: bool = False
"""Re-raise (and call :data:`ON_FATAL`) after handling a crash. See the module docstring."""

ON_FATAL: PanicHandler = _exit_process
"""Called before re-raising when :data:`REALLY_CRASH` is true."""


def configure_crash(*, really_crash: bool, on_fatal: PanicHandler | None = None) -> None:
    """Set the process-wide crash behaviour (call once, at start-up)."""
    global REALLY_CRASH, ON_FATAL
    REALLY_CRASH = really_crash
    if on_fatal is not None:
        ON_FATAL = on_fatal


def handle_error(err: BaseException | None, **context: object) -> None:
    """Report an error that cannot be returned to a caller; ``None`` is ignored.

    ``context`` is logged as key-value pairs (never pass secrets). Handler failures are
    swallowed so reporting an error can never raise.
    """
    if err is None:
        return
    for handler in ERROR_HANDLERS:
        with contextlib.suppress(Exception):
            handler(err, context)


class handle_crash(contextlib.ContextDecorator):  # noqa: N801 - used like a function
    """Guard a block (``with handle_crash():``) or a function (``@handle_crash()``).

    ``additional_handlers`` are called with the exception after the panic handlers.
    """

    def __init__(self, *additional_handlers: PanicHandler) -> None:
        self._additional = additional_handlers

    def __enter__(self) -> handle_crash:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        for handler in (*PANIC_HANDLERS, *self._additional):
            with contextlib.suppress(Exception):
                handler(exc)
        if not REALLY_CRASH:
            return True
        ON_FATAL(exc)
        return False


def must(err: BaseException | None) -> None:
    """Raise ``err`` if it is not ``None``."""
    if err is not None:
        raise err

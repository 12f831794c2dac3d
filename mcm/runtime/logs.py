"""Process-wide structlog setup for mcm's commands (the role klog's flags play upstream).

:func:`configure` makes structlog write one line per event to a stream: ``json`` in the key style
of Kubernetes components, or readable ``console`` text (``text`` is another name for it).

JSON lines carry ``ts`` (Unix seconds, float), ``msg``, ``v`` for info and debug lines (0, or 4
for debug), ``level`` for warnings and errors, ``err`` for an exception's ``Type: message`` and
``stacktrace`` for its traceback, then the key-value pairs of the call.

Guarantees:

- No exception is ever rendered with its frames' local variables: both formats print a plain
  Python traceback (structlog's defaults show locals when ``rich`` is installed, and a driver
  request's secret data sits in a local).
- Events below ``level`` are dropped before any processor runs.

Commands call :func:`configure` once at start-up; libraries only get loggers.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Callable, MutableMapping
from typing import Any, Literal, TextIO

import orjson
import structlog
from structlog.typing import Processor

__all__ = ["FORMATS", "LogFormat", "configure", "kubernetes_keys", "processors"]

LogFormat = Literal["console", "text", "json"]

FORMATS: tuple[LogFormat, ...] = ("console", "text", "json")
"""The accepted values of ``fmt``."""

DEBUG_VERBOSITY = 4
"""The ``v`` a debug line carries (klog's ``--v=4`` shows it)."""


def _exception_of(exc_info: object) -> BaseException | None:
    if exc_info is True:
        return sys.exc_info()[1]
    if isinstance(exc_info, tuple):
        return exc_info[1] if len(exc_info) > 1 and isinstance(exc_info[1], BaseException) else None
    return exc_info if isinstance(exc_info, BaseException) else None


def kubernetes_keys(_logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Rename structlog's fields to the Kubernetes JSON log keys (see the module docstring)."""
    out: dict[str, Any] = {"ts": round(time.time(), 6), "msg": event.pop("event", "")}
    if method in ("debug", "info"):
        out["v"] = DEBUG_VERBOSITY if method == "debug" else 0
    else:
        out["level"] = "warning" if method == "warn" else method
    err = _exception_of(event.pop("exc_info", None))
    if err is not None:
        out["err"] = f"{type(err).__name__}: {err}"
        out["stacktrace"] = "".join(traceback.format_exception(err))
    out.update(event)
    return out


def _compact_json(obj: Any, default: Any = None, **_: Any) -> str:
    """One compact JSON line like a Kubernetes component's (orjson: several times faster than
    ``json.dumps``); values JSON cannot hold go through ``default`` (structlog's ``repr``)."""
    return orjson.dumps(obj, default=default, option=orjson.OPT_NON_STR_KEYS).decode()


def processors(fmt: LogFormat = "console") -> list[Processor]:
    """The processor chain for ``fmt``; no exception renderer in it shows local variables."""
    if fmt == "json":
        json_renderer = structlog.processors.JSONRenderer(serializer=_compact_json)
        return [structlog.contextvars.merge_contextvars, kubernetes_keys, json_renderer]
    if fmt in ("console", "text"):
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        return [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            renderer,
        ]
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def configure(
    fmt: LogFormat = "console",
    *,
    stream: TextIO | None = None,
    level: int = logging.INFO,
    stdlib: bool = False,
    logger_factory: Callable[..., Any] | None = None,
) -> None:
    """Send structlog events at ``level`` or above to ``stream`` (stderr by default) in ``fmt``.

    With ``stdlib``, the standard library's root logger (kubernetes client, gRPC) writes its
    warnings and errors to the same stream. ``logger_factory`` replaces the stream: its loggers
    get each rendered line through the method named after the line's level (``info``,
    ``warning``, ...), so they can route lines by level.
    """
    out = stream if stream is not None else sys.stderr
    structlog.configure(
        processors=processors(fmt),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=logger_factory or structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    if stdlib:
        logging.basicConfig(level=logging.WARNING, stream=out, format="%(levelname)s %(name)s: %(message)s")

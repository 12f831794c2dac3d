"""Logging for the command: structlog, JSON in the key style of Kubernetes components, or text.

JSON lines carry ``ts`` (Unix seconds, float), ``msg``, ``v`` (verbosity of info lines: 0, or 4
for debug lines), ``level`` for warnings and errors, ``err`` for an exception's message, then the
key-value pairs of the call. ``--v`` 4 and above shows debug lines. Standard-library logging
(kubernetes client, gRPC) goes to the same stream at WARNING and above.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

__all__ = ["configure_logging"]


def _kubernetes_keys(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    out: dict[str, Any] = {"ts": round(time.time(), 6), "msg": event.pop("event", "")}
    if method in ("debug", "info"):
        out["v"] = 4 if method == "debug" else 0
    else:
        out["level"] = "warning" if method == "warn" else method
    exc = event.pop("exc_info", None)
    if exc:
        err = sys.exc_info()[1] if exc is True else (exc[1] if isinstance(exc, tuple) else exc)
        if err is not None:
            out["err"] = f"{type(err).__name__}: {err}"
    out.update(event)
    return out


def configure_logging(verbosity: int = 0, fmt: str = "json", stream: TextIO | None = None) -> None:
    """Configure structlog (and the standard library's root logger) for the process."""
    stream = stream or sys.stderr
    level = logging.DEBUG if verbosity >= 4 else logging.INFO
    renderer: Any
    if fmt == "json":
        processors: list[Any] = [structlog.contextvars.merge_contextvars, _kubernetes_keys]
        renderer = structlog.processors.JSONRenderer()
    else:
        processors = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
        ]
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=logging.WARNING, stream=stream, format="%(levelname)s %(name)s: %(message)s")

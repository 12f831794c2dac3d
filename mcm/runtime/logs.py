"""Process-wide structlog setup for mcm's commands (the role klog's flags play upstream).

:func:`configure` makes structlog write one key-value line per event to a stream, as readable
``console`` text or as ``json``. Guarantees:

- No exception is ever rendered with its frames' local variables: the console format prints a
  plain Python traceback and the JSON format a structured one built with ``show_locals=False``.
  (structlog's defaults show locals when ``rich`` is installed, and a driver request's secret
  data sits in a local.)
- Events below ``level`` are dropped before any processor runs.

Commands call :func:`configure` once at start-up; libraries only get loggers.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog
from structlog.typing import Processor

__all__ = ["FORMATS", "LogFormat", "configure", "processors"]

LogFormat = Literal["console", "json"]
FORMATS: tuple[LogFormat, ...] = ("console", "json")
"""The accepted values of ``fmt``."""


def processors(fmt: LogFormat = "console") -> list[Processor]:
    """The processor chain for ``fmt``; every exception renderer in it hides local variables."""
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if fmt == "json":
        transformer = structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        return [
            *shared,
            structlog.processors.ExceptionRenderer(transformer),
            structlog.processors.JSONRenderer(),
        ]
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        return [*shared, renderer]
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def configure(fmt: LogFormat = "console", *, stream: TextIO | None = None, level: int = logging.INFO) -> None:
    """Send structlog events at ``level`` or above to ``stream`` (stderr by default) in ``fmt``."""
    structlog.configure(
        processors=processors(fmt),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream if stream is not None else sys.stderr),
        cache_logger_on_first_use=False,
    )

"""Logging for the command: :mod:`mcm.runtime.logs` driven by ``--v``, ``--log-format`` and the
klog flags upstream manifests pass.

JSON (the default) is in the key style of Kubernetes components; ``--v`` 4 and above shows debug
lines. Standard-library logging (kubernetes client, gRPC) goes to the same place at WARNING and
above. No traceback renders local variables.

Where lines go follows klog: with ``--logtostderr`` (the default) everything goes to stderr and
the file flags have no effect. With ``--logtostderr=false`` lines are appended to ``--log-file``,
else to ``machine-controller.log`` in ``--log-dir`` (the temporary directory when empty); a line
at or above ``--stderrthreshold`` (ERROR by default) is also copied to stderr, every line with
``--alsologtostderr``. A file that grows past ``--log-file-max-size`` megabytes is started afresh,
as klog does with its single log file.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO, cast

from mcm.app.goflags import SEVERITIES
from mcm.runtime import logs

__all__ = [
    "LOG_FILE_NAME",
    "LogFlags",
    "LogLevelFlags",
    "LogOutput",
    "configure_logging",
    "log_output",
    "start_logging",
    "start_logging_to",
]

LOG_FILE_NAME = "machine-controller.log"
"""The file ``machine-controller`` writes in ``--log-dir`` when no ``--log-file`` is given (each
command names its own after itself)."""
_MB = 1024 * 1024
_SEVERITY_OF = {"debug": 0, "info": 0, "warning": 1, "error": 2, "critical": 3}
"""structlog method name → klog severity (INFO 0, WARNING 1, ERROR 2, FATAL 3)."""


@dataclass(frozen=True)
class LogOutput:
    """Where log lines go: stderr only (``file`` None), or a file plus some lines on stderr."""

    file: str | None = None
    every_line_to_stderr: bool = True
    stderr_threshold: int = SEVERITIES.index("ERROR")
    """With a file: lines of this klog severity or above are copied to stderr."""
    max_bytes: int = 0
    """With a file: size after which it is started afresh (0: no limit)."""


class LogLevelFlags(Protocol):
    """``--v`` and ``--log-format``, which every command takes, and the flags set without effect."""

    @property
    def v(self) -> int: ...

    @property
    def log_format(self) -> str: ...

    def without_effect(self) -> list[tuple[str, str]]: ...


class LogFlags(Protocol):
    """The logging flags with klog's (the controller commands take them all:
    :class:`mcm.app.common.CommonFlags`)."""

    v: int
    log_format: str
    logtostderr: bool
    alsologtostderr: bool
    log_dir: str
    log_file: str
    log_file_max_size: int
    stderrthreshold: int

    def without_effect(self) -> list[tuple[str, str]]: ...


def log_output(options: LogFlags, file_name: str = LOG_FILE_NAME) -> LogOutput:
    """The :class:`LogOutput` the klog flags ask for; ``file_name`` is the file in ``--log-dir``."""
    if options.logtostderr:
        return LogOutput()
    path = options.log_file or os.path.join(options.log_dir or tempfile.gettempdir(), file_name)
    return LogOutput(
        file=path,
        every_line_to_stderr=options.alsologtostderr,
        stderr_threshold=options.stderrthreshold,
        max_bytes=options.log_file_max_size * _MB,
    )


def configure_logging(
    verbosity: int = 0, fmt: str = "json", stream: TextIO | None = None, output: LogOutput | None = None
) -> None:
    """Configure structlog (and the standard library's root logger) for the process.

    ``stream`` (default stderr) is where stderr lines go. Raises ``OSError`` when the log file
    of ``output`` cannot be opened.
    """
    level = logging.DEBUG if verbosity >= logs.DEBUG_VERBOSITY else logging.INFO
    fmt_ = cast(logs.LogFormat, fmt)
    if output is None or output.file is None:
        logs.configure(fmt_, stream=stream, level=level, stdlib=True)
        return
    router = _Router(
        _LogFile(output.file, output.max_bytes),
        stream if stream is not None else sys.stderr,
        0 if output.every_line_to_stderr else output.stderr_threshold,
    )
    logs.configure(fmt_, level=level, logger_factory=lambda *_: router)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(_RouterHandler(router))
    root.setLevel(logging.WARNING)


def start_logging(
    options: LogFlags,
    log: Any,
    file_name: str = LOG_FILE_NAME,
    configure: Callable[..., None] | None = None,
) -> bool:
    """A command's logging as its flags ask (``file_name`` in ``--log-dir``; ``configure``, default
    :func:`configure_logging`, sets it up), then one warning ``flag_has_no_effect`` per flag set
    without effect; ``False`` after one line ``error: …`` on stderr when the log file cannot be
    opened."""
    return start_logging_to(log_output(options, file_name), options, log, configure)


def start_logging_to(
    output: LogOutput,
    options: LogLevelFlags,
    log: Any,
    configure: Callable[..., None] | None = None,
) -> bool:
    """:func:`start_logging` for a command that says itself where its lines go (``LogOutput()``:
    stderr, for a command without klog's file flags)."""
    try:
        (configure or configure_logging)(options.v, options.log_format, output=output)
    except OSError as exc:
        print(f"error: cannot open the log file: {exc}", file=sys.stderr, flush=True)
        return False
    for flag, reason in options.without_effect():
        log.warning("flag_has_no_effect", flag=flag, reason=reason)
    return True


class _LogFile:
    """An append-only log file, truncated and started afresh once it would pass ``max_bytes``."""

    def __init__(self, path: str, max_bytes: int) -> None:
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the process lifetime
        self._size = self._file.tell()

    def write_line(self, line: str) -> None:
        data = line + "\n"
        with self._lock:
            if self.max_bytes and self._size + len(data.encode()) >= self.max_bytes:
                self._file.close()
                self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - klog's os.Create
                self._size = 0
            self._file.write(data)
            self._file.flush()
            self._size += len(data.encode())


class _Router:
    """A structlog logger: every line to the file, lines at or above ``threshold`` to stderr too."""

    def __init__(self, file: _LogFile, stderr: TextIO, threshold: int) -> None:
        self._file = file
        self._stderr = stderr
        self._threshold = threshold

    def write(self, severity: int, line: str) -> None:
        self._file.write_line(line)
        if severity >= self._threshold:
            print(line, file=self._stderr, flush=True)

    def __getattr__(self, method: str) -> Any:
        """``info(line)``, ``warning(line)``, ...: the method name is the line's level."""
        if method not in _SEVERITY_OF:
            raise AttributeError(method)
        severity = _SEVERITY_OF[method]
        return lambda line: self.write(severity, line)


class _RouterHandler(logging.Handler):
    """Standard-library records through the same router (WARNING and above reach it)."""

    def __init__(self, router: _Router) -> None:
        super().__init__()
        self._router = router
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        severity = 3 if record.levelno >= logging.CRITICAL else 2 if record.levelno >= logging.ERROR else 1
        self._router.write(severity, self.format(record))

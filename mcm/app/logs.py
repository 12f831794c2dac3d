"""Logging for the command: :mod:`mcm.runtime.logs` driven by ``--v`` and ``--log-format``.

JSON (the default) is in the key style of Kubernetes components; ``--v`` 4 and above shows debug
lines. Standard-library logging (kubernetes client, gRPC) goes to the same stream at WARNING and
above. No traceback renders local variables.
"""

from __future__ import annotations

import logging
from typing import TextIO, cast

from mcm.runtime import logs

__all__ = ["configure_logging"]


def configure_logging(verbosity: int = 0, fmt: str = "json", stream: TextIO | None = None) -> None:
    """Configure structlog (and the standard library's root logger) for the process."""
    level = logging.DEBUG if verbosity >= logs.DEBUG_VERBOSITY else logging.INFO
    logs.configure(cast(logs.LogFormat, fmt), stream=stream, level=level, stdlib=True)

"""Loaded into the controller process only by ``benchmarks/scale.py --tracemalloc FILE`` (this
directory goes on that process's ``PYTHONPATH``, with ``PYTHONTRACEMALLOC`` set): on SIGUSR2 the
process writes a ``tracemalloc`` snapshot to ``$MCM_TRACEMALLOC_OUT`` and then
``<that>.done``."""

from __future__ import annotations

import gc
import os
import signal
import threading
import tracemalloc
from pathlib import Path
from types import FrameType


def _dump() -> None:
    out = Path(os.environ["MCM_TRACEMALLOC_OUT"])
    gc.collect()
    tracemalloc.take_snapshot().dump(str(out))
    Path(f"{out}.done").write_text("ok")


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    threading.Thread(target=_dump, name="tracemalloc-dump", daemon=True).start()


if os.environ.get("MCM_TRACEMALLOC_OUT") and tracemalloc.is_tracing():
    signal.signal(signal.SIGUSR2, _on_signal)

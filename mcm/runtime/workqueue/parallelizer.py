"""Bounded parallel work: the port of client-go's ``util/workqueue/parallelizer.go``.

Guarantees of :func:`parallelize_until`:

- Every piece ``0 .. pieces-1`` is handed to ``do_work_piece`` at most once, and exactly once
  unless ``stop`` is set or a piece raises; it returns only after every worker has finished.
- At most ``workers`` pieces run at the same time (never more threads than chunks).
- Pieces are handed out in chunks of ``chunk_size`` consecutive indices (default 1).
- ``stop`` (client-go's ``ctx.Done()``) is checked before each piece: once set, no new piece
  starts; running pieces are not interrupted.
- A piece that raises is handled like a panic in a goroutine guarded by ``HandleCrash``: it is
  logged by :func:`~mcm.runtime.errors.handle_crash`, that worker stops taking chunks and the
  other workers carry on (or the process ends when ``REALLY_CRASH`` is on).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mcm.runtime.errors import handle_crash

__all__ = ["DoWorkPieceFunc", "parallelize_until"]

DoWorkPieceFunc = Callable[[int], None]
"""Processes the piece with the given index."""


def parallelize_until(
    stop: threading.Event | None,
    workers: int,
    pieces: int,
    do_work_piece: DoWorkPieceFunc,
    *,
    chunk_size: int = 1,
) -> None:
    """Run ``do_work_piece(i)`` for ``i`` in ``range(pieces)`` on up to ``workers`` threads.

    ``stop`` may be ``None`` (never stops early). ``chunk_size < 1`` means 1. As in client-go,
    ``workers < 1`` starts no worker, so nothing is processed.
    """
    if pieces <= 0 or workers < 1:
        return
    chunk_size = max(chunk_size, 1)
    chunks = -(-pieces // chunk_size)
    workers = min(workers, chunks)
    next_chunk = _Counter()

    def work() -> None:
        with handle_crash():
            while (chunk := next_chunk.take()) < chunks:
                start = chunk * chunk_size
                for piece in range(start, min(start + chunk_size, pieces)):
                    if stop is not None and stop.is_set():
                        return
                    do_work_piece(piece)

    if workers == 1:
        work()
        return
    threads = [threading.Thread(target=work, name=f"parallelize-{i}", daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class _Counter:
    """A thread-safe counter standing in for Go's pre-filled, closed chunk channel."""

    __slots__ = ("_lock", "_next")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0

    def take(self) -> int:
        with self._lock:
            value = self._next
            self._next += 1
            return value

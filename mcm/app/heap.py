"""The command's heap: what start-up built is moved out of the cyclic collector's reach.

CPython's full (generation 2) collection holds the GIL, so it stops every thread of the process
for a time proportional to the number of tracked containers it visits. Most of those, in a
controller process, are built once at start-up and live as long as the process: modules,
functions and classes (about 43,000 objects after the command's imports, about 45 ms a full
collection on a 2-core machine of this project's CI, every time one runs), the controller's
wiring, and the objects of the informers' initial lists. Left in the collected generations,
they are visited again by every full collection, and the work a reconcile waits for waits too.

:func:`freeze_start_up_heap` runs one full collection, then ``gc.freeze()``: the survivors go to
the permanent generation, which later collections skip. Guarantees:

- Nothing is kept alive that would otherwise be freed: a frozen object whose last reference
  goes is freed by reference counting at once, as before (a cached Machine replaced by its
  update, for example).
- What a freeze gives up is the collection of *cycles* among frozen objects that become garbage
  later. What start-up builds for the life of the process does not: the process ends when its
  controller stops (a lost Lease included), and cached API objects are plain JSON dicts and lists,
  which hold no cycles.
- It runs once per process, from the command only: a library user or a test that builds
  several controllers in one process keeps the default collector.
"""

from __future__ import annotations

import gc
import time

import structlog

__all__ = ["freeze_start_up_heap"]

log = structlog.get_logger(__name__)


def freeze_start_up_heap() -> None:
    """Collect once, then move every surviving tracked object to the permanent generation."""
    started = time.monotonic()
    collected = gc.collect()
    gc.freeze()
    log.info(
        "start_up_heap_frozen",
        frozen_objects=gc.get_freeze_count(),
        collected=collected,
        seconds=round(time.monotonic() - started, 3),
    )

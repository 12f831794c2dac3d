"""Child processes that do not outlive their parent.

:func:`die_with_parent` returns a ``preexec_fn`` for :class:`subprocess.Popen`. On Linux it asks
the kernel (``prctl(PR_SET_PDEATHSIG)``) to send the child a signal when the thread that started
it ends, which covers a parent killed by ``SIGKILL``: no handler of the parent runs then, so
nothing else could stop the children. Elsewhere it does nothing.

Guarantees:

- The signal is also sent if the parent died between the fork and the ``prctl`` call (the child
  checks that its parent is still the process that started it).
- The ``preexec_fn`` only calls ``prctl``, ``getppid`` and ``kill``: no Python-level locks are
  taken in the child between fork and exec.
- It is tied to the *thread* that called ``Popen``: start children from a thread that lives as
  long as they should (the main thread, usually).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets ``sig`` when the thread that started it ends."""
    if not sys.platform.startswith("linux"):
        return lambda: None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child only calls into it
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec

"""Cache mutation detector: catches code that changes objects it got from an informer.

Cached objects are the shared decoded dicts themselves; a handler or lister user that mutates
one corrupts every other reader's view and the indices. With detection on (informer argument
``detect_mutations=True``, or the environment variable ``KUBE_CACHE_MUTATION_DETECTOR`` set to a
true value, as in client-go) every object the informer adds or updates is deep-copied, and every
``period`` seconds each retained object is compared with its copy. A difference is reported as a
:class:`CacheMutationError` through ``on_failure`` (default: ``handle_error``). Copies are kept for
``retain`` seconds. Detection costs a deep copy per event: meant for tests and debugging.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable
from typing import Any

from mcm.runtime.cache.keys import DeletedFinalStateUnknown
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import handle_error
from mcm.runtime.wait import until

__all__ = ["ENV_VAR", "CacheMutationDetector", "CacheMutationError", "detection_enabled_by_env"]

ENV_VAR = "KUBE_CACHE_MUTATION_DETECTOR"


class CacheMutationError(Exception):
    """An object handed out by an informer was changed after it was cached."""


def detection_enabled_by_env() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() in ("1", "t", "true", "yes", "on")


def _report(err: CacheMutationError) -> None:
    handle_error(err)


class CacheMutationDetector:
    """Keeps deep copies of cached objects and reports any that no longer match."""

    def __init__(
        self,
        name: str,
        *,
        period: float = 1.0,
        retain: float = 300.0,
        clock: Clock = REAL_CLOCK,
        on_failure: Callable[[CacheMutationError], None] = _report,
    ) -> None:
        self.name = name
        self.period = period
        self.retain = retain
        self._clock = clock
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self._entries: list[tuple[float, Any, Any]] = []  # (added at, cached object, copy)

    def add_object(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            return
        entry = (self._clock.monotonic(), obj, copy.deepcopy(obj))
        with self._lock:
            self._entries.append(entry)

    def compare_objects(self) -> None:
        """Report every retained object that differs from its copy; drop expired copies."""
        cutoff = self._clock.monotonic() - self.retain
        with self._lock:
            self._entries = [e for e in self._entries if e[0] >= cutoff]
            entries = list(self._entries)
        for _, cached, copied in entries:
            if cached != copied:
                self._on_failure(CacheMutationError(f"{self.name}: cached object modified: {_name(copied)}"))

    def run(self, stop: threading.Event) -> None:
        until(self.compare_objects, self.period, stop, clock=self._clock)


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return type(obj).__name__
    namespace = meta.get("namespace")
    return f"{obj.get('kind', 'object')} {namespace + '/' if namespace else ''}{meta.get('name', '')}"

"""A recording event handler shared by the informer tests."""

from __future__ import annotations

import threading
from typing import Any

from mcm.runtime.cache import DeletedFinalStateUnknown


def name_of(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return f"tombstone:{obj.key}"
    return str(obj["metadata"]["name"])


class Recorder:
    """A handler recording (event, name[, detail]) tuples; optional gate blocks every call."""

    def __init__(self, gate: threading.Event | None = None, fail_on: str | None = None) -> None:
        self.cond = threading.Condition()
        self.events: list[tuple[Any, ...]] = []
        self.gate = gate
        self.fail_on = fail_on
        self.threads: set[int] = set()

    def _record(self, *event: Any) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        with self.cond:
            self.events.append(event)
            self.threads.add(threading.get_ident())
            self.cond.notify_all()
        if self.fail_on is not None and event[1] == self.fail_on:
            raise RuntimeError(f"handler failed on {self.fail_on}")

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._record("add", name_of(obj), is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        same = old["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]
        self._record("update", name_of(new), "sync" if same else "change")

    def on_delete(self, obj: Any) -> None:
        self._record("delete", name_of(obj))

    def wait_for(self, count: int, timeout: float = 5.0) -> list[tuple[Any, ...]]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.events) >= count, timeout):
                raise TimeoutError(f"handler saw only {self.events}")
            return list(self.events)

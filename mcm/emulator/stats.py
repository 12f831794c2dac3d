"""Request counters and the request log (docs/emulator.md).

Guarantees:

- Counters are kept per ``(verb, group, resource, subresource)`` with per-code counts and total
  and max server time; they are updated after the response is written, under their own lock.
- The request log is a bounded ring (default 10,000 entries), optionally mirrored as JSON lines
  to a file.
- :meth:`Stats.delta` snapshots the counters so a test can assert on what happened inside a block.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import orjson

__all__ = ["Counter", "LogEntry", "Stats", "StatsDelta"]

CounterKey = tuple[str, str, str, str]


@dataclass
class Counter:
    """Counts for one ``(verb, group, resource, subresource)``."""

    count: int = 0
    codes: dict[int, int] = field(default_factory=dict)
    total_seconds: float = 0.0
    max_seconds: float = 0.0


@dataclass(frozen=True)
class LogEntry:
    """One request-log row."""

    time: float
    audit_id: str
    verb: str
    method: str
    path: str
    query: str
    code: int
    duration_ms: float
    user_agent: str
    bytes_out: int


class StatsDelta:
    """Counters accumulated since the ``delta()`` block started (read ``count`` after it)."""

    def __init__(self, stats: Stats) -> None:
        self._stats = stats
        self._start = stats.snapshot()
        self._end: dict[CounterKey, Counter] | None = None

    def close(self) -> None:
        """Freeze the end snapshot."""
        self._end = self._stats.snapshot()

    def count(self, verb: str | None = None, resource: str | None = None, **match: str) -> int:
        """Requests inside the block matching the filters."""
        end = self._end if self._end is not None else self._stats.snapshot()
        return _sum(end, verb, resource, match) - _sum(self._start, verb, resource, match)


def _sum(
    counters: dict[CounterKey, Counter], verb: str | None, resource: str | None, match: dict[str, str]
) -> int:
    total = 0
    for (k_verb, k_group, k_resource, k_sub), counter in counters.items():
        if verb is not None and k_verb != verb:
            continue
        if resource is not None and k_resource != resource:
            continue
        if "group" in match and k_group != match["group"]:
            continue
        if "subresource" in match and k_sub != match["subresource"]:
            continue
        total += counter.count
    return total


class Stats:
    """Per-verb/resource counters and the request log."""

    def __init__(self, log_size: int = 10_000, log_file: str | Path | None = None) -> None:
        self._lock = threading.Lock()
        self._counters: dict[CounterKey, Counter] = {}
        self.log: deque[LogEntry] = deque(maxlen=log_size)
        self._log_file: TextIO | None = None
        if log_file is not None:
            # Line-buffered: a `tail -f` sees each request as soon as it is answered.
            self._log_file = Path(log_file).open("a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def record(self, key: CounterKey, entry: LogEntry) -> None:
        """Count one finished request."""
        seconds = entry.duration_ms / 1000.0
        with self._lock:
            counter = self._counters.get(key)
            if counter is None:
                counter = self._counters[key] = Counter()
            counter.count += 1
            counter.codes[entry.code] = counter.codes.get(entry.code, 0) + 1
            counter.total_seconds += seconds
            counter.max_seconds = max(counter.max_seconds, seconds)
            self.log.append(entry)
            if self._log_file is not None:
                self._log_file.write(orjson.dumps(entry.__dict__).decode() + "\n")

    def count(
        self, verb: str | None = None, resource: str | None = None, *, code: int | None = None, **match: str
    ) -> int:
        """Requests so far matching the filters (``group``, ``subresource`` in ``match``)."""
        with self._lock:
            if code is None:
                return _sum(self._counters, verb, resource, match)
            total = 0
            for key, counter in self._counters.items():
                if _sum({key: counter}, verb, resource, match):
                    total += counter.codes.get(code, 0)
            return total

    def snapshot(self) -> dict[CounterKey, Counter]:
        """A copy of every counter."""
        with self._lock:
            return {
                k: Counter(c.count, dict(c.codes), c.total_seconds, c.max_seconds)
                for k, c in self._counters.items()
            }

    def as_dict(self) -> dict[str, Any]:
        """Counters keyed ``verb/group/resource/subresource`` (JSON friendly)."""
        return {"/".join(k): c.__dict__ for k, c in self.snapshot().items()}

    def reset(self) -> None:
        """Forget all counters and the log."""
        with self._lock:
            self._counters.clear()
            self.log.clear()

    @contextlib.contextmanager
    def delta(self) -> Iterator[StatsDelta]:
        """Counters of the requests made inside the block."""
        delta = StatsDelta(self)
        try:
            yield delta
        finally:
            delta.close()

    def close(self) -> None:
        """Close the log file, if any."""
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    @staticmethod
    def now() -> float:
        """Wall-clock seconds for log rows."""
        return time.time()

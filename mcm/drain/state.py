"""Shared state of one drain: the deadline, the per-pod outcomes, constants and error texts."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from mcm.drain.types import PodOutcome
from mcm.runtime.client.errors import ApiError, ConnectionFailed
from mcm.runtime.clock import Clock
from mcm.runtime.objects import Obj

__all__ = [
    "API_ERRORS",
    "DETACH_TIMEOUT_TEXT",
    "EVICTION_RETRY_INTERVAL",
    "LEFT_DEADLINE",
    "LEFT_NODE_GONE",
    "LEFT_STOPPED",
    "POD_POLL_INTERVAL",
    "REASON_DRAIN_BLOCKED",
    "REASON_DRAIN_FAILED",
    "REASON_DRAIN_STARTED",
    "REASON_DRAIN_SUCCEEDED",
    "REATTACH_TIMEOUT_TEXT",
    "TERMINATION_BUFFER",
    "Deadline",
    "Removed",
    "Tally",
    "aggregate",
]

API_ERRORS = (ApiError, ConnectionFailed)
"""What a failed API call raises: an error answer or no answer at all."""

EVICTION_RETRY_INTERVAL = 20.0
"""``PodEvictionRetryInterval``: pause after a PDB refused an eviction."""
POD_POLL_INTERVAL = 5.0
"""``Interval`` / ``VolumeDetachPollInterval``: re-check period for termination and detach."""
TERMINATION_BUFFER = 30.0
"""Added to the (capped) grace period to bound the wait for a pod to terminate."""
DETACH_TIMEOUT_TEXT = "timeout while waiting for PVs to detach from node"
REATTACH_TIMEOUT_TEXT = "Timeout occurred while waiting for PV to reattach to a different node"
LEFT_DEADLINE = "drain deadline exceeded"
LEFT_STOPPED = "drain stopped"
LEFT_NODE_GONE = "node not found"

REASON_DRAIN_STARTED = "DrainStarted"
REASON_DRAIN_BLOCKED = "DrainBlockedByPDB"
REASON_DRAIN_SUCCEEDED = "DrainSucceeded"
REASON_DRAIN_FAILED = "DrainFailed"


class Deadline:
    """The drain-wide deadline on ``clock``, and interruptible waits bounded by it."""

    def __init__(self, clock: Clock, stop: threading.Event, seconds: float) -> None:
        self.clock = clock
        self.stop = stop
        self.at = clock.monotonic() + max(seconds, 0.0)

    def remaining(self) -> float:
        return max(0.0, self.at - self.clock.monotonic())

    def over(self) -> bool:
        return self.stop.is_set() or self.remaining() <= 0

    def reason(self) -> str:
        return LEFT_STOPPED if self.stop.is_set() else LEFT_DEADLINE

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` (bounded by the deadline) or until ``stop``; False once over."""
        wait = min(seconds, self.remaining())
        if wait > 0:
            self.clock.wait(self.stop, wait)
        return not self.over()


@dataclass
class Tally:
    """Outcomes of all pods; shared by the parallel and the serial path."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    node_gone: bool = False

    def record(self, pod: Obj, action: str, reason: str = "", error: str | None = None) -> None:
        meta = pod["metadata"]
        outcome = PodOutcome(str(meta.get("namespace", "")), str(meta.get("name", "")), action, reason)
        with self.lock:
            self.outcomes[outcome.key] = outcome
            if error:
                self.errors.append(error)

    def of(self, action: str) -> tuple[str, ...]:
        with self.lock:
            return tuple(o.key for o in self.outcomes.values() if o.action == action)

    def left(self) -> tuple[PodOutcome, ...]:
        with self.lock:
            return tuple(o for o in self.outcomes.values() if o.action == "left")


@dataclass
class Removed:
    """A pod whose evict/delete call succeeded and that has yet to terminate."""

    pod: Obj
    action: str
    until: float


def aggregate(errors: Sequence[str]) -> str | None:
    """apimachinery's aggregate: None, the one message, or the distinct ones as ``[a, b]``."""
    distinct = list(dict.fromkeys(e for e in errors if e))
    if not distinct:
        return None
    if len(distinct) == 1:
        return distinct[0]
    return "[" + ", ".join(distinct) + "]"

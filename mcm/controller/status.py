"""Machine status and object writes: no-op writes skipped, conflicts retried soon, state kept.

Guarantees:

- :func:`write_status` / :func:`write_object` never write when the result would equal what the
  cache holds; they return a :class:`Write` saying whether the API accepted the change, hit a
  409 (the caller returns ``CONFLICT_RETRY``, ~200 ms, and the next pass reads fresh data) or
  failed otherwise (an error answer or no answer at all). They never raise for a failed request.
- A write always carries the ``resourceVersion`` of the object it was computed from, so a
  change computed on a stale copy is refused (409) rather than written over someone else's.
- A conflict is routine: it is logged at debug level, and the callers record no Event for it
  (``mcm.controller.common.record_write_failure``); any other failure is a Warning Event.
- :func:`machine_status_update` is upstream's ``machineStatusUpdate``: it sets lastOperation,
  currentStatus and lastKnownState on a copy and skips the write when the new status is
  *similar* to the old one (:func:`is_machine_status_similar`). ``lastKnownState`` is always
  kept unless a new non-empty value is given (upstream drops it when a driver call fails).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.runtime import objects as o
from mcm.runtime.client.errors import RequestError, is_conflict
from mcm.runtime.client.rest import RESTClient

__all__ = [
    "Write",
    "current_status",
    "is_machine_status_similar",
    "last_operation",
    "levenshtein_ratio",
    "machine_status_update",
    "write_object",
    "write_status",
]

log = structlog.get_logger(__name__)

STATUS_REFRESH_PERIOD = 30 * 60.0
"""A similar status is still written when its lastOperation is older than this (upstream)."""
SIMILARITY_THRESHOLD = 0.75
"""Descriptions with a Levenshtein ratio above this count as equal (upstream)."""


@dataclass(frozen=True)
class Write:
    """Outcome of a write: ``obj`` is the stored object (the old one when nothing was written)."""

    obj: dict[str, Any]
    written: bool = False
    error: RequestError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def conflict(self) -> bool:
        return is_conflict(self.error)

    def retry(self, on_success: float) -> float:
        """The retry period after this write: conflict → ConflictRetry, error → Short."""
        if self.error is None:
            return on_success
        return c.CONFLICT_RETRY if self.conflict else c.SHORT_RETRY


def _put(client: RESTClient, new: dict[str, Any], *, status: bool) -> Write:
    try:
        stored = client.update_status(new) if status else client.update(new)
    except RequestError as err:
        level = log.debug if is_conflict(err) else log.warning
        level("write_failed", kind=new.get("kind"), name=o.name_of(new), error=str(err))
        return Write(new, error=err)
    return Write(stored, written=True)


def write_status(client: RESTClient, old: Mapping[str, Any], status: Mapping[str, Any]) -> Write:
    """PUT ``status`` onto a copy of ``old`` (status subresource) unless it is unchanged."""
    if old.get("status") == status:
        return Write(dict(old))
    new = {**old, "status": status}  # never changed after this: a shallow copy is enough
    return _put(client, new, status=True)


def write_object(client: RESTClient, old: Mapping[str, Any], new: dict[str, Any]) -> Write:
    """PUT ``new`` (a changed copy of ``old``) unless it equals ``old``."""
    if new == old:
        return Write(dict(old))
    return _put(client, new, status=False)


def last_operation(
    description: str, state: str, op_type: str, now: _dt.datetime, error_code: str = ""
) -> dict[str, Any]:
    """A ``status.lastOperation``."""
    op: dict[str, Any] = {
        "description": description,
        "state": state,
        "type": op_type,
        "lastUpdateTime": o.format_time(now),
    }
    if error_code:
        op["errorCode"] = error_code
    return op


def current_status(phase: str, now: _dt.datetime, *, timeout_active: bool = False) -> dict[str, Any]:
    """A ``status.currentStatus``."""
    status: dict[str, Any] = {"phase": phase, "lastUpdateTime": o.format_time(now)}
    if timeout_active:
        status["timeoutActive"] = True
    return status


def levenshtein_ratio(first: str, second: str) -> float:
    """``1 - distance / mean length`` over the UTF-8 bytes (upstream's similarity)."""
    a, b = first.encode(), second.encode()
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    previous = list(range(len(b) + 1))
    for i, byte_a in enumerate(a, 1):
        current = [i]
        for j, byte_b in enumerate(b, 1):
            cost = 0 if byte_a == byte_b else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return 1.0 - previous[-1] / ((len(a) + len(b)) / 2)


def is_machine_status_similar(new: Mapping[str, Any], old: Mapping[str, Any], now: _dt.datetime) -> bool:
    """Upstream's ``isMachineStatusSimilar`` over two ``status`` dicts (``machine_util.go``)."""
    new_op, old_op = o.sub(new, "lastOperation"), o.sub(old, "lastOperation")
    new_cur, old_cur = o.sub(new, "currentStatus"), o.sub(old, "currentStatus")
    same_op = all(new_op.get(k) == old_op.get(k) for k in ("state", "type", "errorCode"))
    same_cur = bool(new_cur.get("timeoutActive")) == bool(old_cur.get("timeoutActive"))
    if not (same_op and same_cur and new_cur.get("phase") == old_cur.get("phase")):
        return False
    for op in (new_op, old_op):
        updated = o.parse_time(op.get("lastUpdateTime"))
        if updated is None or (now - updated).total_seconds() > STATUS_REFRESH_PERIOD:
            return False
    new_desc, old_desc = str(new_op.get("description") or ""), str(old_op.get("description") or "")
    return new_desc == old_desc or levenshtein_ratio(new_desc, old_desc) > SIMILARITY_THRESHOLD


def machine_status_update(
    client: RESTClient,
    machine: Mapping[str, Any],
    operation: Mapping[str, Any],
    current: Mapping[str, Any] | None,
    *,
    now: _dt.datetime,
    last_known_state: str = "",
    exact: bool = False,
) -> Write:
    """Upstream's ``machineStatusUpdate`` (``current`` ``None`` keeps currentStatus).

    ``exact`` skips only identical statuses, not merely similar ones: the deletion flow uses it
    whenever the next-step marker changes, so a similar-looking description can never hide a
    step transition.
    """
    old = dict(o.sub(machine, "status"))
    status = dict(old)  # only top-level keys are replaced below
    status["lastOperation"] = dict(operation)
    if current is not None:
        status["currentStatus"] = dict(current)
    if last_known_state:
        status["lastKnownState"] = last_known_state
    same_state = status.get("lastKnownState") == old.get("lastKnownState")
    if not exact and same_state and is_machine_status_similar(status, old, now):
        return Write(dict(machine))
    return write_status(client, machine, status)

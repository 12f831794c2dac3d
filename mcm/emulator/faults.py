"""Fault injection: pause modes, latency and error rules (docs/emulator.md).

Guarantees:

- Rules are evaluated in insertion order; the first matching rule wins. ``times`` bounds how
  often a rule fires (``None`` = forever), ``skip_first`` lets earlier matches through,
  ``probability`` draws from a seeded generator.
- ``phase="before"`` answers before anything is done; ``phase="after"`` lets the request commit
  and then replaces the answer (a lost response).
- Error bodies are the real server's ``Status`` for the code (:mod:`mcm.emulator.errors`); 429
  and 5xx carry ``Retry-After`` when ``retry_after`` is set.
- ``pause("hang")`` parks requests until ``resume()``; ``pause("error")`` answers 503 (health
  endpoints 500). ``pause("refuse")`` is carried out by the emulator (listener closed).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcm.emulator import errors
from mcm.emulator.errors import ApiStatusError

__all__ = ["ErrorRule", "Faults", "LatencyRule", "RequestMeta"]

_MATCH_FIELDS = ("verb", "group", "resource", "subresource", "namespace", "name")


@dataclass(frozen=True)
class RequestMeta:
    """What rules match on."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user_agent: str


def _matches(match: Mapping[str, Any], meta: RequestMeta) -> bool:
    for key in _MATCH_FIELDS:
        want = match.get(key)
        if want is not None and getattr(meta, key) != want:
            return False
    agent = match.get("user_agent")
    return not (agent is not None and re.search(str(agent), meta.user_agent) is None)


@dataclass(eq=False)
class ErrorRule:
    """An injected error; ``hits`` counts how often it fired."""

    faults: Faults
    match: dict[str, Any]
    code: int
    times: int | None = 1
    skip_first: int = 0
    probability: float = 1.0
    phase: str = "before"
    retry_after: int | None = None
    message: str | None = None
    reason: str | None = None
    hits: int = 0
    seen: int = 0

    def remove(self) -> None:
        """Stop applying this rule."""
        self.faults.remove(self)

    def error(self, meta: RequestMeta) -> ApiStatusError:
        """The error response for a match."""
        return build_error(self.code, meta, self.message, self.reason, self.retry_after)


@dataclass(eq=False)
class LatencyRule:
    """A delay applied before handling matching requests; ``hits`` counts the requests delayed."""

    faults: Faults
    seconds: float
    jitter: float = 0.0
    match: dict[str, Any] = field(default_factory=dict)
    hits: int = 0

    def remove(self) -> None:
        """Stop delaying."""
        self.faults.remove(self)


def build_error(
    code: int, meta: RequestMeta, message: str | None, reason: str | None, retry_after: int | None
) -> ApiStatusError:
    """An error Status for ``code`` in the shape of the catalogue."""
    text = message or "injected fault"
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    if code == 409:
        if reason == "AlreadyExists":
            err = errors.already_exists(meta.group, meta.resource, meta.name)
        else:
            err = errors.conflict(meta.group, meta.resource, meta.name)
    elif code == 429:
        err = errors.too_many_requests(
            message or "Too many requests, please try again later.", None, retry_after
        )
    elif code == 500:
        err = errors.internal_error(text)
    elif code == 503:
        err = errors.service_unavailable(message or "the server is currently unable to handle the request")
    elif code == 504:
        err = errors.timeout(text)
    elif code == 401:
        err = errors.unauthorized()
    elif code == 403:
        scope = f'in the namespace "{meta.namespace}"' if meta.namespace else "at the cluster scope"
        err = errors.forbidden(
            message
            or f'{meta.resource} "{meta.name}" is forbidden: User "system:anonymous" cannot {meta.verb} '
            f"resource "
            f'"{meta.resource}" in API group "{meta.group}" {scope}'
        )
    elif code == 404:
        err = errors.not_found(meta.group, meta.resource, meta.name)
    elif code == 410:
        err = errors.expired(message or "too old resource version")
    else:
        err = ApiStatusError(errors.status_failure(code, reason or "BadRequest", text))
    if retry_after is not None and code != 429:
        err.status.setdefault("details", {})["retryAfterSeconds"] = retry_after
    err.headers.update(headers)
    return err


class Faults:
    """The fault state of one emulator."""

    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rules: list[ErrorRule | LatencyRule] = []
        self._random = random.Random(seed)
        self.mode: str | None = None
        self.drop_on_resume = False
        self._resumed = threading.Event()
        self._resumed.set()

    # ------------------------------------------------------------------ controls

    def add(
        self,
        *,
        code: int,
        times: int | None = 1,
        skip_first: int = 0,
        probability: float = 1.0,
        phase: str = "before",
        retry_after: int | None = None,
        message: str | None = None,
        reason: str | None = None,
        **match: Any,
    ) -> ErrorRule:
        """Inject an error response for matching requests."""
        unknown = set(match) - {*_MATCH_FIELDS, "user_agent"}
        if unknown:
            raise ValueError(f"unknown matcher(s): {sorted(unknown)}")
        if phase not in ("before", "after"):
            raise ValueError("phase must be 'before' or 'after'")
        rule = ErrorRule(
            self, dict(match), code, times, skip_first, probability, phase, retry_after, message, reason
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def latency(self, seconds: float, jitter: float = 0.0, **match: Any) -> LatencyRule:
        """Delay matching requests by ``seconds`` (+ uniform jitter)."""
        rule = LatencyRule(self, seconds, jitter, dict(match))
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: ErrorRule | LatencyRule) -> None:
        """Remove one rule."""
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules.clear()

    def set_pause(self, mode: str | None, drop_on_resume: bool = False) -> None:
        """Enter a pause mode (None to resume)."""
        if mode not in (None, "refuse", "hang", "error"):
            raise ValueError(f"unknown pause mode {mode!r}")
        self.mode = mode
        self.drop_on_resume = drop_on_resume
        if mode == "hang":
            self._resumed.clear()
        else:
            self._resumed.set()

    # ------------------------------------------------------------------ request path

    def wait_if_hung(self) -> bool:
        """Block while paused in ``hang`` mode; return False if the request should be dropped."""
        if self._resumed.is_set():
            return True
        drop = self.drop_on_resume
        self._resumed.wait()
        return not drop

    def delay_for(self, meta: RequestMeta) -> float:
        """Total latency to inject for this request."""
        with self._lock:
            rules = [r for r in self._rules if isinstance(r, LatencyRule) and _matches(r.match, meta)]
            for rule in rules:
                rule.hits += 1
        delay = 0.0
        for rule in rules:
            delay += rule.seconds + (self._random.uniform(0, rule.jitter) if rule.jitter else 0.0)
        return delay

    def sleep_for(self, meta: RequestMeta) -> None:
        """Apply latency rules."""
        delay = self.delay_for(meta)
        if delay > 0:
            time.sleep(delay)

    def match(self, meta: RequestMeta) -> ErrorRule | None:
        """The first error rule that fires for this request (counting the hit)."""
        with self._lock:
            for rule in self._rules:
                if not isinstance(rule, ErrorRule) or not _matches(rule.match, meta):
                    continue
                rule.seen += 1
                if rule.seen <= rule.skip_first:
                    continue
                if rule.times is not None and rule.hits >= rule.times:
                    continue
                if rule.probability < 1.0 and self._random.random() >= rule.probability:
                    continue
                rule.hits += 1
                return rule
        return None

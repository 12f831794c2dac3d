"""Start-up checks of the clusters: wait until they answer, for as long as it takes.

Guarantees:

- A failed request (an error answer, a reset, a refused or timed-out connection) is retried
  after 1 s, doubling to :data:`STARTUP_RETRY_CAP`, until the cluster answers or ``stop`` is
  set; each failed attempt is logged once (``cluster_not_reachable`` with the reason). A
  network blip at start-up never ends the process. Upstream (``getAvailableResources`` in
  MCM v0.47.0 ``cmd/machine-controller/app/controllermanager.go``) polls for 10 s and then
  exits (klog.Fatal), which in a cluster means CrashLoopBackOff for as long as the blip lasts.
- A control cluster that answers but does not serve ``machine.sapcloud.io/v1alpha1
  machines`` (the manager: also ``machinesets`` and ``machinedeployments``) is a configuration
  error: :class:`StartupError` (one line, exit 1), as upstream. So is a kubeconfig naming a file
  that cannot be used (a missing client certificate, a CA that does not parse): building the
  client raises ``ConfigError`` before these checks run, so only network faults and error
  answers are waited for here.
- Time comes from the injected clock, so tests drive the back-off without waiting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from mcm.apis.machine.v1alpha1 import API_VERSION
from mcm.app.clients import Clients
from mcm.app.process import ControllerProcess, StartupError
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.wait import MAX_INT32, Backoff

__all__ = [
    "STARTUP_RETRY_CAP",
    "STARTUP_RETRY_INITIAL",
    "check_control_cluster",
    "check_target_cluster",
    "describe",
    "retry_until_stopped",
    "wait_for_clusters",
]

log = structlog.get_logger("startup")

STARTUP_RETRY_INITIAL = 1.0
"""Seconds before the first retry of a start-up check of a cluster; doubled after each failure."""
STARTUP_RETRY_CAP = 30.0
"""The longest wait between two start-up checks of a cluster (upstream gives up after 10 s)."""


def describe(exc: Exception) -> str:
    """The first line of an error, for one log field."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def retry_until_stopped(
    attempt: Callable[[], str | None], what: str, stop: threading.Event, clock: Clock
) -> bool:
    """Call ``attempt`` (``None``: it succeeded, else why not) until it succeeds (``True``) or
    ``stop`` is set (``False``), waiting 1 s doubling to :data:`STARTUP_RETRY_CAP` between
    attempts. Each failed attempt is logged once, as one line with its reason."""
    backoff = Backoff(duration=STARTUP_RETRY_INITIAL, factor=2.0, steps=MAX_INT32, cap=STARTUP_RETRY_CAP)
    failures = 0
    while not stop.is_set():
        reason = attempt()
        if reason is None:
            if failures:
                log.info("cluster_reachable", cluster=what, failed_attempts=failures)
            return True
        failures += 1
        delay = backoff.step()
        log.warning("cluster_not_reachable", cluster=what, reason=reason, attempt=failures, retry_in=delay)
        if clock.wait(stop, delay):
            break
    return False


def check_control_cluster(
    control: ClusterClient,
    stop: threading.Event,
    *,
    clock: Clock = REAL_CLOCK,
    resources: tuple[str, ...] = ("machines",),
    component: str = "machine controller",
) -> bool:
    """Wait until the control cluster answers ``/healthz`` and discovery, retrying failed
    requests with capped back-off for as long as it takes; ``False`` if ``stop`` came first.
    Raises StartupError if it answers but does not serve every one of ``resources`` of the
    Machine API (``component`` names what cannot start)."""
    discovery = control.with_user_agent("controller-discovery")
    missing: list[list[str]] = []

    def answers() -> str | None:
        try:
            body = discovery.get_bytes("/healthz").strip()
            if body != b"ok":
                return f"/healthz answered {body[:80]!r}"
            served = discovery.discovery()
            missing.append([r for r in resources if not served.has_resource(API_VERSION, r)])
        except NotFound:
            missing.append(list(resources))
        except (ApiError, ConnectionFailed) as exc:
            return describe(exc)
        return None

    if not retry_until_stopped(answers, f"control {control.host}", stop, clock):
        return False
    if missing[-1]:
        raise StartupError(
            f"unable to start {component}: the control cluster {control.host} does not serve "
            f"{API_VERSION} {', '.join(missing[-1])} (are the Machine CRDs installed?)"
        )
    return True


def check_target_cluster(target: ClusterClient, stop: threading.Event, *, clock: Clock = REAL_CLOCK) -> bool:
    """Wait until the target cluster answers ``/version`` (retried as the control cluster's
    checks are); ``False`` if ``stop`` came first."""

    def answers() -> str | None:
        try:
            target.discovery().server_version()
        except (ApiError, ConnectionFailed) as exc:
            return describe(exc)
        return None

    return retry_until_stopped(answers, f"target {target.host}", stop, clock)


def wait_for_clusters(
    process: ControllerProcess,
    clients: Clients,
    resources: tuple[str, ...] = ("machines",),
    component: str = "machine controller",
) -> bool:
    """A process's start-up wait: the control cluster answers and serves ``resources`` of the
    Machine API, then the target (if any) answers; ``process.waiting_for`` names the cluster
    waited for (``/readyz`` says it). ``False`` if the process's stop event came first."""
    process.waiting_for = "the control cluster"
    if not check_control_cluster(clients.control, process.stop, resources=resources, component=component):
        return False
    if clients.target is not None:
        process.waiting_for = "the target cluster"
        if not check_target_cluster(clients.target, process.stop):
            return False
    process.waiting_for = None
    return True

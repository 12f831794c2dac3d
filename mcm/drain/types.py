"""The drain's inputs and output: options, listers and the result.

:class:`DrainOptions` holds the knobs of one drain (one deadline for the whole drain, HEAD);
:class:`DrainListers` the target-cluster caches the drain reads; :class:`DrainResult` what
happened, with enough detail for the machine controller's ``lastOperation`` descriptions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mcm.drain.podevents import PodDeletions
from mcm.runtime.cache import Lister

__all__ = [
    "DEFAULT_MACHINE_DRAIN_TIMEOUT",
    "DEFAULT_MAX_EVICT_RETRIES",
    "DEFAULT_MAX_PARALLEL_EVICTIONS",
    "DEFAULT_PV_DETACH_TIMEOUT",
    "DEFAULT_PV_REATTACH_TIMEOUT",
    "DrainListers",
    "DrainOptions",
    "DrainResult",
    "PodOutcome",
]

DEFAULT_MACHINE_DRAIN_TIMEOUT = 2 * 3600.0
"""``--machine-drain-timeout`` default (``drain.DefaultMachineDrainTimeout``)."""
DEFAULT_MAX_EVICT_RETRIES = 360
"""``--machine-max-evict-retries`` default (2 h ÷ 20 s)."""
DEFAULT_PV_DETACH_TIMEOUT = 120.0
DEFAULT_PV_REATTACH_TIMEOUT = 90.0
DEFAULT_MAX_PARALLEL_EVICTIONS = 20
"""Upstream starts one goroutine per pod; mcm bounds the concurrent evictions instead."""


@dataclass(frozen=True)
class DrainOptions:
    """How to drain one node. Durations are seconds."""

    timeout: float = DEFAULT_MACHINE_DRAIN_TIMEOUT
    """Drain-wide deadline, measured from the start of :func:`~mcm.drain.run_drain` (HEAD)."""
    max_evict_retries: int = DEFAULT_MAX_EVICT_RETRIES
    """Eviction attempts per pod (per pass for PV pods) before one delete; ≤ 0 deletes at once."""
    pv_detach_timeout: float = DEFAULT_PV_DETACH_TIMEOUT
    """Added to the pod's grace period to bound the wait for its volumes to detach."""
    pv_reattach_timeout: float = DEFAULT_PV_REATTACH_TIMEOUT
    """Bound of the wait for a PV pod's volumes to attach to another node (a timeout only warns)."""
    force: bool = False
    """Delete every pod with grace period 0 and wait for nothing (no eviction, no PDBs)."""
    grace_period: int | None = None
    """``gracePeriodSeconds`` sent with evictions; ``None`` (or negative) keeps the pod's own."""
    delete_local_data: bool = True
    """Drain pods with ``emptyDir`` volumes (a warning); otherwise they make the drain fail."""
    ignore_pods_without_controllers: bool = True
    """Drain bare pods (a warning); otherwise they make the drain fail."""
    ignore_daemonsets: bool = True
    """Skip DaemonSet pods with a warning; otherwise they make the drain fail."""
    max_parallel_evictions: int = DEFAULT_MAX_PARALLEL_EVICTIONS
    """Concurrent evictions/deletions of pods without PVs (at least 1)."""


@dataclass(frozen=True)
class DrainListers:
    """Listers over the controller's target-cluster informers (never mutated by the drain)."""

    pods: Lister
    pdbs: Lister
    pvs: Lister
    pvcs: Lister
    pods_synced: Callable[[], bool] | None = None
    """The pod informer's ``has_synced``; the drain waits for it (HEAD) when given."""
    pod_deletions: PodDeletions | None = None
    """The pod informer's delete events: with them, the wait for evicted pods ends as soon as the
    informer has seen them go; without, it polls the API server every 5 s."""


@dataclass(frozen=True)
class PodOutcome:
    """What happened to one pod: ``evicted``, ``deleted``, ``gone`` (already away) or ``left``."""

    namespace: str
    name: str
    action: str
    reason: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DrainResult:
    """The outcome of one drain.

    ``ok`` is true only when no error occurred and no pod was left behind, except that a node
    that disappeared mid-way ends the drain cleanly (``node_gone``; its pods are listed in
    ``left_behind`` with reason ``node not found`` and are never counted as drained).
    """

    node: str
    duration: float
    evicted: tuple[str, ...] = ()
    """``<ns>/<name>`` of pods removed through the eviction API."""
    deleted: tuple[str, ...] = ()
    """``<ns>/<name>`` of pods removed through DELETE (force mode, eviction unsupported or the
    final attempt after the eviction retries)."""
    gone: tuple[str, ...] = ()
    """Pods that were already gone (NotFound, or replaced by a pod with another UID)."""
    left_behind: tuple[PodOutcome, ...] = ()
    """Pods still on the node, each with the reason."""
    warnings: tuple[str, ...] = ()
    """Pod-filter warnings (``"Deleting pods with local storage: <pods>"`` …)."""
    error: str | None = None
    """The aggregated error (upstream's ``Drain failed due to - <err>``), ``None`` on success."""
    timed_out: bool = False
    """The drain-wide deadline passed before every pod was handled."""
    node_gone: bool = False
    forced: bool = False
    skipped: tuple[str, ...] = field(default=())
    """Pods not drained on purpose (mirror and DaemonSet pods)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def pending_pods(self) -> str:
        """Upstream's ErrOut text for a failed drain: one ``<ns>/<name>`` line per pod left."""
        return "".join(f"{p.key}\n" for p in self.left_behind)

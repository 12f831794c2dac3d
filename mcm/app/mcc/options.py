"""The flags of ``machine-config-controller``: one table, one dataclass, one ``validate``.

Values parse as pflag parses them (``--leader-elect=false``, durations such as ``15s``), like
the ``machine-controller`` command's; durations are held in seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mcm.app.options import Flag, leader_election_duration_errors
from mcm.runtime.leaderelection import DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD

__all__ = ["FLAGS", "MccOptions"]

FLAGS: tuple[Flag, ...] = (
    Flag("kubeconfig", "string", "", "Path to a kubeconfig; empty: the in-cluster configuration.", "Cluster"),
    Flag(
        "namespace",
        "string",
        "default",
        "Namespace of the leader-election Lease machine-config-controller.",
        "Cluster",
    ),
    Flag("kube-api-qps", "float32", 20.0, "QPS to use while talking with the API server.", "Cluster"),
    Flag("kube-api-burst", "int32", 30, "Burst to use while talking with the API server.", "Cluster"),
    Flag("port", "int32", 10260, "The port of /metrics, /healthz and /readyz.", "Server"),
    Flag("address", "ip", "0.0.0.0", "The IP address to serve on (0.0.0.0 for all interfaces).", "Server"),
    Flag("concurrent-syncs", "int32", 5, "Workers per sub-controller queue.", "Controller"),
    Flag(
        "render-delay",
        "duration",
        5.0,
        "How long the RenderController waits after a MachineConfig change, so a burst renders once.",
        "Controller",
    ),
    Flag("resync-period", "duration", 0.0, "Informer resync period (0: none).", "Controller"),
    Flag(
        "shutdown-grace-period",
        "duration",
        30.0,
        "How long workers get to finish after SIGTERM before the process exits anyway.",
        "Controller",
    ),
    Flag("leader-elect", "bool", True, "Elect a leader before running the controllers.", "Leader election"),
    Flag(
        "leader-elect-lease-duration",
        "duration",
        DEFAULT_LEASE_DURATION,
        "How long non-leaders wait after the last observed renewal before taking the lease.",
        "Leader election",
    ),
    Flag(
        "leader-elect-renew-deadline",
        "duration",
        DEFAULT_RENEW_DEADLINE,
        "How long the leader keeps retrying to renew before it gives up leading.",
        "Leader election",
    ),
    Flag(
        "leader-elect-retry-period",
        "duration",
        DEFAULT_RETRY_PERIOD,
        "How long clients wait between tries of actions.",
        "Leader election",
    ),
    Flag("v", "int32", 0, "Log verbosity: 0-3 info, 4 and above debug.", "Logging"),
    Flag("log-format", "string", "json", "Log format: json (Kubernetes component style) or text.", "Logging"),
)

_DEFAULTS = {flag.field: flag.default for flag in FLAGS}


@dataclass(frozen=True)
class MccOptions:
    """Parsed flags (field = flag name in snake_case; durations in seconds)."""

    kubeconfig: str = _DEFAULTS["kubeconfig"]
    namespace: str = _DEFAULTS["namespace"]
    kube_api_qps: float = _DEFAULTS["kube_api_qps"]
    kube_api_burst: int = _DEFAULTS["kube_api_burst"]
    port: int = _DEFAULTS["port"]
    address: str = _DEFAULTS["address"]
    concurrent_syncs: int = _DEFAULTS["concurrent_syncs"]
    render_delay: float = _DEFAULTS["render_delay"]
    resync_period: float = _DEFAULTS["resync_period"]
    shutdown_grace_period: float = _DEFAULTS["shutdown_grace_period"]
    leader_elect: bool = _DEFAULTS["leader_elect"]
    leader_elect_lease_duration: float = _DEFAULTS["leader_elect_lease_duration"]
    leader_elect_renew_deadline: float = _DEFAULTS["leader_elect_renew_deadline"]
    leader_elect_retry_period: float = _DEFAULTS["leader_elect_retry_period"]
    v: int = _DEFAULTS["v"]
    log_format: str = _DEFAULTS["log_format"]

    def replace(self, **changes: Any) -> MccOptions:
        return dataclasses.replace(self, **changes)

    def validate(self) -> list[str]:
        """One message per problem, each naming its flag."""
        errors = []
        if self.concurrent_syncs < 1:
            errors.append("--concurrent-syncs must be at least 1")
        if not 0 <= self.port <= 65535:
            errors.append(f"--port must be between 0 and 65535, got {self.port}")
        if self.render_delay < 0 or self.resync_period < 0:
            errors.append("--render-delay and --resync-period must not be negative")
        if self.log_format not in ("json", "text"):
            errors.append(f"--log-format must be json or text, got {self.log_format!r}")
        if self.leader_elect:
            errors.extend(self._leader_election_errors())
        return errors

    def _leader_election_errors(self) -> list[str]:
        return leader_election_duration_errors(
            self.leader_elect_lease_duration, self.leader_elect_renew_deadline, self.leader_elect_retry_period
        )

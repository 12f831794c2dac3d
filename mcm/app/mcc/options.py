"""The options of ``machine-config-controller``: one table of flags, one dataclass, ``validate``.

:class:`MccOptions` is the table: each field is a flag (:func:`mcm.app.flags.flag`), in the order
``--help`` and ``docs/machineconfig-flags.md`` show them; both are generated from it
(:mod:`mcm.app.mcc.flagsdoc`). The flags every mcm command takes (the server, the API client's
rate, the workers, leader election, the shutdown grace period, ``--v`` and ``--log-format``) are
:class:`mcm.app.common.CommonFlags`', declared here with :func:`~mcm.app.common.common`, with this
command's defaults where they differ (port 10260, 5 workers) and its help where its use differs
(one API server, the workers of each sub-controller's queue, a namespace that holds only the
Lease); ``--v`` has no ``-v`` shorthand here. The controller's tunables default to
:class:`mcm.machineconfig.context.Options`', so each default is written once. Values parse as
pflag parses them (``--leader-elect=false``, durations such as ``15s``, held in seconds). The
command has no flag accepted for compatibility only.

:meth:`MccOptions.validate` gives one message per problem, each naming its flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcm.app.common import TableOptions, common, leader_election_duration_errors, log_format_errors
from mcm.app.flags import Flag, flag, flags_of
from mcm.machineconfig.api import LEASE_NAME
from mcm.machineconfig.context import Options

__all__ = ["FLAGS", "MccOptions"]

_O = Options()
"""The controller's defaults: the flags that set its options default to them."""
_QPS = "QPS to use while talking with the API server."
_BURST = "Burst to use while talking with the API server."


@dataclass(frozen=True)
class MccOptions(TableOptions):
    """Parsed flag values (durations in seconds); each field is the flag of the same name."""

    # --- cluster ---
    kubeconfig: str = flag(
        "", "string", "Path to a kubeconfig; empty: the in-cluster configuration.", group="Clusters"
    )
    namespace: str = common("namespace", help=f"Namespace of the leader-election Lease {LEASE_NAME}.")
    kube_api_qps: float = common("kube_api_qps", help=_QPS)
    kube_api_burst: int = common("kube_api_burst", help=_BURST)
    # --- server ---
    port: int = common("port", default=10260)
    address: str = common("address")
    # --- controller ---
    concurrent_syncs: int = common("concurrent_syncs", default=5, help="Workers per sub-controller queue.")
    render_delay: float = flag(
        _O.render_delay,
        "duration",
        "How long the RenderController waits after a MachineConfig change, so a burst renders once.",
    )
    resync_period: float = flag(_O.resync, "duration", "Informer resync period (0: none).")
    # --- process ---
    shutdown_grace_period: float = common("shutdown_grace_period")
    # --- leader election ---
    leader_elect: bool = common("leader_elect")
    leader_elect_lease_duration: float = common("leader_elect_lease_duration")
    leader_elect_renew_deadline: float = common("leader_elect_renew_deadline")
    leader_elect_retry_period: float = common("leader_elect_retry_period")
    # --- logging ---
    v: int = common("v", shorthand="")
    log_format: str = common("log_format")

    def validate(self) -> list[str]:
        """One message per problem, each naming its flag."""
        errors = []
        if self.concurrent_syncs < 1:
            errors.append("--concurrent-syncs must be at least 1")
        if not 0 <= self.port <= 65535:
            errors.append(f"--port must be between 0 and 65535, got {self.port}")
        if self.render_delay < 0 or self.resync_period < 0:
            errors.append("--render-delay and --resync-period must not be negative")
        errors += log_format_errors(self)
        if self.leader_elect:
            errors += leader_election_duration_errors(
                self.leader_elect_lease_duration,
                self.leader_elect_renew_deadline,
                self.leader_elect_retry_period,
            )
        return errors


FLAGS: tuple[Flag, ...] = flags_of(MccOptions)
"""Every flag of the command, in :class:`MccOptions`' order (``--help`` and the docs)."""

"""The options of the ``machine-controller-manager`` command: one table of flags, one dataclass,
``validate``.

:class:`ManagerCommandOptions` is the table: each field is a flag with upstream v0.47.0's name,
pflag type and default (``cmd/machine-controller-manager/app/options/options.go``,
``MCMServer.AddFlags``, and ``pkg/util/client/leaderelectionconfig/config.go``), HEAD's spelling
``--autoscaler-scaledown-annotation-during-rollout`` beside v0.47.0's
``--autoscaler-scaldown-annotation-during-rollout``, klog's flags and mcm's own
(``--shutdown-grace-period``, ``--log-format``). The flags every command takes are
:class:`mcm.app.common.CommonFlags`'s; the manager's own defaults are
:class:`mcm.manager.ManagerOptions`'s, so each default is written once. v0.47.0's binary also took
the legacy machine controller's flags (``--machine-creation-timeout`` and the rest); they are
accepted here without effect, so an upstream manifest starts unchanged. :meth:`validate` applies
HEAD's ``Validate()`` rules plus the leader-election library's and klog's, one message per
problem, each naming its flag.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mcm.app.common import (
    OptionsMixin,
    client_errors,
    common,
    concurrent_syncs_errors,
    leader_election_errors,
    logging_errors,
    negative_duration_errors,
    port_errors,
    profiling_errors,
    target_errors,
)
from mcm.app.flags import Flag, flag, flags_of, same_flag
from mcm.app.options import Options
from mcm.manager import ManagerOptions

__all__ = ["FLAGS", "LOG_FILE_NAME", "ManagerCommandOptions", "manager_options"]

LOG_FILE_NAME = "machine-controller-manager.log"
"""The file written in ``--log-dir`` when no ``--log-file`` is given."""

_M = ManagerOptions()
"""The manager's defaults: the flags that set its options default to them."""
_LEGACY = "a machine-controller flag: set it there"
_MC = "Machine controller (upstream v0.47.0's manager binary)"


def _legacy(name: str, default: Any) -> Any:
    """A legacy machine-controller flag of upstream v0.47.0's manager binary: ``machine-controller``'s
    help, v0.47.0's default, no effect here."""
    return same_flag(Options, name, default=default, group=_MC, no_effect=_LEGACY)


@dataclass
class ManagerCommandOptions(OptionsMixin):
    """Parsed flag values (durations in seconds); each field is the flag of the same name."""

    # --- server ---
    port: int = common("port", default=10258)
    address: str = common("address")
    profiling: bool = common("profiling")
    contention_profiling: bool = common("contention_profiling")
    # --- clusters and clients ---
    target_kubeconfig: str = common(
        "target_kubeconfig",
        help="Path to the kubeconfig of the target cluster (where the Nodes are). Empty: in-cluster config. "
        "'none': no target cluster (no node taints or cluster-autoscaler annotations during roll-outs).",
    )
    control_kubeconfig: str = common(
        "control_kubeconfig",
        help="Path to the kubeconfig of the control cluster (MachineDeployments, MachineSets, Machines). "
        "Empty: the target cluster's config; 'inClusterConfig': the pod's service account.",
    )
    namespace: str = common(
        "namespace",
        default=_M.namespace,
        help="Namespace of the control cluster holding MachineDeployments, MachineSets and Machines, "
        "and of the leader-election Lease.",
    )
    cloud_provider: str = common("cloud_provider", no_effect="the manager calls no cloud")
    kube_api_content_type: str = common("kube_api_content_type")
    kube_api_qps: float = common("kube_api_qps")
    kube_api_burst: int = common("kube_api_burst")
    # --- manager ---
    concurrent_syncs: int = common("concurrent_syncs", default=_M.concurrent_syncs, group="Manager")
    min_resync_period: float = common("min_resync_period", default=_M.min_resync_period, group="Manager")
    controller_start_interval: float = common("controller_start_interval", group="Manager")
    safety_up: int = flag(
        _M.safety_up,
        "int32",
        "Excess machines permitted for a MachineSet or MachineDeployment beyond its expected number "
        "(replicas + maxSurge): the upper limit. A set that reaches it is frozen (no creations) until "
        "its machines fall to the lower limit. upper limit = replicas + maxSurge (if applicable) + safetyUp.",
        group="Manager",
    )
    safety_down: int = flag(
        _M.safety_down,
        "int32",
        "Upper limit minus safety-down gives the lower limit, at or below which a frozen MachineSet "
        "or MachineDeployment is unfrozen.",
        group="Manager",
    )
    machine_safety_overshooting_period: float = flag(
        _M.machine_safety_overshooting_period,
        "duration",
        "Period of the check for MachineSets with more machines than their upper limit.",
        group="Manager",
    )
    autoscaler_scaledown_annotation_during_rollout: bool = flag(
        _M.autoscaler_scaledown_annotation_during_rollout,
        "bool",
        "Add the cluster-autoscaler scale-down-disabled annotation to the nodes of a "
        "MachineDeployment during a roll-out.",
        group="Manager",
        aliases=("autoscaler-scaldown-annotation-during-rollout",),
    )
    # --- leader election ---
    leader_elect: bool = common("leader_elect")
    leader_elect_lease_duration: float = common("leader_elect_lease_duration")
    leader_elect_renew_deadline: float = common("leader_elect_renew_deadline")
    leader_elect_retry_period: float = common("leader_elect_retry_period")
    leader_elect_resource_lock: str = common("leader_elect_resource_lock")
    # --- the legacy machine controller's flags of upstream v0.47.0's binary ---
    machine_creation_timeout: float = _legacy("machine_creation_timeout", 20 * 60.0)
    machine_health_timeout: float = _legacy("machine_health_timeout", 10 * 60.0)
    machine_drain_timeout: float = _legacy("machine_drain_timeout", 2 * 3600.0)
    machine_max_evict_retries: int = _legacy("machine_max_evict_retries", 360)
    machine_pv_detach_timeout: float = _legacy("machine_pv_detach_timeout", 2 * 60.0)
    machine_safety_apiserver_statuscheck_timeout: float = _legacy(
        "machine_safety_apiserver_statuscheck_timeout", 30.0
    )
    machine_safety_orphan_vms_period: float = _legacy("machine_safety_orphan_vms_period", 30 * 60.0)
    machine_safety_apiserver_statuscheck_period: float = _legacy(
        "machine_safety_apiserver_statuscheck_period", 60.0
    )
    node_conditions: str = _legacy(
        "node_conditions", "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"
    )
    bootstrap_token_auth_extra_groups: str = _legacy("bootstrap_token_auth_extra_groups", "")
    delete_migrated_machine_class: bool = flag(
        False,
        "bool",
        "Delete every provider-specific machine class that has the machine.sapcloud.io/migrated annotation.",
        group=_MC,
        no_effect="mcm has no provider-specific machine classes",
    )
    # --- process ---
    shutdown_grace_period: float = common("shutdown_grace_period")
    v: int = common("v")
    log_format: str = common("log_format")
    # --- klog's flags, which upstream manifests pass (see mcm.app.logs for what each does here) ---
    logtostderr: bool = common(
        "logtostderr",
        help=f"Log to stderr. false: log to --log-file, else to {LOG_FILE_NAME} in --log-dir.",
    )
    alsologtostderr: bool = common("alsologtostderr")
    log_dir: str = common(
        "log_dir",
        help=f"With --logtostderr=false and no --log-file: directory of {LOG_FILE_NAME} "
        "(empty: the temporary directory, as klog).",
    )
    log_file: str = common("log_file")
    log_file_max_size: int = common("log_file_max_size")
    stderrthreshold: int = common("stderrthreshold")
    vmodule: str = common("vmodule")
    add_dir_header: bool = common("add_dir_header")
    skip_headers: bool = common("skip_headers")
    skip_log_headers: bool = common("skip_log_headers")
    one_output: bool = common("one_output")
    log_backtrace_at: str = common("log_backtrace_at")
    log_flush_frequency: float = common("log_flush_frequency")

    def validate(self) -> list[str]:
        """HEAD ``Validate()`` plus the leader-election rules and klog's; one message per problem."""
        errors = port_errors(self) + concurrent_syncs_errors(self) + profiling_errors(self)
        errors += client_errors(self)
        for name in ("safety_up", "safety_down"):
            value = getattr(self, name)
            if value < 0:
                errors.append(f"--{name.replace('_', '-')} must not be negative, got {value}")
        errors += negative_duration_errors(self, FLAGS)
        if self.machine_safety_overshooting_period == 0:
            errors.append("--machine-safety-overshooting-period must be greater than 0")
        errors += target_errors(self) + leader_election_errors(self)
        return errors + logging_errors(self)


FLAGS: tuple[Flag, ...] = flags_of(ManagerCommandOptions)
"""Every flag of the command, in :class:`ManagerCommandOptions`' order (``--help`` and the docs)."""


def manager_options(options: ManagerCommandOptions) -> ManagerOptions:
    """:class:`~mcm.manager.ManagerOptions` from the flags (its fields are the flags' names)."""
    return ManagerOptions(**{f.name: getattr(options, f.name) for f in dataclasses.fields(ManagerOptions)})

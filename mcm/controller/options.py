"""Options of the machine controller: every ``machine-controller`` flag, with upstream defaults.

Field names are the snake_case of the flag names (``--machine-creation-timeout`` →
``machine_creation_timeout``); durations are seconds (``float``). Defaults are upstream v0.47.0
(app-and-controller.md §1.2) except where decisions.md adopts HEAD (§9.1): the orphan-VM safety
period is 15 min. HEAD-only flags (in-place update timeout, preserve timeout, resource-exhausted
retry) are present with their HEAD defaults. ``max_failed_machines_per_deployment`` is mcm's
configurable meltdown protection (decisions.md §4); 1 is upstream's fixed behaviour.

The runtime state upstream keeps in ``SafetyOptions`` (API-server outage start, frozen flag) is
not an option: it lives in the controller.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_NODE_CONDITIONS", "ControllerOptions"]

DEFAULT_NODE_CONDITIONS = "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"
"""``--node-conditions`` default: comma separated, case sensitive."""

_MINUTE = 60.0
_HOUR = 60 * _MINUTE


@dataclass(slots=True)
class ControllerOptions:
    """Everything the controller and the command line share (one field per flag)."""

    # --- server and clients (§1.2) ---
    port: int = 10259
    address: str = "0.0.0.0"
    cloud_provider: str = ""
    concurrent_syncs: int = 50
    min_resync_period: float = 12 * _HOUR
    profiling: bool = True
    contention_profiling: bool = False
    target_kubeconfig: str = ""
    control_kubeconfig: str = ""
    namespace: str = "default"
    kube_api_content_type: str = "application/vnd.kubernetes.protobuf"
    kube_api_qps: float = 20.0
    kube_api_burst: int = 30
    controller_start_interval: float = 0.0

    # --- safety options (§1.4 SafetyOptions) ---
    machine_creation_timeout: float = 20 * _MINUTE
    machine_health_timeout: float = 10 * _MINUTE
    machine_drain_timeout: float = 2 * _HOUR
    machine_max_evict_retries: int = 360
    machine_pv_detach_timeout: float = 2 * _MINUTE
    machine_pv_reattach_timeout: float = 90.0
    machine_safety_apiserver_statuscheck_timeout: float = 30.0
    machine_safety_orphan_vms_period: float = 15 * _MINUTE
    machine_safety_apiserver_statuscheck_period: float = _MINUTE

    # --- machine behaviour ---
    node_conditions: str = DEFAULT_NODE_CONDITIONS
    bootstrap_token_auth_extra_groups: str = ""

    # --- leader election ---
    leader_elect: bool = True
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    leader_elect_resource_lock: str = "leases"

    # --- HEAD additions (§9.1) ---
    machine_inplace_update_timeout: float = 20 * _MINUTE
    machine_preserve_timeout: float = 96 * _HOUR
    resource_exhausted_retry: float = 10 * _MINUTE

    # --- mcm additions ---
    max_failed_machines_per_deployment: int = 1
    """How many machines of one MachineDeployment may be marked Failed at once (upstream: 1)."""
    driver_call_timeout: float = 5 * _MINUTE
    """Deadline of one driver call; a hanging driver is cut off and the step retried."""

    def node_condition_types(self) -> list[str]:
        """``node_conditions`` split on commas, empty entries dropped."""
        return [part for part in self.node_conditions.split(",") if part]

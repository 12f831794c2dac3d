"""Options of the machine controller: what the controller reads, with upstream defaults.

Each field is the snake_case name of the ``machine-controller`` flag that sets it
(``--machine-creation-timeout`` → ``machine_creation_timeout``); durations are seconds
(``float``). Defaults are upstream v0.47.0 except where mcm adopts HEAD: the orphan-VM safety
period is 15 min and ``resource_exhausted_retry`` is HEAD's. ``max_failed_machines_per_deployment``
is mcm's configurable meltdown protection; 1 is upstream's fixed behaviour.

The flags only the process reads (server, clients, kubeconfigs, worker count, leader election,
logging, the driver) live in ``mcm.app.options.Options``, which maps its values onto these
fields. The runtime state upstream keeps in ``SafetyOptions`` (API-server outage start, frozen
flag) is not an option: it lives in the controller.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcm.drain import (
    DEFAULT_MACHINE_DRAIN_TIMEOUT,
    DEFAULT_MAX_EVICT_RETRIES,
    DEFAULT_PV_DETACH_TIMEOUT,
    DEFAULT_PV_REATTACH_TIMEOUT,
)

__all__ = ["DEFAULT_NODE_CONDITIONS", "ControllerOptions"]

DEFAULT_NODE_CONDITIONS = "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"
"""``--node-conditions`` default: comma separated, case sensitive."""

_MINUTE = 60.0
_HOUR = 60 * _MINUTE


@dataclass(slots=True)
class ControllerOptions:
    """Everything the controller reads (each field set by the flag of the same name)."""

    namespace: str = "default"
    cloud_provider: str = ""
    min_resync_period: float = 12 * _HOUR

    # --- safety options (upstream SafetyOptions) ---
    machine_creation_timeout: float = 20 * _MINUTE
    machine_health_timeout: float = 10 * _MINUTE
    machine_drain_timeout: float = DEFAULT_MACHINE_DRAIN_TIMEOUT
    machine_max_evict_retries: int = DEFAULT_MAX_EVICT_RETRIES
    machine_pv_detach_timeout: float = DEFAULT_PV_DETACH_TIMEOUT
    machine_pv_reattach_timeout: float = DEFAULT_PV_REATTACH_TIMEOUT
    machine_safety_apiserver_statuscheck_timeout: float = 30.0
    machine_safety_orphan_vms_period: float = 15 * _MINUTE
    machine_safety_apiserver_statuscheck_period: float = _MINUTE

    # --- machine behaviour ---
    node_conditions: str = DEFAULT_NODE_CONDITIONS
    bootstrap_token_auth_extra_groups: str = ""
    resource_exhausted_retry: float = 10 * _MINUTE

    # --- mcm additions ---
    max_failed_machines_per_deployment: int = 1
    """How many machines of one MachineDeployment may be marked Failed at once (upstream: 1)."""
    driver_call_timeout: float = 5 * _MINUTE
    """Deadline of one driver call; a hanging driver is cut off and the step retried."""

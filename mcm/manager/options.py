"""``ManagerOptions``: what the MachineSet/MachineDeployment manager is configured with.

Each field is one flag of upstream v0.47.0's ``machine-controller-manager`` command
(``cmd/machine-controller-manager/app/options/options.go``), with upstream's default; durations
are seconds. The command builds one from its flags; tests build one directly.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ManagerOptions"]


@dataclass(frozen=True)
class ManagerOptions:
    """Settings of :class:`~mcm.manager.Manager` (flag names in the field docstrings)."""

    namespace: str = "default"
    """``--namespace``: where the MachineDeployments, MachineSets and Machines live."""
    concurrent_syncs: int = 10
    """``--concurrent-syncs``: workers per queue."""
    min_resync_period: float = 12 * 3600.0
    """``--min-resync-period``: the informers' resync period."""
    safety_up: int = 2
    """``--safety-up``: machines a set may have above its limit before it is frozen."""
    safety_down: int = 1
    """``--safety-down``: how far below the freeze limit a set must fall to be unfrozen."""
    machine_safety_overshooting_period: float = 60.0
    """``--machine-safety-overshooting-period``: how often the overshoot check runs."""
    autoscaler_scaledown_annotation_during_rollout: bool = True
    """``--autoscaler-scaledown-annotation-during-rollout`` (v0.47.0 spelled it
    ``--autoscaler-scaldown-annotation-during-rollout``): keep the cluster-autoscaler off the
    nodes of a deployment while it rolls."""

"""The node simulator for tests: :class:`~mcm.driver.nodesim.NodeSimulator` and friends.

It lives in :mod:`mcm.driver.nodesim` because the local provider (a real driver) boots its VMs
into Nodes with it, and drivers may not import :mod:`mcm.testing`; this module re-exports it
where test code looks for it.
"""

from mcm.driver.nodesim import (
    DEFAULT_CAPACITY,
    KUBELET_CONDITIONS,
    NodeSimulator,
    SimulatedVM,
    VMSource,
    driver_vms,
)

__all__ = ["DEFAULT_CAPACITY", "KUBELET_CONDITIONS", "NodeSimulator", "SimulatedVM", "VMSource", "driver_vms"]

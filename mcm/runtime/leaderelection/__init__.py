"""Leader election over a Lease (the port of client-go's ``tools/leaderelection``).

Start here: build a :class:`LeaseLock`, a :class:`LeaderElectionConfig` with
:class:`LeaderCallbacks`, then call :func:`run_or_die` (or ``new_leader_elector(config).run(stop)``).
Only the leader may act; its ``on_started_leading(stop)`` work must end when ``stop`` is set.
"""

from mcm.runtime.leaderelection.config import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionConfigError,
)
from mcm.runtime.leaderelection.elector import LeaderElector, new_leader_elector, run_or_die
from mcm.runtime.leaderelection.healthz import HealthzAdaptor
from mcm.runtime.leaderelection.interface import LockNotInitialized, ResourceLock
from mcm.runtime.leaderelection.lease_lock import LeaseLock, lease_request_timeout
from mcm.runtime.leaderelection.metrics import PrometheusLeaderMetrics, set_provider
from mcm.runtime.leaderelection.record import LeaderElectionRecord, format_micro_time

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "HealthzAdaptor",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElectionConfigError",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaseLock",
    "LockNotInitialized",
    "PrometheusLeaderMetrics",
    "ResourceLock",
    "format_micro_time",
    "lease_request_timeout",
    "new_leader_elector",
    "run_or_die",
    "set_provider",
]

"""Node drain: cordon, evict or delete the pods of a node, wait for their volumes, clean up.

Start with :func:`run_drain` (after :func:`cordon_node`). The caller
supplies the target-cluster client, :class:`DrainListers` over its informers, the driver (for
``get_volume_ids``), a clock and a stop event; :class:`VolumeAttachmentHub` turns the
VolumeAttachment informer's events, :class:`PodDeletions` the pod informer's delete events,
into early wake-ups of waiting drains. :class:`Drainer` holds all of it for the machine
controller, whose deletion step builds the options of each drain and calls it.
``docs/drain.md`` describes the flow and where mcm differs from upstream.
"""

from mcm.drain.drain import run_drain
from mcm.drain.drainer import Drainer
from mcm.drain.metrics import DrainMetrics
from mcm.drain.node import cordon_node
from mcm.drain.podevents import PodDeletions
from mcm.drain.pods import is_misconfigured
from mcm.drain.state import (
    EVICTION_RETRY_INTERVAL,
    POD_POLL_INTERVAL,
    REASON_DRAIN_BLOCKED,
    REASON_DRAIN_FAILED,
    REASON_DRAIN_STARTED,
    REASON_DRAIN_SUCCEEDED,
)
from mcm.drain.types import (
    DEFAULT_MACHINE_DRAIN_TIMEOUT,
    DEFAULT_MAX_EVICT_RETRIES,
    DEFAULT_MAX_PARALLEL_EVICTIONS,
    DEFAULT_PV_DETACH_TIMEOUT,
    DEFAULT_PV_REATTACH_TIMEOUT,
    DrainListers,
    DrainOptions,
    DrainResult,
    PodOutcome,
)
from mcm.drain.volumes import VolumeAttachmentHub

__all__ = [
    "DEFAULT_MACHINE_DRAIN_TIMEOUT",
    "DEFAULT_MAX_EVICT_RETRIES",
    "DEFAULT_MAX_PARALLEL_EVICTIONS",
    "DEFAULT_PV_DETACH_TIMEOUT",
    "DEFAULT_PV_REATTACH_TIMEOUT",
    "EVICTION_RETRY_INTERVAL",
    "POD_POLL_INTERVAL",
    "REASON_DRAIN_BLOCKED",
    "REASON_DRAIN_FAILED",
    "REASON_DRAIN_STARTED",
    "REASON_DRAIN_SUCCEEDED",
    "DrainListers",
    "DrainMetrics",
    "DrainOptions",
    "DrainResult",
    "Drainer",
    "PodDeletions",
    "PodOutcome",
    "VolumeAttachmentHub",
    "cordon_node",
    "is_misconfigured",
    "run_drain",
]

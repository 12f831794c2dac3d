"""Node drain: cordon, evict or delete the pods of a node, wait for their volumes, clean up.

Start with :func:`drain_node` (after :func:`cordon_node`); after a forced drain,
:func:`delete_volume_attachments` is the HEAD step ``Delete Volume Attachments``. The caller
supplies the target-cluster client, :class:`DrainListers` over its informers, the driver (for
``get_volume_ids``), a clock and a stop event; :class:`VolumeAttachmentHub` turns the
VolumeAttachment informer's events, :class:`PodDeletions` the pod informer's delete events,
into early wake-ups of waiting drains. :class:`NodeDrainer`
wraps all of it behind the machine controller's ``Drainer`` seam. ``docs/drain.md``
describes the flow and where mcm differs from upstream.
"""

from mcm.drain.drain import drain_node
from mcm.drain.drainer import DrainError, NodeDrainer
from mcm.drain.metrics import DrainMetrics
from mcm.drain.node import cordon_node, delete_volume_attachments
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
    DEFAULT_MAX_EVICT_RETRIES,
    DEFAULT_MAX_PARALLEL_EVICTIONS,
    DEFAULT_PV_DETACH_TIMEOUT,
    DEFAULT_PV_REATTACH_TIMEOUT,
    DEFAULT_TIMEOUT,
    DrainListers,
    DrainOptions,
    DrainResult,
    PodOutcome,
)
from mcm.drain.volumes import VolumeAttachmentHub

__all__ = [
    "DEFAULT_MAX_EVICT_RETRIES",
    "DEFAULT_MAX_PARALLEL_EVICTIONS",
    "DEFAULT_PV_DETACH_TIMEOUT",
    "DEFAULT_PV_REATTACH_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "EVICTION_RETRY_INTERVAL",
    "POD_POLL_INTERVAL",
    "REASON_DRAIN_BLOCKED",
    "REASON_DRAIN_FAILED",
    "REASON_DRAIN_STARTED",
    "REASON_DRAIN_SUCCEEDED",
    "DrainError",
    "DrainListers",
    "DrainMetrics",
    "DrainOptions",
    "DrainResult",
    "NodeDrainer",
    "PodDeletions",
    "PodOutcome",
    "VolumeAttachmentHub",
    "cordon_node",
    "delete_volume_attachments",
    "drain_node",
    "is_misconfigured",
]

"""Work queues for controllers: the port of client-go's ``util/workqueue``.

Start with :class:`RateLimitingQueue` and :func:`default_controller_rate_limiter`; the layers
are usable on their own: :class:`Queue` (fair, stingy, deduplicating FIFO) →
:class:`DelayingQueue` (``add_after``) → :class:`RateLimitingQueue` (``add_rate_limited``,
``forget``, ``num_requeues``). Named queues export the Kubernetes ``workqueue_*`` metrics.
:func:`parallelize_until` runs N independent pieces of work on a bounded number of threads.
"""

from mcm.runtime.workqueue.delaying_queue import DelayingQueue
from mcm.runtime.workqueue.metrics import (
    NOOP_PROVIDER,
    MetricsProvider,
    NoopMetricsProvider,
    PrometheusMetricsProvider,
    set_provider,
)
from mcm.runtime.workqueue.parallelizer import DoWorkPieceFunc, parallelize_until
from mcm.runtime.workqueue.queue import Queue
from mcm.runtime.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
    with_max_wait,
)
from mcm.runtime.workqueue.rate_limiting_queue import RateLimitingQueue

__all__ = [
    "NOOP_PROVIDER",
    "BucketRateLimiter",
    "DelayingQueue",
    "DoWorkPieceFunc",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "NoopMetricsProvider",
    "PrometheusMetricsProvider",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
    "parallelize_until",
    "set_provider",
    "with_max_wait",
]

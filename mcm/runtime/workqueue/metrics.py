"""Work-queue metrics: the port of client-go's ``util/workqueue/metrics.go``.

Guarantees:

- A queue records metrics only if it has a non-empty name and a metrics provider that is not
  :data:`NOOP_PROVIDER` when it is built (:func:`queue_metrics` returns ``None`` otherwise, and
  the queue then skips every metrics hook).
- :class:`PrometheusMetricsProvider` exposes the names, types, HELP texts, label (``name``)
  and histogram buckets of the Kubernetes components: ``workqueue_depth``,
  ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_unfinished_work_seconds``,
  ``workqueue_longest_running_processor_seconds`` and ``workqueue_retries_total``, registered in
  an injectable ``CollectorRegistry`` (default: ``prometheus_client.REGISTRY``).
- :class:`QueueMetrics` follows client-go's update rules: ``depth`` counts dirty items (+1 per
  accepted add, -1 per get); the queue latency is measured from the first accepted add since
  the last get; the work duration from get to done; the two "unfinished work" gauges are
  refreshed by :meth:`QueueMetrics.update_unfinished_work`, which the queue calls every
  :data:`UNFINISHED_WORK_UPDATE_PERIOD` seconds on its clock.
- :func:`set_provider` sets the process-wide provider; only the first call (before any named
  queue used the default) has an effect, like ``workqueue.SetProvider``.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol

import prometheus_client
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from mcm.runtime.clock import Clock

__all__ = [
    "NOOP_PROVIDER",
    "UNFINISHED_WORK_UPDATE_PERIOD",
    "WORKQUEUE_BUCKETS",
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "MetricsProvider",
    "NoopMetricsProvider",
    "PrometheusMetricsProvider",
    "QueueMetrics",
    "SettableGaugeMetric",
    "global_provider",
    "queue_metrics",
    "set_provider",
]

log = structlog.get_logger(__name__)

UNFINISHED_WORK_UPDATE_PERIOD = 0.5
"""Seconds between refreshes of the unfinished-work gauges (client-go: 500 ms)."""


def _exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Bucket bounds by repeated multiplication, exactly like Go's ``ExponentialBuckets``."""
    buckets = [start]
    for _ in range(count - 1):
        buckets.append(buckets[-1] * factor)
    return tuple(buckets)


WORKQUEUE_BUCKETS = _exponential_buckets(10e-9, 10, 10)
"""``1e-08 … 10`` in ten steps (``9.999999999999999e-06`` included, as Go prints it)."""


class GaugeMetric(Protocol):
    def inc(self, amount: float = 1) -> None: ...
    def dec(self, amount: float = 1) -> None: ...


class SettableGaugeMetric(Protocol):
    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class HistogramMetric(Protocol):
    def observe(self, amount: float) -> None: ...


class MetricsProvider(Protocol):
    """Creates the seven metric handles of one named queue."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...
    def new_adds_metric(self, name: str) -> CounterMetric: ...
    def new_latency_metric(self, name: str) -> HistogramMetric: ...
    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...
    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...
    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...
    def new_retries_metric(self, name: str) -> CounterMetric: ...


class _NoopMetric:
    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


class NoopMetricsProvider:
    """Records nothing; a queue built with it skips its metrics hooks entirely."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NoopMetric()

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NoopMetric()

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NoopMetric()

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NoopMetric()

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NoopMetric()

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NoopMetric()

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NoopMetric()


NOOP_PROVIDER = NoopMetricsProvider()


class PrometheusMetricsProvider:
    """The Kubernetes components' provider, on a ``prometheus_client`` registry.

    It registers the seven metric families when built, so build one per registry.
    ``namespace="mcm", stability=None`` gives upstream MCM's own naming
    (``mcm_workqueue_depth`` …, no ``[ALPHA]`` prefix).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace: str = "",
        stability: str | None = "ALPHA",
    ) -> None:
        registry = registry if registry is not None else prometheus_client.REGISTRY
        prefix = f"[{stability}] " if stability else ""
        where = {"namespace": namespace, "subsystem": "workqueue", "registry": registry}

        def gauge(name: str, help_text: str) -> Gauge:
            return Gauge(name, prefix + help_text, ("name",), **where)  # type: ignore[arg-type]

        def counter(name: str, help_text: str) -> Counter:
            return Counter(name, prefix + help_text, ("name",), **where)  # type: ignore[arg-type]

        def histogram(name: str, help_text: str) -> Histogram:
            return Histogram(name, prefix + help_text, ("name",), buckets=WORKQUEUE_BUCKETS, **where)  # type: ignore[arg-type]

        self._depth = gauge("depth", "Current depth of workqueue")
        self._adds = counter("adds", "Total number of adds handled by workqueue")
        self._latency = histogram(
            "queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested."
        )
        self._work_duration = histogram(
            "work_duration_seconds", "How long in seconds processing an item from workqueue takes."
        )
        self._unfinished = gauge(
            "unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by "
            "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
            "threads by observing the rate at which this increases.",
        )
        self._longest = gauge(
            "longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
        )
        self._retries = counter("retries", "Total number of retries handled by workqueue")

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._depth.labels(name=name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._adds.labels(name=name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._latency.labels(name=name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._work_duration.labels(name=name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._unfinished.labels(name=name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._longest.labels(name=name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._retries.labels(name=name)


class QueueMetrics:
    """The metrics of one named queue. Called with the queue's lock held (not thread-safe alone)."""

    __slots__ = (
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_latency",
        "_longest",
        "_processing_since",
        "_retries",
        "_unfinished",
        "_work_duration",
    )

    def __init__(self, provider: MetricsProvider, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest = provider.new_longest_running_processor_seconds_metric(name)
        self._retries = provider.new_retries_metric(name)
        self._add_times: dict[Hashable, float] = {}
        self._processing_since: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock.monotonic()

    def get(self, item: Hashable) -> None:
        self._depth.dec()
        now = self._clock.monotonic()
        self._processing_since[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        started = self._processing_since.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.monotonic() - started)

    def retry(self) -> None:
        self._retries.inc()

    def update_unfinished_work(self) -> None:
        now = self._clock.monotonic()
        total = 0.0
        oldest = 0.0
        for started in self._processing_since.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest.set(oldest)


_provider_lock = threading.Lock()
_global_provider: MetricsProvider | None = None


def set_provider(provider: MetricsProvider) -> None:
    """Set the process-wide provider. Only the first call, before any default was used, counts."""
    global _global_provider
    with _provider_lock:
        if _global_provider is not None:
            log.warning("workqueue_metrics_provider_already_set")
            return
        _global_provider = provider


def global_provider() -> MetricsProvider:
    """The process-wide provider; a Prometheus provider on the default registry unless set."""
    global _global_provider
    with _provider_lock:
        if _global_provider is None:
            _global_provider = PrometheusMetricsProvider()
        return _global_provider


def queue_metrics(name: str | None, provider: MetricsProvider | None, clock: Clock) -> QueueMetrics | None:
    """Metrics for a queue, or ``None`` if it is unnamed or the provider is the no-op one."""
    if not name:
        return None
    provider = provider if provider is not None else global_provider()
    if provider is NOOP_PROVIDER or isinstance(provider, NoopMetricsProvider):
        return None
    return QueueMetrics(provider, name, clock)

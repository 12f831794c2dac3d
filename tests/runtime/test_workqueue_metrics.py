"""Queue metrics: client-go's TestMetrics values with a fake clock, exposition, no-op rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from mcm.runtime.clock import FakeClock
from mcm.runtime.workqueue import (
    NOOP_PROVIDER,
    DelayingQueue,
    PrometheusMetricsProvider,
    Queue,
    RateLimitingQueue,
    default_controller_rate_limiter,
)
from mcm.runtime.workqueue import metrics as metrics_module

# -- a recording provider (client-go's testMetricsProvider) -------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.value = 0.0
        self.observations: list[float] = []
        self.sets = 0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value
        self.sets += 1

    def observe(self, amount: float) -> None:
        self.observations.append(amount)


class RecordingProvider:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.depth = Recorder()
        self.adds = Recorder()
        self.latency = Recorder()
        self.duration = Recorder()
        self.unfinished = Recorder()
        self.longest = Recorder()
        self.retries = Recorder()

    def _made(self, name: str, metric: Recorder) -> Recorder:
        self.names.append(name)
        return metric

    def new_depth_metric(self, name: str) -> Recorder:
        return self._made(name, self.depth)

    def new_adds_metric(self, name: str) -> Recorder:
        return self._made(name, self.adds)

    def new_latency_metric(self, name: str) -> Recorder:
        return self._made(name, self.latency)

    def new_work_duration_metric(self, name: str) -> Recorder:
        return self._made(name, self.duration)

    def new_unfinished_work_seconds_metric(self, name: str) -> Recorder:
        return self._made(name, self.unfinished)

    def new_longest_running_processor_seconds_metric(self, name: str) -> Recorder:
        return self._made(name, self.longest)

    def new_retries_metric(self, name: str) -> Recorder:
        return self._made(name, self.retries)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def provider() -> RecordingProvider:
    return RecordingProvider()


@pytest.fixture
def q(clock: FakeClock, provider: RecordingProvider) -> Iterator[Queue[str]]:
    queue: Queue[str] = Queue("test", clock=clock, metrics_provider=provider)
    yield queue
    queue.shut_down()


def test_metrics(q: Queue[str], clock: FakeClock, provider: RecordingProvider) -> None:
    q.add("foo")
    assert provider.adds.value == 1
    assert provider.depth.value == 1
    clock.step(50e-6)
    item, _ = q.get()
    assert item == "foo"
    assert provider.latency.observations == [pytest.approx(5e-05)]

    for _ in range(5):  # re-added while processing: one accepted add
        q.add("foo")
    assert provider.adds.value == 2
    assert provider.depth.value == 1  # counts dirty items, while len() is 0
    assert q.len() == 0

    clock.step(25e-6)
    q.done("foo")
    assert provider.duration.observations == [pytest.approx(2.5e-05)]
    assert provider.depth.value == 1

    q.get()  # back on the queue; latency measured from the first re-add
    assert provider.latency.observations[1:] == [pytest.approx(2.5e-05)]
    assert len(provider.latency.observations) == 2

    clock.step(0.001)
    assert q.update_unfinished_work()
    assert provider.unfinished.value == pytest.approx(0.001)
    assert provider.longest.value == pytest.approx(0.001)

    q.done("foo")
    assert provider.duration.observations[1:] == [pytest.approx(0.001)]
    assert len(provider.duration.observations) == 2
    assert provider.depth.value == 0


def test_unfinished_work_sums_and_longest_is_the_max(
    q: Queue[str], clock: FakeClock, provider: RecordingProvider
) -> None:
    q.add("a")
    q.get()
    clock.step(2.0)
    q.add("b")
    q.get()
    clock.step(1.0)
    q.update_unfinished_work()
    assert provider.unfinished.value == pytest.approx(4.0)  # 3 + 1
    assert provider.longest.value == pytest.approx(3.0)


def test_updater_runs_every_half_second_on_the_clock(
    q: Queue[str], clock: FakeClock, provider: RecordingProvider
) -> None:
    q.add("a")
    q.get()
    clock.block_until_waiters()  # only the updater waits on the clock for a basic queue
    clock.step(0.5)
    clock.block_until_waiters()  # parked again: the update is done
    assert provider.unfinished.sets == 1
    assert provider.unfinished.value == pytest.approx(0.5)


def test_metric_shutdown_stops_the_updater(
    q: Queue[str], clock: FakeClock, provider: RecordingProvider
) -> None:
    clock.block_until_waiters()
    q.shut_down()
    assert not q.update_unfinished_work()
    clock.step(5.0)
    assert provider.unfinished.sets == 0


def test_unnamed_queue_records_nothing(clock: FakeClock, provider: RecordingProvider) -> None:
    q: DelayingQueue[str] = DelayingQueue(clock=clock, metrics_provider=provider)
    q.add("a")
    q.add_after("b", 0)
    q.shut_down()
    assert provider.names == []


def test_noop_provider_records_nothing_and_starts_no_updater(clock: FakeClock) -> None:
    q: Queue[str] = Queue("quiet", clock=clock, metrics_provider=NOOP_PROVIDER)
    q.add("a")
    assert clock.waiter_count() == 0
    q.shut_down()


def test_retries_count_every_add_after_including_zero_delay(
    clock: FakeClock, provider: RecordingProvider
) -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(
        default_controller_rate_limiter(clock=clock), "r", clock=clock, metrics_provider=provider
    )
    q.add_after("a", 0)
    q.add_after("b", 1.0)
    q.add_rate_limited("c")
    q.add("d")  # not a retry
    assert provider.retries.value == 3
    q.shut_down()
    q.add_after("e", 0)  # shutting down: not counted
    assert provider.retries.value == 3


# -- Prometheus exposition -----------------------------------------------------------------------


def test_prometheus_exposition_names_help_and_buckets(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        default_controller_rate_limiter(clock=clock),
        "machine",
        clock=clock,
        metrics_provider=PrometheusMetricsProvider(registry),
    )
    q.add("ns/a")
    clock.step(0.25)
    q.get()
    clock.step(2.0)
    q.done("ns/a")
    q.add_after("ns/b", 0)
    q.update_unfinished_work()
    q.shut_down()

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"name": "machine", **labels})

    assert sample("workqueue_depth") == 1.0
    assert sample("workqueue_adds_total") == 2.0
    assert sample("workqueue_retries_total") == 1.0
    assert sample("workqueue_queue_duration_seconds_count") == 1.0
    assert sample("workqueue_queue_duration_seconds_sum") == pytest.approx(0.25)
    assert sample("workqueue_queue_duration_seconds_bucket", le="0.1") == 0.0
    assert sample("workqueue_queue_duration_seconds_bucket", le="1.0") == 1.0
    assert sample("workqueue_work_duration_seconds_sum") == pytest.approx(2.0)
    assert sample("workqueue_work_duration_seconds_bucket", le="10.0") == 1.0
    assert sample("workqueue_unfinished_work_seconds") == 0.0
    assert sample("workqueue_longest_running_processor_seconds") == 0.0

    text = generate_latest(registry).decode()
    for line in (
        "# HELP workqueue_depth [ALPHA] Current depth of workqueue",
        "# TYPE workqueue_depth gauge",
        "# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue",
        "# TYPE workqueue_adds_total counter",
        "# HELP workqueue_queue_duration_seconds [ALPHA] How long in seconds an item stays in workqueue "
        "before being requested.",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "# HELP workqueue_work_duration_seconds [ALPHA] How long in seconds processing an item from "
        "workqueue takes.",
        "# TYPE workqueue_work_duration_seconds histogram",
        "# HELP workqueue_unfinished_work_seconds [ALPHA] How many seconds of work has done that is in "
        "progress and hasn't been observed by work_duration. Large values indicate stuck threads. One "
        "can deduce the number of stuck threads by observing the rate at which this increases.",
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# HELP workqueue_longest_running_processor_seconds [ALPHA] How many seconds has the longest "
        "running processor for workqueue been running.",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
        "# HELP workqueue_retries_total [ALPHA] Total number of retries handled by workqueue",
        "# TYPE workqueue_retries_total counter",
    ):
        assert line in text.splitlines()
    bounds = [
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("workqueue_queue_duration_seconds_bucket")
    ]
    assert bounds == [
        "1e-08",
        "1e-07",
        "1e-06",
        "9.999999999999999e-06",
        "9.999999999999999e-05",
        "0.001",
        "0.01",
        "0.1",
        "1.0",
        "10.0",
        "+Inf",
    ]


def test_mcm_style_provider_names(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    q: Queue[str] = Queue(
        "node",
        clock=clock,
        metrics_provider=PrometheusMetricsProvider(registry, namespace="mcm", stability=None),
    )
    q.add("x")
    q.shut_down()
    assert registry.get_sample_value("mcm_workqueue_depth", {"name": "node"}) == 1.0
    assert "# HELP mcm_workqueue_depth Current depth of workqueue" in generate_latest(registry).decode()


def test_set_provider_first_call_wins(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    monkeypatch.setattr(metrics_module, "_global_provider", None)
    first = RecordingProvider()
    metrics_module.set_provider(first)
    metrics_module.set_provider(RecordingProvider())
    assert metrics_module.global_provider() is first
    q: Queue[str] = Queue("global", clock=clock)
    q.add("a")
    q.shut_down()
    assert first.adds.value == 1
    assert "global" in first.names

"""Driver calls: per-call deadline, non-MachineError → Internal, metrics; the metrics collector."""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from mcm.controller.drivercalls import DriverCaller, LeaseNotHeld
from mcm.controller.metrics import ControllerMetrics
from mcm.driver import CallContext, Code, MachineError
from mcm.runtime.clock import FakeClock
from mcm.runtime.errors import TransientError

from .builders import HEALTHY, mk_machine
from .fakes import START


def test_a_hanging_driver_call_ends_at_its_deadline() -> None:
    clock = FakeClock(START)
    registry = CollectorRegistry()
    caller = DriverCaller(clock, ControllerMetrics(registry, "fake"), 30.0)
    cancelled: list[bool] = []

    def hang(ctx: CallContext) -> str:
        ctx.cancelled.wait(10)
        cancelled.append(ctx.cancelled.is_set())
        return "late"

    errors: list[MachineError] = []

    def call() -> None:
        try:
            caller.call("create_machine", hang)
        except MachineError as err:
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    clock.block_until_waiters()
    clock.step(30.0)
    thread.join(5)
    assert [e.code for e in errors] == [Code.DeadlineExceeded]
    failed = registry.get_sample_value(
        "mcm_cloud_api_driver_requests_failed_total",
        {"provider": "fake", "operation": "CreateMachine", "error_code": "DeadlineExceeded"},
    )
    assert failed == 1.0


def test_driver_calls_reuse_a_bounded_set_of_daemon_threads() -> None:
    clock = FakeClock(START)
    caller = DriverCaller(clock, ControllerMetrics(CollectorRegistry(), "fake"), 30.0, max_threads=2)
    threads: set[threading.Thread] = set()

    def record(ctx: CallContext) -> int:
        threads.add(threading.current_thread())
        return len(threads)

    results = [caller.call("get_machine_status", record) for _ in range(20)]
    assert len(results) == 20
    assert 1 <= len(threads) <= 2
    assert all(t.daemon for t in threads)


def test_idle_driver_call_threads_end_so_the_thread_count_returns_to_its_baseline() -> None:
    """Found by the chaos suite: after a burst of concurrent driver calls (a failover backlog,
    slow calls) the pool kept every thread it had started, for ever."""
    from mcm.controller.drivercalls import IDLE_TIMEOUT

    clock = FakeClock(START)
    caller = DriverCaller(clock, ControllerMetrics(CollectorRegistry(), "fake"), 30.0, max_threads=8)
    release = threading.Event()
    started = threading.Barrier(4)

    def hold(ctx: CallContext) -> str:
        started.wait(5)
        release.wait(5)
        return "ok"

    burst = [threading.Thread(target=caller.call, args=("get_machine_status", hold)) for _ in range(3)]
    for thread in burst:
        thread.start()
    started.wait(5)
    assert caller.pool_threads == 3
    release.set()
    for thread in burst:
        thread.join(5)
    assert caller.call("get_machine_status", lambda ctx: "again") == "again"
    assert caller.pool_threads == 3  # idle threads are reused, not added to
    clock.block_until_waiters(3)
    clock.step(IDLE_TIMEOUT + 1)
    deadline = time.monotonic() + 5
    while caller.pool_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert caller.pool_threads == 0
    assert caller.call("get_machine_status", lambda ctx: "later") == "later"
    assert caller.pool_threads == 1


def test_a_driver_raising_anything_else_is_internal_and_measured() -> None:
    clock = FakeClock(START)
    registry = CollectorRegistry()
    caller = DriverCaller(clock, ControllerMetrics(registry, "fake"), 30.0)

    def boom(ctx: CallContext) -> str:
        raise KeyError("x")

    with pytest.raises(MachineError) as info:
        caller.call("get_machine_status", boom)
    assert info.value.code == Code.Internal
    assert caller.call("delete_machine", lambda ctx: "ok") == "ok"
    count = registry.get_sample_value(
        "mcm_cloud_api_driver_request_duration_seconds_count",
        {"provider": "fake", "operation": "DeleteMachine"},
    )
    assert count == 1.0


def test_no_vm_changing_call_is_made_while_the_lease_is_not_surely_held() -> None:
    """A leader paused past its renew deadline must not create (or delete) a VM before its
    watchdog notices: its successor may already have deleted the Machine."""
    held = [False]
    calls: list[str] = []
    caller = DriverCaller(
        FakeClock(START), ControllerMetrics(CollectorRegistry(), "fake"), 30.0, holds_lease=lambda: held[0]
    )
    for method in ("create_machine", "initialize_machine", "delete_machine"):
        with pytest.raises(LeaseNotHeld, match="not surely held"):
            caller.call(method, lambda ctx, m=method: calls.append(m))
    assert calls == []
    assert caller.call("get_machine_status", lambda ctx: "read") == "read"  # reads are harmless
    assert caller.call("list_machines", lambda ctx: "read") == "read"
    held[0] = True
    caller.call("create_machine", lambda ctx: calls.append("create_machine"))
    assert calls == ["create_machine"]
    assert isinstance(LeaseNotHeld("x"), TransientError)  # a retry, never a crash


def test_collector_exposes_items_frozen_info_condition_and_head_phase_mapping() -> None:
    clock = FakeClock(START)
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry, "fake")
    machines = [
        mk_machine(clock, "m-0", phase="Running", node="n-0", conditions=HEALTHY),
        mk_machine(clock, "m-1", phase="Terminating"),
    ]
    metrics.register_collector(lambda: machines, lambda: True)
    assert registry.get_sample_value("mcm_machine_items_total") == 2
    assert registry.get_sample_value("mcm_machine_controller_frozen") == 1
    assert (
        registry.get_sample_value("mcm_machine_current_status_phase", {"name": "m-0", "namespace": "test-ns"})
        == 1
    )
    assert (
        registry.get_sample_value("mcm_machine_current_status_phase", {"name": "m-1", "namespace": "test-ns"})
        == -4
    )
    assert (
        registry.get_sample_value(
            "mcm_machine_status_condition", {"name": "m-0", "namespace": "test-ns", "condition": "Ready"}
        )
        == 1
    )
    names = {metric.name for metric in registry.collect()}
    for name in (
        "mcm_machine_info",
        "mcm_cloud_api_requests",
        "mcm_cloud_api_requests_failed",
        "mcm_cloud_api_api_request_duration_seconds",
        "mcm_misc_scrape_failure",
        "mcm_machine_create_duration_seconds",
        "mcm_machine_initialize_duration_seconds",
        "mcm_machine_join_duration_seconds",
        "mcm_machine_delete_duration_seconds",
        "mcm_machine_drain_duration_seconds",
        "mcm_machine_num_failed_join",
    ):
        assert name in names, name

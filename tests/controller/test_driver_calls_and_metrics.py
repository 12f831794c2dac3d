"""Driver calls: per-call deadline, non-MachineError → Internal, metrics; the metrics collector."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mcm.controller.drivercalls import DriverCaller, LeaseNotHeld, check_lease_fence
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


class _BusyPool:
    """A caller whose only pool thread is held by a call that waits for ``release``."""

    def __init__(self, held: list[bool]) -> None:
        self.clock = FakeClock(START)
        self.caller = DriverCaller(
            self.clock,
            ControllerMetrics(CollectorRegistry(), "fake"),
            30.0,
            max_threads=1,
            holds_lease=lambda: held[0],
        )
        self.release = threading.Event()
        self.errors: list[Exception] = []
        self.threads = [self._start("get_machine_status", lambda ctx: self.release.wait(10))]

    def _start(self, method: str, fn: Any, **kwargs: Any) -> threading.Thread:
        def run() -> None:
            try:
                self.caller.call(method, fn, **kwargs)
            except Exception as err:
                self.errors.append(err)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def queue(self, method: str, fn: Any, **kwargs: Any) -> None:
        """Make a call that waits for the pool thread (both callers then wait on the clock)."""
        self.threads.append(self._start(method, fn, **kwargs))
        self.clock.block_until_waiters(len(self.threads), timeout=5)

    def finish(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(5)


def test_a_queued_vm_changing_call_checks_the_lease_again_when_it_starts() -> None:
    """Issue 36 #2: the fence was checked when a call was queued only, so a CreateMachine that
    waited for a pool thread ran after the Lease was lost."""
    held = [True]
    pool = _BusyPool(held)
    created: list[str] = []
    pool.queue("create_machine", lambda ctx: created.append("vm"))
    held[0] = False  # the Lease is lost while the call waits for the pool thread
    pool.finish()
    assert created == [], "the driver was called after the Lease was lost"
    assert [type(e) for e in pool.errors] == [LeaseNotHeld]


def test_a_call_abandoned_before_it_started_never_starts() -> None:
    """Issue 36 #2: a call still waiting for a pool thread when its deadline passed (its context
    cancelled) must not start later; what its late return releases is still released."""
    pool = _BusyPool([True])
    created: list[str] = []
    released = threading.Event()
    pool.queue("create_machine", lambda ctx: created.append("vm"), on_abandon=lambda: released.set)
    pool.clock.step(30.0)  # both calls are abandoned at their deadline
    for thread in pool.threads:
        thread.join(5)
    assert sorted(e.code for e in pool.errors if isinstance(e, MachineError)) == [
        Code.DeadlineExceeded,
        Code.DeadlineExceeded,
    ]
    pool.release.set()  # the pool thread is free: the queued call's turn
    assert released.wait(5), "the abandoned call's release never ran"
    assert created == [], "a call abandoned before it started was started"


def test_the_lease_fence_check_is_a_function_of_its_own() -> None:
    check_lease_fence("create_machine", None)
    check_lease_fence("get_machine_status", lambda: False)
    check_lease_fence("delete_machine", lambda: True)
    with pytest.raises(LeaseNotHeld, match="DeleteMachine not called"):
        check_lease_fence("delete_machine", lambda: False)


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


def test_a_prompt_driver_is_called_on_the_callers_thread_with_the_same_errors_and_metrics() -> None:
    registry = CollectorRegistry()
    caller = DriverCaller(FakeClock(START), ControllerMetrics(registry, "fake"), 30.0, prompt=lambda: True)
    threads: list[threading.Thread] = []

    def answer(ctx: CallContext) -> str:
        threads.append(threading.current_thread())
        return "vm"

    def broken(ctx: CallContext) -> str:
        raise KeyError("boom")

    assert caller.call("create_machine", answer, provider="p") == "vm"
    assert threads == [threading.current_thread()]
    assert caller.pool_threads == 0
    with pytest.raises(MachineError) as raised:
        caller.call("delete_machine", broken, provider="p")
    assert (raised.value.code, raised.value.message) == (Code.Internal, "KeyError: 'boom'")
    failed = registry.get_sample_value(
        "mcm_cloud_api_driver_requests_failed_total",
        {"provider": "p", "operation": "DeleteMachine", "error_code": "Internal"},
    )
    assert failed == 1.0


def test_only_an_unscripted_or_plainly_scripted_fake_driver_returns_promptly() -> None:
    from mcm.driver import SafeDriver
    from mcm.driver.fake import FakeDriver

    fake = FakeDriver()
    assert fake.returns_promptly() and SafeDriver(fake).returns_promptly()
    fake.script("create_machine", MachineError(Code.Unavailable, "busy"))
    assert fake.returns_promptly()
    fake.script("create_machine", lambda ctx, request: request, machine="m1")
    assert not fake.returns_promptly() and not SafeDriver(fake).returns_promptly()
    fake.reset_scripts()
    fake.always("delete_machine", lambda ctx, request: request)
    assert not fake.returns_promptly()

    class Slow(FakeDriver):
        pass

    assert not Slow().returns_promptly()

"""Driver calls: per-call deadline, non-MachineError → Internal, metrics; the metrics collector."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from mcm.controller.drivercalls import DriverCaller, LeaseNotHeld, check_lease_fence
from mcm.controller.metrics import ControllerMetrics
from mcm.driver import CallContext, Code, MachineError
from mcm.runtime.clock import FakeClock
from mcm.runtime.errors import TransientError

from .builders import HEALTHY, mk_machine
from .fakes import START


def test_a_hanging_driver_call_is_abandoned_at_its_deadline_and_counted_once() -> None:
    clock = FakeClock(START)
    registry = CollectorRegistry()
    caller = DriverCaller(clock, ControllerMetrics(registry, "fake"), 30.0)
    entered = threading.Event()
    cancelled: list[bool] = []

    def hang(ctx: CallContext) -> str:
        entered.set()
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
    assert entered.wait(5)
    clock.step(29.0)
    assert caller.in_flight == 1 and not cancelled
    clock.step(1.0)  # the watchdog abandons it in this step: the context is cancelled
    thread.join(5)
    assert cancelled == [True]
    assert [e.code for e in errors] == [Code.DeadlineExceeded]
    assert caller.in_flight == 0
    failed = registry.get_sample_value(
        "mcm_cloud_api_driver_requests_failed_total",
        {"provider": "fake", "operation": "CreateMachine", "error_code": "DeadlineExceeded"},
    )
    assert failed == 1.0  # when abandoned, not again when it returned


def test_a_driver_call_runs_on_the_callers_thread_and_starts_no_thread() -> None:
    registry = CollectorRegistry()
    caller = DriverCaller(FakeClock(START), ControllerMetrics(registry, "fake"), 30.0)
    threads: list[threading.Thread] = []
    before = threading.active_count()

    def answer(ctx: CallContext) -> str:
        threads.append(threading.current_thread())
        return "vm"

    assert [caller.call("create_machine", answer, provider="p") for _ in range(20)] == ["vm"] * 20
    assert set(threads) == {threading.current_thread()}
    assert threading.active_count() == before
    count = registry.get_sample_value(
        "mcm_cloud_api_driver_request_duration_seconds_count",
        {"provider": "p", "operation": "CreateMachine"},
    )
    assert count == 20.0


def test_one_timer_watches_every_call_in_flight() -> None:
    """The watchdog costs no timer, thread or wake-up per call: one timer is armed for the
    first deadline, and re-armed when it fires for the calls still in flight."""
    clock = FakeClock(START)
    caller = DriverCaller(clock, ControllerMetrics(CollectorRegistry(), "fake"), 30.0)
    for _ in range(50):
        caller.call("get_machine_status", lambda ctx: "vm")
    assert clock.waiter_count() == 1
    release = threading.Event()
    started = threading.Barrier(4)

    def hold(ctx: CallContext) -> str:
        started.wait(5)
        release.wait(10)
        return "vm"

    clock.step(20.0)
    calls = [threading.Thread(target=caller.call, args=("get_machine_status", hold)) for _ in range(3)]
    for thread in calls:
        thread.start()
    started.wait(5)
    assert caller.in_flight == 3 and clock.waiter_count() == 1
    clock.step(10.0)  # the first timer fires: nothing is due, it re-arms for the three calls
    assert caller.in_flight == 3 and clock.waiter_count() == 1
    release.set()
    for thread in calls:
        thread.join(5)
    assert caller.in_flight == 0


def test_a_call_that_returned_in_time_is_never_abandoned() -> None:
    clock = FakeClock(START)
    caller = DriverCaller(clock, ControllerMetrics(CollectorRegistry(), "fake"), 30.0)
    abandoned: list[str] = []
    contexts: list[CallContext] = []

    def answer(ctx: CallContext) -> str:
        contexts.append(ctx)
        return "vm"

    def on_abandon() -> Callable[[], None]:
        abandoned.append("create_machine")
        return lambda: None

    assert caller.call("create_machine", answer, on_abandon=on_abandon) == "vm"
    clock.step(60.0)
    assert abandoned == [] and not contexts[0].cancelled.is_set()


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


def test_a_vm_changing_call_checks_the_lease_when_it_starts() -> None:
    """Issue 36 #2: the fence was checked when a call was made only, so a CreateMachine that
    waited before it started ran after the Lease was lost. The check is now the last thing
    before the driver: after the context and the watchdog's entry exist."""
    caller: DriverCaller
    seen: list[int] = []

    def holds_lease() -> bool:
        seen.append(caller.in_flight)
        return False  # lost while the call was being made

    caller = DriverCaller(
        FakeClock(START), ControllerMetrics(CollectorRegistry(), "fake"), 30.0, holds_lease=holds_lease
    )
    created: list[str] = []
    with pytest.raises(LeaseNotHeld):
        caller.call("create_machine", lambda ctx: created.append("vm"))
    assert created == [], "the driver was called after the Lease was lost"
    assert seen == [1], "the fence was not checked at the start of the call"
    assert caller.in_flight == 0


def test_a_call_abandoned_before_it_started_never_starts() -> None:
    """Issue 36 #2: a call whose deadline passed before it started (the process paused between
    making the call and starting it, here inside the lease check) must not start later; what its
    late return releases is still released."""
    clock = FakeClock(START)

    def paused_past_the_deadline() -> bool:
        clock.step(30.0)  # the watchdog abandons the call in this step
        return True

    caller = DriverCaller(
        clock, ControllerMetrics(CollectorRegistry(), "fake"), 30.0, holds_lease=paused_past_the_deadline
    )
    created: list[str] = []
    released = threading.Event()
    with pytest.raises(MachineError) as raised:
        caller.call("create_machine", lambda ctx: created.append("vm"), on_abandon=lambda: released.set)
    assert raised.value.code == Code.DeadlineExceeded
    assert released.is_set(), "the abandoned call's release never ran"
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

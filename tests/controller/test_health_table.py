"""Upstream v0.47.0 ``machine_test.go`` ``#isHealthy`` and ``machine_util_test.go``
``#reconcileMachineHealth`` (general and meltdown tables), adapted to HEAD where said (Pending
timeout from creation; re-check ≤ 1 min)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.controller import health
from mcm.controller.health import FailedMarks, is_healthy, reconcile_machine_health
from mcm.runtime.worker import Result

from .builders import HEALTHY, mk_machine, mk_node
from .fakes import World, make_world, ts

CONTROLLER_LIST = ["ReadonlyFilesystem", "KernelDeadlock", "DiskPressure", "NetworkUnavailable"]
MIN = 60.0
TARGET = "shoot--testProject--testShoot-testWorkerPool-z1-mset1-0"


def _with(kind: str, status: str) -> list[dict[str, Any]]:
    conditions = copy.deepcopy([*HEALTHY, {"type": "Ready", "status": "True"}])
    next(cd for cd in conditions if cd["type"] == kind)["status"] = status
    return conditions


@pytest.mark.parametrize(
    ("name", "kind", "status", "healthy"),
    [
        ("1 NodeReady True", "Ready", "True", True),
        ("2 NodeReady False", "Ready", "False", False),
        ("3 NodeReady Unknown", "Ready", "Unknown", False),
        ("4 DiskPressure True", "DiskPressure", "True", False),
        ("5 DiskPressure False", "DiskPressure", "False", True),
        ("6 DiskPressure Unknown", "DiskPressure", "Unknown", False),
        ("7 MemoryPressure True", "MemoryPressure", "True", True),
        ("8 MemoryPressure False", "MemoryPressure", "False", True),
        ("9 MemoryPressure Unknown", "MemoryPressure", "Unknown", True),
        ("10 NetworkUnavailable True", "NetworkUnavailable", "True", False),
        ("11 NetworkUnavailable False", "NetworkUnavailable", "False", True),
        ("12 NetworkUnavailable Unknown", "NetworkUnavailable", "Unknown", False),
        ("13 NodeReady True again", "Ready", "True", True),
        ("14 NodeReady False again", "Ready", "False", False),
        ("15 NodeReady Unknown again", "Ready", "Unknown", False),
    ],
)
def test_8_1_is_healthy(name: str, kind: str, status: str, healthy: bool) -> None:
    assert is_healthy(_with(kind, status), CONTROLLER_LIST) is healthy


def test_no_conditions_is_unhealthy() -> None:
    assert is_healthy([], CONTROLLER_LIST) is False


def run(world: World, machine: dict[str, Any], marks: FailedMarks | None = None) -> tuple[Result | None, str]:
    world.machines.put(machine)
    stored = world.machines.get(machine["metadata"]["name"])
    outcome = reconcile_machine_health(world.deps, stored, marks or FailedMarks())
    after = world.machines.get(machine["metadata"]["name"])
    result = outcome.result
    if result is None and outcome.recheck is not None:
        result = Result.after(outcome.recheck)
    return result, after["status"]["currentStatus"]["phase"]


UNHEALTHY = [{"type": "Ready", "status": "False"}]


def test_8_11_1_simple_machine_with_creation_timeout() -> None:
    world = make_world()
    result, phase = run(
        world, mk_machine(world.clock, TARGET, phase=c.PHASE_PENDING, node="node-0", created_ago=25 * MIN)
    )
    assert phase == c.PHASE_FAILED
    assert result == Result.after(c.SHORT_RETRY)


def test_8_11_2_unknown_machine_if_healthy_should_be_marked_running() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", HEALTHY))
    result, phase = run(
        world, mk_machine(world.clock, TARGET, phase=c.PHASE_UNKNOWN, node="node-0", conditions=UNHEALTHY)
    )
    assert phase == c.PHASE_RUNNING
    assert result is None  # the pass goes on (upstream: Short)


@pytest.mark.parametrize(
    ("name", "node_conditions"),
    [
        ("3 kubelet not posting status", [{"type": "Ready", "status": "False"}]),
        (
            "4 other relevant node conditions",
            [{"type": "Ready", "status": "True"}, {"type": "ReadonlyFilesystem", "status": "True"}],
        ),
    ],
)
def test_8_11_3_4_running_machine_if_unhealthy_should_be_marked_unknown(
    name: str, node_conditions: list[dict[str, Any]]
) -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", node_conditions))
    result, phase = run(
        world, mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=HEALTHY)
    )
    assert phase == c.PHASE_UNKNOWN
    assert result is None


def test_8_11_5_running_machine_should_be_marked_unknown_if_node_object_not_found() -> None:
    world = make_world()
    _, phase = run(
        world, mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=HEALTHY)
    )
    assert phase == c.PHASE_UNKNOWN
    stored = world.machines.get(TARGET)
    assert stored["status"]["lastOperation"]["description"] == c.DESC_NODE_MISSING.format(machine=TARGET)


@pytest.mark.parametrize(
    ("name", "with_node"), [("6 with node obj", True), ("7 WITHOUT backing node obj", False)]
)
def test_8_11_6_7_unknown_for_over_health_timeout_should_be_marked_failed(name: str, with_node: bool) -> None:
    world = make_world()
    if with_node:
        world.nodes.put(mk_node("node-0", UNHEALTHY))
    machine = mk_machine(
        world.clock, TARGET, phase=c.PHASE_UNKNOWN, node="node-0", conditions=UNHEALTHY, phase_ago=15 * MIN
    )
    result, phase = run(world, machine)
    assert phase == c.PHASE_FAILED
    assert result == Result.after(c.SHORT_RETRY)


def test_8_11_8_pending_machine_without_creation_timeout_stays_pending() -> None:
    world = make_world()
    machine = mk_machine(
        world.clock, TARGET, phase=c.PHASE_PENDING, node="node-0", conditions=HEALTHY, created_ago=15 * MIN
    )
    result, phase = run(world, machine)
    assert phase == c.PHASE_PENDING
    assert (
        result is not None and result.requeue_after is not None and result.requeue_after <= 61
    )  # HEAD re-check


def test_pending_machine_with_critical_components_taint_stays_pending_head() -> None:
    world = make_world()
    taint = {"key": c.TAINT_CRITICAL_COMPONENTS_NOT_READY, "effect": "NoSchedule"}
    world.nodes.put(mk_node("node-0", HEALTHY, spec={"taints": [taint]}))
    _, phase = run(world, mk_machine(world.clock, TARGET, phase=c.PHASE_PENDING, node="node-0"))
    assert phase == c.PHASE_PENDING


def test_pending_machine_joins_and_its_bootstrap_token_is_deleted() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", HEALTHY))
    from mcm.controller.bootstrap import token_secret_name

    world.target_secrets.put({"metadata": {"name": token_secret_name(TARGET), "namespace": "kube-system"}})
    machine = mk_machine(
        world.clock,
        TARGET,
        phase=c.PHASE_PENDING,
        node="node-0",
        description=c.DESC_CREATING,
        op_type=c.OPERATION_CREATE,
    )
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    description = world.machines.get(TARGET)["status"]["lastOperation"]["description"]
    assert description.startswith(f"Machine {TARGET} successfully joined the cluster in ")
    assert world.target_secrets.objects == {}


# --- meltdown (##Meltdown scenario) ---------------------------------------------------------------


def other(world: World, name: str, phase: str, labels: dict[str, str] | None = None, **kw: Any) -> None:
    world.machines.put(mk_machine(world.clock, name, phase=phase, labels=labels, **kw))


def timed_out(world: World, labels: dict[str, str] | None = None, name: str = TARGET) -> dict[str, Any]:
    return mk_machine(
        world.clock,
        name,
        phase=c.PHASE_UNKNOWN,
        node="node-0",
        conditions=UNHEALTHY,
        phase_ago=15 * MIN,
        labels=labels,
    )


DEPLOYMENT = {c.LABEL_DEPLOYMENT_NAME: "testWorkerPool-z1"}


@pytest.mark.parametrize(
    ("name", "other_phase", "other_labels"),
    [
        ("1 two timed-out machines of different deployments", c.PHASE_UNKNOWN, None),
        ("2 one timed-out and one Failed of different deployments", c.PHASE_FAILED, None),
        ("3 two timed-out machines of the same machine set", c.PHASE_UNKNOWN, None),
    ],
)
def test_8_12_1_3_marked_failed(name: str, other_phase: str, other_labels: dict[str, str] | None) -> None:
    world = make_world()
    other(world, "other-machine", other_phase, other_labels)
    result, phase = run(world, timed_out(world))
    assert phase == c.PHASE_FAILED
    assert result == Result.after(c.SHORT_RETRY)


@pytest.mark.parametrize(
    ("name", "other_phase", "other_set"),
    [
        ("4 same deployment, other Failed", c.PHASE_FAILED, "mset1"),
        ("5 other Terminating", c.PHASE_TERMINATING, "mset1"),
        ("6 other with empty phase", "", "mset1"),
        ("7 other Pending", c.PHASE_PENDING, "mset1"),
        ("8 other CrashLoopBackOff", c.PHASE_CRASH_LOOP_BACK_OFF, "mset1"),
        ("9 other Pending in a different machine set of the same deployment", c.PHASE_PENDING, "mset2"),
    ],
)
def test_8_12_4_9_stays_unknown(name: str, other_phase: str, other_set: str) -> None:
    world = make_world()
    other(world, f"other-{other_set}", other_phase, DEPLOYMENT)
    result, phase = run(world, timed_out(world, DEPLOYMENT))
    assert phase == c.PHASE_UNKNOWN
    assert result == Result.after(c.SHORT_RETRY)


def test_8_12_10_timeout_in_acquiring_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "PERMIT_TIMEOUT", 0.0)
    world = make_world()
    world.deps.permits.register_permits("testWorkerPool-z1", 1)
    assert world.deps.permits.try_permit("testWorkerPool-z1", 0.0)
    result, phase = run(world, timed_out(world, DEPLOYMENT))
    assert phase == c.PHASE_UNKNOWN
    assert result == Result.after(c.SHORT_RETRY)


def test_configurable_cap_allows_more_failed_machines_per_deployment() -> None:
    from mcm.controller import ControllerOptions

    world = make_world(ControllerOptions(namespace="test-ns", max_failed_machines_per_deployment=2))
    other(world, "other-machine", c.PHASE_FAILED, DEPLOYMENT)
    _, phase = run(world, timed_out(world, DEPLOYMENT))
    assert phase == c.PHASE_FAILED


def test_a_just_marked_machine_counts_before_the_cache_shows_it() -> None:
    world = make_world()
    marks = FailedMarks()
    world.machines.put(mk_machine(world.clock, "first", phase=c.PHASE_UNKNOWN, labels=DEPLOYMENT))
    marks.add("testWorkerPool-z1", "first")  # written Failed, cache still says Unknown
    _, phase = run(world, timed_out(world, DEPLOYMENT), marks)
    assert phase == c.PHASE_UNKNOWN


def test_the_permit_is_not_held_across_the_failed_write_and_a_failed_write_frees_its_slot() -> None:
    """No lock across an API call (issue 23): the decision is reserved under the permit, the
    permit is given back before the status write; a write that fails gives the slot back."""
    from mcm.runtime.client.errors import ConnectionFailed

    world = make_world()
    marks = FailedMarks()
    held_during_write: list[bool] = []
    update_status = world.machines.update_status

    def observed(body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        held_during_write.append(world.deps.permits.is_held("testWorkerPool-z1"))
        return update_status(body, **kw)

    world.machines.update_status = observed  # type: ignore[method-assign]
    world.machines.fail("update_status", ConnectionFailed("connection reset by peer"), 1)
    result, phase = run(world, timed_out(world, DEPLOYMENT, name="first"), marks)
    assert (result, phase) == (Result.after(c.SHORT_RETRY), c.PHASE_UNKNOWN)
    _, phase = run(world, timed_out(world, DEPLOYMENT, name="second"), marks)
    assert phase == c.PHASE_FAILED  # the first one's failed write left no reservation behind
    assert held_during_write == [False, False]


# --- issue 23 mutation survivors ---------------------------------------------------------------


def test_an_unknown_machine_that_recovers_rejoins_without_touching_its_token() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", HEALTHY))
    world.target_secrets.put({"metadata": {"name": "bootstrap-token-x", "namespace": "kube-system"}})
    machine = mk_machine(
        world.clock,
        TARGET,
        phase=c.PHASE_UNKNOWN,
        node="node-0",
        conditions=UNHEALTHY,
        description="unhealthy",
        op_type=c.OPERATION_HEALTH_CHECK,
    )
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    last = world.machines.get(TARGET)["status"]["lastOperation"]
    assert (last["description"], last["type"]) == (
        c.DESC_REJOINED.format(machine=TARGET),
        c.OPERATION_HEALTH_CHECK,
    )
    assert world.target_secrets.writes == []


def pending_after_create(world: World) -> dict[str, Any]:
    return mk_machine(
        world.clock,
        TARGET,
        phase=c.PHASE_PENDING,
        node="node-0",
        description=c.DESC_CREATING,
        op_type=c.OPERATION_CREATE,
    )


def test_going_running_records_a_normal_event() -> None:
    from mcm.runtime.record import EventRecorder

    world = make_world()
    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    world.nodes.put(mk_node("node-0", HEALTHY))
    machine = mk_machine(
        world.clock,
        TARGET,
        phase=c.PHASE_PENDING,
        node="node-0",
        description=c.DESC_CREATING,
        op_type="Create",
    )
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    assert [(e["type"], e["reason"]) for e in events] == [("Normal", "MachineRunning")]


def test_a_node_cache_error_is_a_short_retry_not_a_missing_node() -> None:
    import dataclasses

    from mcm.runtime.client.errors import InternalError

    from .test_safety_table import Raising

    world = make_world()
    raising = Raising(world.nodes, InternalError({"message": "cache broken", "code": 500}))
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=raising)
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=HEALTHY)
    result, phase = run(world, machine)
    assert (result, phase) == (Result.after(c.SHORT_RETRY), c.PHASE_RUNNING)


def test_a_machine_without_creation_timestamp_still_joins() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", HEALTHY))
    machine = mk_machine(
        world.clock,
        TARGET,
        phase=c.PHASE_PENDING,
        node="node-0",
        description=c.DESC_CREATING,
        op_type="Create",
    )
    del machine["metadata"]["creationTimestamp"]
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    description = world.machines.get(TARGET)["status"]["lastOperation"]["description"]
    assert description == c.DESC_JOINED_IN.format(machine=TARGET, duration="0s")


# --- issue 23 "tests that notice" --------------------------------------------------------------

CRITICAL = c.TAINT_CRITICAL_COMPONENTS_NOT_READY


@pytest.mark.parametrize(
    ("taints", "phase"),
    [
        ([{"key": CRITICAL, "effect": "NoSchedule"}], c.PHASE_PENDING),
        (["junk", {"key": CRITICAL, "effect": "NoSchedule"}], c.PHASE_PENDING),  # malformed entries skipped
        ([{"key": CRITICAL, "effect": "NoExecute"}], c.PHASE_RUNNING),  # only the NoSchedule taint holds it
        ([{"key": "example.com/other", "effect": "NoSchedule"}], c.PHASE_RUNNING),
        ("junk", c.PHASE_RUNNING),
    ],
)
def test_only_the_critical_components_no_schedule_taint_holds_a_healthy_pending_machine(
    taints: Any, phase: str
) -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", HEALTHY, spec={"taints": taints}))
    _, after = run(world, pending_after_create(world))
    assert after == phase


def test_a_running_machine_that_never_had_conditions_is_not_unknown_when_its_node_is_missing() -> None:
    """HEAD: only a machine with at least one stored condition goes Unknown on a missing Node."""
    world = make_world()
    _, phase = run(world, mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0"))
    assert phase == c.PHASE_RUNNING
    assert world.machines.writes == []


def test_going_unknown_records_a_warning_event() -> None:
    from mcm.runtime.record import EventRecorder

    world = make_world()
    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    _, phase = run(
        world, mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=HEALTHY)
    )
    assert phase == c.PHASE_UNKNOWN
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [
        ("Warning", "MachineUnknown", c.DESC_NODE_MISSING.format(machine=TARGET))
    ]


@pytest.mark.parametrize(
    ("timeout", "elapsed", "recheck"),
    [
        (30.0, 0.0, 30.0),  # a short creation timeout: checked again exactly when it runs out
        (20 * MIN, 20 * MIN - 0.5, 0.5),
        (20 * MIN, 0.0, health.TIMEOUT_RECHECK),  # never later than once a minute
    ],
)
def test_the_creation_timeout_is_checked_again_when_it_runs_out(
    timeout: float, elapsed: float, recheck: float
) -> None:
    from mcm.controller import ControllerOptions

    from .fakes import NS

    world = make_world(ControllerOptions(namespace=NS, machine_creation_timeout=timeout))
    whole = float(int(elapsed))  # timestamps have whole seconds
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_PENDING, node="node-0", created_ago=whole)
    world.clock.step(elapsed - whole)
    result, phase = run(world, machine)
    assert phase == c.PHASE_PENDING
    assert result is not None and result.requeue_after == pytest.approx(recheck + 0.001)


@pytest.mark.parametrize(
    ("old_reason", "new_reason", "copied"),
    [("ReadyForUpdate", "UpdateSuccessful", True), ("ReadyForUpdate", "ReadyForUpdate", False)],
)
def test_a_changed_in_place_update_reason_is_copied_to_the_machine(
    old_reason: str, new_reason: str, copied: bool
) -> None:
    """The InPlaceUpdate condition's reason drives in-place updates (HEAD): a new reason with the
    same status is copied to the Machine; the same reason is no change."""

    def in_place(reason: str) -> list[dict[str, Any]]:
        return [*HEALTHY, {"type": c.NODE_IN_PLACE_UPDATE_CONDITION, "status": "True", "reason": reason}]

    world = make_world()
    world.nodes.put(mk_node("node-0", in_place(new_reason)))
    machine = mk_machine(
        world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=in_place(old_reason)
    )
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    stored = world.machines.get(machine["metadata"]["name"])
    reasons = [
        k.get("reason")
        for k in stored["status"]["conditions"]
        if k["type"] == c.NODE_IN_PLACE_UPDATE_CONDITION
    ]
    assert reasons == [new_reason if copied else old_reason]
    assert health.conditions_changed(in_place(old_reason), in_place(new_reason)) is copied


def test_a_status_change_with_the_same_condition_types_is_seen() -> None:
    """The Node reports the same condition types as before and only Ready turned False: the
    Machine takes the new conditions and goes Unknown."""
    world = make_world()
    unhealthy = [{**k, "status": "False"} if k["type"] == "Ready" else k for k in HEALTHY]
    world.nodes.put(mk_node("node-0", unhealthy))
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=HEALTHY)
    _, phase = run(world, machine)
    assert phase == c.PHASE_UNKNOWN
    stored = world.machines.get(machine["metadata"]["name"])
    assert [(k["type"], k["status"]) for k in stored["status"]["conditions"]] == [
        (k["type"], k["status"]) for k in unhealthy
    ]


# --- machine controller and drain mutation run (after the second sample) -----------------------


def _recorded(world: World) -> list[dict[str, Any]]:
    from mcm.runtime.record import EventRecorder

    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    return events


def _failed_joins(world: World) -> float:
    return sum(
        sample.value
        for metric in world.deps.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "mcm_machine_num_failed_join_total"
    )


def test_an_unknown_machine_with_the_health_timeout_disabled_is_never_marked_failed() -> None:
    world = make_world()
    machine = timed_out(world)
    machine["spec"]["disableHealthTimeout"] = True
    result, phase = run(world, machine)
    assert (result, phase) == (None, c.PHASE_UNKNOWN)
    assert world.machines.writes == []


def test_a_creation_timeout_whose_failed_write_fails_counts_and_records_nothing() -> None:
    """The Failed mark is counted (failed joins) and announced (Warning Event) only once written;
    a write that failed leaves the machine Pending and is retried."""
    from mcm.runtime.client.errors import ConnectionFailed

    world = make_world()
    events = _recorded(world)
    world.machines.fail("update_status", ConnectionFailed("connection reset by peer"), 1)
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_PENDING, node="node-0", created_ago=25 * MIN)
    result, phase = run(world, machine)
    assert (result, phase) == (Result.after(c.SHORT_RETRY), c.PHASE_PENDING)
    assert events == []
    assert _failed_joins(world) == 0
    result, phase = run(world, world.machines.get(TARGET))
    assert (result, phase) == (Result.after(c.SHORT_RETRY), c.PHASE_FAILED)
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "MachineFailed")]
    assert _failed_joins(world) == 1


def _preserved(world: World, name: str, phase: str) -> None:
    machine = mk_machine(world.clock, name, phase=phase, labels=DEPLOYMENT)
    machine["status"]["currentStatus"]["preserveExpiryTime"] = ts(world.clock, -3600)
    world.machines.put(machine)


@pytest.mark.parametrize(
    ("cap", "others", "marked"),
    [
        # a Terminating machine counts twice: under a cap of 2 it fills both places
        (2, [c.PHASE_TERMINATING], False),
        (3, [c.PHASE_TERMINATING], True),
        # any other phase but Running and Unknown counts once
        (2, [c.PHASE_PENDING], True),
        (2, [c.PHASE_PENDING, c.PHASE_FAILED], False),
        (3, [c.PHASE_PENDING, c.PHASE_FAILED], True),
        # Running and Unknown machines are not in replacement
        (1, [c.PHASE_RUNNING, c.PHASE_UNKNOWN], True),
    ],
)
def test_machines_in_replacement_are_counted_against_the_cap(
    cap: int, others: list[str], marked: bool
) -> None:
    from mcm.controller import ControllerOptions

    from .fakes import NS

    world = make_world(ControllerOptions(namespace=NS, max_failed_machines_per_deployment=cap))
    for i, phase in enumerate(others):
        other(world, f"other-{i}", phase, DEPLOYMENT)
    _, phase = run(world, timed_out(world, DEPLOYMENT))
    assert phase == (c.PHASE_FAILED if marked else c.PHASE_UNKNOWN)


@pytest.mark.parametrize(("preserved_phase", "marked"), [(c.PHASE_FAILED, True), (c.PHASE_PENDING, False)])
def test_a_preserved_failed_machine_is_not_in_replacement(preserved_phase: str, marked: bool) -> None:
    """A Failed machine kept for inspection (preserveExpiryTime set) is not being replaced; a
    machine in another phase counts whether preserved or not."""
    world = make_world()
    _preserved(world, "preserved", preserved_phase)
    _, phase = run(world, timed_out(world, DEPLOYMENT))
    assert phase == (c.PHASE_FAILED if marked else c.PHASE_UNKNOWN)


@pytest.mark.parametrize(
    ("cached_phase", "cap", "marked"),
    [
        # the cache shows the mark's Failed write: it counts once, as a Failed machine
        (c.PHASE_FAILED, 2, True),
        (c.PHASE_TERMINATING, 3, True),
        # the cache does not show it yet: the mark counts
        (c.PHASE_UNKNOWN, 1, False),
        # the marked machine is gone from the cache: its mark no longer counts
        (None, 1, True),
    ],
)
def test_a_mark_counts_until_the_cache_shows_its_machine_failed_or_gone(
    cached_phase: str | None, cap: int, marked: bool
) -> None:
    from mcm.controller import ControllerOptions

    from .fakes import NS

    world = make_world(ControllerOptions(namespace=NS, max_failed_machines_per_deployment=cap))
    marks = FailedMarks()
    marks.add("testWorkerPool-z1", "first")
    if cached_phase is not None:
        other(world, "first", cached_phase, DEPLOYMENT)
    _, phase = run(world, timed_out(world, DEPLOYMENT), marks)
    assert phase == (c.PHASE_FAILED if marked else c.PHASE_UNKNOWN)
    assert marks.pending("testWorkerPool-z1", {"first": c.PHASE_UNKNOWN}) == (
        set() if cached_phase in (None, c.PHASE_FAILED, c.PHASE_TERMINATING) else {"first"}
    )


@pytest.mark.parametrize("timeout", [30.0, 90.0])
def test_a_pending_machine_without_creation_timestamp_waits_its_whole_creation_timeout(
    timeout: float,
) -> None:
    """No creationTimestamp: nothing has elapsed, the machine is checked again when the whole
    timeout would have run out (at most a minute later)."""
    from mcm.controller import ControllerOptions

    from .fakes import NS

    world = make_world(ControllerOptions(namespace=NS, machine_creation_timeout=timeout))
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_PENDING, node="node-0")
    del machine["metadata"]["creationTimestamp"]
    result, phase = run(world, machine)
    assert phase == c.PHASE_PENDING
    assert result is not None and result.requeue_after == pytest.approx(min(timeout, MIN) + 0.001)


def test_an_unknown_machine_without_a_phase_time_is_not_failed() -> None:
    world = make_world()
    machine = timed_out(world)
    del machine["status"]["currentStatus"]["lastUpdateTime"]
    result, phase = run(world, machine)
    assert phase == c.PHASE_UNKNOWN
    assert result is not None and result.requeue_after == pytest.approx(MIN + 0.001)


@pytest.mark.parametrize(("ago", "phase"), [(10 * MIN, c.PHASE_UNKNOWN), (10 * MIN + 1, c.PHASE_FAILED)])
def test_the_health_timeout_is_passed_only_after_it_has_run_out(ago: float, phase: str) -> None:
    world = make_world()
    machine = mk_machine(
        world.clock, TARGET, phase=c.PHASE_UNKNOWN, node="node-0", conditions=UNHEALTHY, phase_ago=ago
    )
    _, after = run(world, machine)
    assert after == phase


def test_a_phase_change_whose_write_fails_is_retried_and_announced_only_once_written() -> None:
    from mcm.runtime.client.errors import ConnectionFailed

    world = make_world()
    events = _recorded(world)
    world.machines.fail("update_status", ConnectionFailed("connection reset by peer"), 1)
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=HEALTHY)
    result, phase = run(world, machine)
    assert (result, phase) == (Result.after(c.SHORT_RETRY), c.PHASE_RUNNING)
    assert [e["reason"] for e in events] == ["StatusUpdateFailed"]
    result, phase = run(world, world.machines.get(TARGET))
    assert (result, phase) == (None, c.PHASE_UNKNOWN)
    assert [e["reason"] for e in events] == ["StatusUpdateFailed", "MachineUnknown"]


def test_the_join_time_is_given_to_the_millisecond() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0", HEALTHY))
    machine = pending_after_create(world)
    machine["metadata"]["creationTimestamp"] = ts(world.clock, 42)
    world.clock.step(0.00049)
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    description = world.machines.get(TARGET)["status"]["lastOperation"]["description"]
    assert description == c.DESC_JOINED_IN.format(machine=TARGET, duration="42s")


def test_the_deployment_permit_is_free_again_after_a_failed_mark() -> None:
    world = make_world()
    _, phase = run(world, timed_out(world, DEPLOYMENT))
    assert phase == c.PHASE_FAILED
    assert world.deps.permits.is_held("testWorkerPool-z1") is False


def test_a_changed_reason_of_another_condition_is_no_change() -> None:
    """Only the InPlaceUpdate condition's reason counts (HEAD): a new reason of the same Ready
    status writes nothing."""
    old = [{**k, "reason": "KubeletReady"} if k["type"] == "Ready" else k for k in HEALTHY]
    new = [{**k, "reason": "KubeletReadyAgain"} if k["type"] == "Ready" else k for k in HEALTHY]
    assert health.conditions_changed(old, new) is False
    world = make_world()
    world.nodes.put(mk_node("node-0", new))
    machine = mk_machine(world.clock, TARGET, phase=c.PHASE_RUNNING, node="node-0", conditions=old)
    _, phase = run(world, machine)
    assert phase == c.PHASE_RUNNING
    assert world.machines.writes == []

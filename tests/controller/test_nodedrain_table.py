"""The drain step's rules as tables (upstream v0.47.0 ``drainNode`` in
``pkg/util/provider/machinecontroller/machine_util.go``, with HEAD's changes): when a drain is
forced, what the Node's ``Terminating`` condition says, and what the step writes when the
drain or the condition write fails."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.controller.nodedrain import update_node_termination_condition
from mcm.runtime.client.errors import InternalError
from mcm.runtime.worker import Result

from .builders import condition, mk_machine, mk_node
from .fakes import World, make_world, ts
from .fixtures import StubDrainer
from .test_deletion_table import op, step, terminating

MIN = 60.0
DRAIN_TIMEOUT = 300.0  # make_world's --machine-drain-timeout


def _drain(world: World, drainer: StubDrainer, machine: dict[str, Any]) -> tuple[Result | None, Any]:
    world.machines.put(machine)
    world.nodes.put(mk_node("fakeNode-0"))
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0")
    return step(world, world.machines.get("machine-0"))


@pytest.mark.parametrize(
    ("label", "forced"),
    [
        ("1", True),
        ("t", True),
        ("T", True),
        ("TRUE", True),
        ("true", True),
        ("True", True),
        (" true ", True),  # surrounding blanks are trimmed
        ("0", False),
        ("false", False),
        ("yes", False),  # not a Go boolean
        ("", False),
    ],
)
def test_the_force_deletion_label_forces_the_drain_when_it_is_a_go_true(label: str, forced: bool) -> None:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    machine = terminating(world, c.MARKER_INITIATE_DRAIN, labels={c.LABEL_FORCE_DELETION: label})
    _drain(world, drainer, machine)
    assert drainer.drained[0].options.force is forced


@pytest.mark.parametrize(
    ("deleting_ago", "spec_timeout", "forced"),
    [
        (DRAIN_TIMEOUT, None, False),  # exactly the drain timeout: not yet past it
        (DRAIN_TIMEOUT + 1, None, True),
        (DRAIN_TIMEOUT + 1, "10m", False),  # the machine's own drain timeout counts
        (601.0, "10m", True),
    ],
)
def test_a_deletion_older_than_the_drain_timeout_forces_the_drain(
    deleting_ago: float, spec_timeout: str | None, forced: bool
) -> None:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    machine = terminating(world, c.MARKER_INITIATE_DRAIN, deleting_ago=deleting_ago)
    if spec_timeout is not None:
        machine["spec"]["drainTimeout"] = spec_timeout
    _drain(world, drainer, machine)
    assert drainer.drained[0].options.force is forced


@pytest.mark.parametrize(
    ("kind", "status", "ago", "forced"),
    [
        ("Ready", "False", 5 * MIN, False),  # exactly 5 min: not over it
        ("Ready", "False", 5 * MIN + 1, True),
        ("Ready", "Unknown", 5 * MIN + 1, True),
        ("Ready", "True", 60 * MIN, False),
        ("ReadonlyFilesystem", "True", 5 * MIN + 1, True),
        ("ReadonlyFilesystem", "Unknown", 5 * MIN + 1, True),
        ("ReadonlyFilesystem", "False", 60 * MIN, False),
        ("DiskPressure", "True", 60 * MIN, False),  # other conditions never force it
    ],
)
def test_a_long_bad_node_condition_forces_the_drain(kind: str, status: str, ago: float, forced: bool) -> None:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    conditions = [condition(kind, status, world.clock, ago)]
    _drain(world, drainer, terminating(world, c.MARKER_INITIATE_DRAIN, conditions=conditions))
    assert drainer.drained[0].options.force is forced
    assert drainer.drained[0].options.timeout == (60.0 if forced else DRAIN_TIMEOUT)


def test_a_bad_condition_without_transition_time_does_not_force_the_drain() -> None:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    conditions = [{"type": "Ready", "status": "False"}]
    _drain(world, drainer, terminating(world, c.MARKER_INITIATE_DRAIN, conditions=conditions))
    assert drainer.drained[0].options.force is False


def test_a_failed_normal_drain_is_a_failed_step_retried_soon() -> None:
    drainer = StubDrainer(fail_with="pods left: default/app-0")
    world = make_world(drainer=drainer)
    result, stored = _drain(world, drainer, terminating(world, c.MARKER_INITIATE_DRAIN))
    assert result == Result.after(c.SHORT_RETRY)
    assert op(stored) == (
        c.DESC_DRAIN_FAILED.format(err="pods left: default/app-0"),
        c.STATE_FAILED,
        c.OPERATION_DELETE,
    )


def test_a_failed_forced_drain_records_a_warning_and_goes_on() -> None:
    from mcm.runtime.record import EventRecorder

    drainer = StubDrainer(fail_with="pods left: default/app-0")
    world = make_world(drainer=drainer)
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(
        lambda e: events.append(e) or True, "machine-controller", clock=world.clock
    )
    machine = terminating(world, c.MARKER_INITIATE_DRAIN, labels={c.LABEL_FORCE_DELETION: "true"})
    result, stored = _drain(world, drainer, machine)
    assert result is None
    assert op(stored) == (
        c.DESC_DRAIN_FAILED_FORCED.format(err="pods left: default/app-0"),
        c.STATE_PROCESSING,
        c.OPERATION_DELETE,
    )
    assert ("Warning", "DrainFailed", "pods left: default/app-0") in [
        (e["type"], e["reason"], e["message"]) for e in events
    ]


class _Raising(StubDrainer):
    def drain(self, node_name: str, options: Any, *, machine_ref: Any = None) -> Any:
        raise RuntimeError("")


def test_a_drain_that_raises_fails_the_step_with_the_error_type() -> None:
    drainer = _Raising()
    world = make_world(drainer=drainer)
    result, stored = _drain(world, drainer, terminating(world, c.MARKER_INITIATE_DRAIN))
    assert result == Result.after(c.SHORT_RETRY)
    assert op(stored)[:2] == (c.DESC_DRAIN_FAILED.format(err="RuntimeError"), c.STATE_FAILED)
    assert drainer.cordoned == ["fakeNode-0"]


def test_a_failed_drain_without_a_message_says_drain_failed() -> None:
    drainer = StubDrainer(fail_with="")
    world = make_world(drainer=drainer)
    result, stored = _drain(world, drainer, terminating(world, c.MARKER_INITIATE_DRAIN))
    assert result == Result.after(c.SHORT_RETRY)
    assert op(stored)[:2] == (c.DESC_DRAIN_FAILED.format(err="drain failed"), c.STATE_FAILED)


def test_without_a_drainer_the_step_fails() -> None:
    world = make_world(drainer=None)
    result, stored = _drain(world, StubDrainer(), terminating(world, c.MARKER_INITIATE_DRAIN))
    assert result == Result.after(c.SHORT_RETRY)
    assert op(stored)[:2] == (c.DESC_DRAIN_FAILED.format(err="no drainer configured"), c.STATE_FAILED)


def test_a_node_gone_before_the_condition_write_is_drained_anyway() -> None:
    """A 404 on the Terminating-condition write is no failure: the drain goes on."""
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    world.machines.put(terminating(world, c.MARKER_INITIATE_DRAIN))
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0")
    world.nodes.put(mk_node("fakeNode-0"))
    world.nodes.fail("update_status", world.nodes._missing("fakeNode-0"), 1)
    result, stored = step(world, world.machines.get("machine-0"))
    assert result is None
    assert op(stored)[0] == c.DESC_DRAIN_SUCCESSFUL
    assert [d.node_name for d in drainer.drained] == ["fakeNode-0"]


def test_the_drain_duration_is_exported_per_machine_deployment() -> None:
    drainer = StubDrainer()
    world = make_world(drainer=drainer)
    _drain(world, drainer, terminating(world, c.MARKER_INITIATE_DRAIN))
    samples = [
        sample
        for metric in world.deps.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "mcm_machine_drain_duration_seconds"
    ]
    assert len(samples) == 1


# --- the Terminating condition ------------------------------------------------------------------

OLD = 3600.0
SCALE_DOWN, SCALE_DOWN_MESSAGE = c.NODE_SCALED_DOWN_REASON, c.NODE_SCALED_DOWN_MESSAGE
UNHEALTHY, UNHEALTHY_MESSAGE = c.NODE_UNHEALTHY_REASON, c.NODE_UNHEALTHY_MESSAGE


def _terminating_condition(world: World, status: str, reason: str, message: str = "m") -> dict[str, Any]:
    return {
        "type": c.NODE_TERMINATION_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": ts(world.clock, OLD),
        "lastTransitionTime": ts(world.clock, OLD),
    }


@pytest.mark.parametrize(
    ("phase", "existing", "reason", "message", "transition_kept"),
    [
        (c.PHASE_TERMINATING, None, SCALE_DOWN, SCALE_DOWN_MESSAGE, False),
        (c.PHASE_FAILED, None, UNHEALTHY, UNHEALTHY_MESSAGE, False),
        (c.PHASE_RUNNING, None, SCALE_DOWN, SCALE_DOWN_MESSAGE, False),
        # a Terminating machine keeps what the condition already says (set when it was Failed)
        (c.PHASE_TERMINATING, ("True", UNHEALTHY, "why"), UNHEALTHY, "why", True),
        (c.PHASE_TERMINATING, ("False", UNHEALTHY, "why"), UNHEALTHY, "why", False),
        # any other phase sets its own reason; the transition time moves when the reason does
        (c.PHASE_FAILED, ("True", SCALE_DOWN, "m"), UNHEALTHY, UNHEALTHY_MESSAGE, False),
        (c.PHASE_FAILED, ("True", UNHEALTHY, "m"), UNHEALTHY, UNHEALTHY_MESSAGE, True),
        (c.PHASE_RUNNING, ("True", SCALE_DOWN, "m"), SCALE_DOWN, SCALE_DOWN_MESSAGE, True),
    ],
)
def test_the_terminating_condition(
    phase: str, existing: tuple[str, str, str] | None, reason: str, message: str, transition_kept: bool
) -> None:
    world = make_world()
    other = {"type": "Ready", "status": "True"}
    conditions = [other] + ([_terminating_condition(world, *existing)] if existing else [])
    world.nodes.put(mk_node("fakeNode-0", conditions))
    machine = mk_machine(world.clock, phase=phase, node="fakeNode-0", provider_id="fakeID-0")
    assert update_node_termination_condition(world.deps, machine) is None
    stored = world.nodes.get("fakeNode-0")["status"]["conditions"]
    assert stored[0] == other
    assert len(stored) == 2
    written = stored[1]
    assert (written["type"], written["status"], written["reason"], written["message"]) == (
        c.NODE_TERMINATION_CONDITION,
        "True",
        reason,
        message,
    )
    assert written["lastHeartbeatTime"] == ts(world.clock)
    assert written["lastTransitionTime"] == (ts(world.clock, OLD) if transition_kept else ts(world.clock))


@pytest.mark.parametrize("phase", ["", c.PHASE_CRASH_LOOP_BACK_OFF])
def test_a_machine_that_never_got_past_creation_sets_no_terminating_condition(phase: str) -> None:
    world = make_world()
    world.nodes.put(mk_node("fakeNode-0"))
    machine = mk_machine(world.clock, phase=phase or None, node="fakeNode-0")
    assert update_node_termination_condition(world.deps, machine) is None
    assert world.nodes.writes == []


def test_a_failed_terminating_condition_write_names_the_node_and_the_error() -> None:
    world = make_world()
    world.nodes.put(mk_node("fakeNode-0"))
    world.nodes.fail("update_status", InternalError({"message": "etcd down", "code": 500}))
    machine = mk_machine(world.clock, phase=c.PHASE_TERMINATING, node="fakeNode-0")
    assert update_node_termination_condition(world.deps, machine) == (
        'failed to create update conditions for node "fakeNode-0": etcd down'
    )

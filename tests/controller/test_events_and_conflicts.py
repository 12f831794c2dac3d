"""Acceptance checks of issue 11 not pinned elsewhere: Events on phase changes and failed steps
(Normal / Warning, short CamelCase reasons, no secret data) and a 409 on a status write coming
back as the ~200 ms conflict retry, the next pass writing from fresh data."""

from __future__ import annotations

import re
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.controller.creation import trigger_creation_flow
from mcm.controller.machine import MachineReconciler
from mcm.driver import Code, CreateMachineResponse, GetMachineStatusResponse, MachineError
from mcm.runtime.client.errors import Conflict
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import Result

from .builders import mk_class, mk_machine, mk_secret
from .fakes import World, make_world

USER_DATA = "s3cr3t-user-data-never-logged"


def world_with_events(machine: dict[str, Any]) -> tuple[World, list[dict[str, Any]], dict[str, Any]]:
    world = make_world()
    world.classes.put(mk_class("machine-0"))
    world.secrets.put(mk_secret("secret-0", userData=USER_DATA))
    world.machines.put(machine)
    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    return world, events, world.machines.get(machine["metadata"]["name"])


def create(world: World, machine: dict[str, Any]) -> Result:
    klass = MachineClass.from_dict(mk_class("machine-0"))
    return trigger_creation_flow(world.deps, machine, klass, {"userData": USER_DATA.encode()})


def reasons(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in events]


def assert_clean(events: list[dict[str, Any]]) -> None:
    for event in events:
        assert re.fullmatch(r"[A-Z][A-Za-z]+", event["reason"]), event["reason"]
        assert USER_DATA not in str(event)
        assert event["involvedObject"]["kind"] == "Machine"


def test_successful_creation_records_a_normal_phase_change_event() -> None:
    world = make_world()
    world, events, machine = world_with_events(mk_machine(world.clock, finalizer=True))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert ("Normal", f"Machine{c.PHASE_PENDING}") in reasons(events)
    assert not [e for e in events if e["type"] == "Warning"]
    assert_clean(events)


def test_failed_create_records_a_warning_and_the_phase_change() -> None:
    world = make_world()
    world, events, machine = world_with_events(mk_machine(world.clock))
    world.driver.script("create_machine", MachineError(Code.Internal, "quota"))
    assert create(world, machine) == Result.after(c.MEDIUM_RETRY)
    assert ("Warning", "CreateFailed") in reasons(events)
    assert ("Normal", f"Machine{c.PHASE_CRASH_LOOP_BACK_OFF}") in reasons(events)
    assert_clean(events)


def test_status_conflict_retries_after_200ms_without_an_event_then_writes_with_fresh_data() -> None:
    """A routine 409 is logged and retried, never a Warning Event (every healthy machine used
    to carry a ``StatusUpdateFailed`` Warning)."""
    world = make_world()
    stale = mk_machine(world.clock, provider_id="fakeID-0", node="fakeNode-0")
    world, events, machine = world_with_events(stale)
    world.machines.fail(
        "update_status", Conflict({"message": "the object has been modified", "code": 409}), 1
    )
    world.driver.always("get_machine_status", GetMachineStatusResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.CONFLICT_RETRY)
    assert not [e for e in events if e["type"] == "Warning"]
    fresh = world.machines.get("machine-0")
    assert create(world, fresh) == Result.after(c.SHORT_RETRY)
    after = world.machines.get("machine-0")
    assert after["status"]["currentStatus"]["phase"] == c.PHASE_PENDING
    assert_clean(events)


def test_deletion_and_class_messages_are_upstreams_texts() -> None:
    assert c.ERR_CLASS_IN_USE == "Retry as machine objects are still referring the machineclass"
    assert c.DESC_VA_NODE_MISSING.format(err="x") == (
        "Skipping deleteNodeVolAttachments due to - x. Moving to VM Deletion. Initiate VM deletion"
    )
    assert c.ERR_MACHINE_VALIDATION.format(err="[e]") == "Validation of Machine failed [e]"


def test_a_class_without_its_finalizer_yet_is_a_log_line_and_a_short_retry_not_an_event() -> None:
    """A class applied together with its machines has no finalizer until the class loop adds it:
    routine, so no ``ClassNotReady`` Warning on every Machine; the class is enqueued, the machine
    retried after ShortRetry, and the log line has upstream's text without brackets."""
    world, events, _ = world_with_events(mk_machine(make_world().clock, class_name="waiting"))
    world.classes.put(mk_class("waiting", finalizer=False))
    with structlog.testing.capture_logs() as logs:
        result = MachineReconciler(world.deps).reconcile_machine_key("test-ns/machine-0")
    assert result == Result.after(c.SHORT_RETRY)
    assert events == []
    assert ("machineclass", "waiting") in world.enqueued
    assert world.driver.calls == []
    waits = [entry for entry in logs if entry["event"] == "machine_class_not_ready"]
    assert [entry["message"] for entry in waits] == [
        "The machine class waiting has no finalizers set. So not reconciling the machine."
    ]

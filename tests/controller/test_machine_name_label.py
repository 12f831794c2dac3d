"""Issue 26 #8: a Machine whose name cannot be a label value is refused before CreateMachine.

Without the check a 253-character name got its VM, then writing the ``node`` label (and the
Node's machine-name label) failed on every pass and the Machine never got its providerID; a
driver that cannot find VMs by name would create a VM per retry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.controller.creation import trigger_creation_flow
from mcm.runtime.labels import is_valid_label_value
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import Result

from .builders import mk_class, mk_machine
from .fakes import make_world
from .fixtures import NS, Env, eventually, machine

LONG = "m" + "-x" * 126  # 253 characters: a valid object name, not a valid label value


def test_a_long_name_is_failed_with_an_event_and_no_vm_or_token() -> None:
    world = make_world()
    world.machines.put(mk_machine(world.clock, LONG, finalizer=True))
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(
        lambda e: events.append(e) or True, "machine-controller", clock=world.clock
    )
    klass = MachineClass.from_dict(mk_class())
    result = trigger_creation_flow(world.deps, world.machines.get(LONG), klass, {"userData": b"x"})
    assert result == Result.after(c.LONG_RETRY)
    assert world.driver.calls == []
    assert world.target_secrets.objects == {}
    status = world.machines.get(LONG)["status"]
    assert status["currentStatus"]["phase"] == c.PHASE_FAILED
    assert status["lastOperation"]["state"] == c.STATE_FAILED
    assert status["lastOperation"]["type"] == c.OPERATION_CREATE
    assert "must be no more than 63 characters" in status["lastOperation"]["description"]
    assert ("Warning", "InvalidMachineName") in [(e["type"], e["reason"]) for e in events]


def test_a_63_character_name_is_created() -> None:
    name = "m" * 63
    world = make_world()
    world.machines.put(mk_machine(world.clock, name, finalizer=True))
    klass = MachineClass.from_dict(mk_class())
    trigger_creation_flow(world.deps, world.machines.get(name), klass, {"userData": b"x"})
    assert [call.method for call in world.driver.calls][:2] == ["get_machine_status", "create_machine"]
    assert world.machines.get(name)["spec"]["providerID"]


def test_label_value_rules_match_apimachinery() -> None:
    assert is_valid_label_value("") == []
    assert is_valid_label_value("a" * 63) == []
    assert is_valid_label_value("a" * 64) == ["must be no more than 63 characters"]
    assert len(is_valid_label_value("-a")) == 1


def test_end_to_end_the_machine_fails_and_no_vm_exists(tmp_path: Path) -> None:
    env = Env(tmp_path)
    try:
        env.setup_class()
        env.start()
        env.machines.create(machine(LONG), namespace=NS)
        eventually(lambda: env.phase(LONG) == c.PHASE_FAILED, what="Failed")
        assert env.driver.vms == {}
        assert env.driver.calls_to("create_machine") == []
    finally:
        env.close()

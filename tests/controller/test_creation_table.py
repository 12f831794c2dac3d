"""Upstream v0.47.0 ``machine_test.go`` ``#triggerCreationFlow`` and ``#ValidateMachine`` /
``#ValidateMachineClass``, adapted to HEAD (metadata, InitializeMachine and Pending in one pass)
where said; plus bad input."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.apis.machine.validation import validate_machine
from mcm.controller.bootstrap import token_id, token_secret_name
from mcm.controller.creation import trigger_creation_flow
from mcm.controller.machine import MachineReconciler
from mcm.driver import (
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    GetMachineStatusResponse,
    MachineError,
)
from mcm.runtime.worker import Result

from .builders import mk_class, mk_machine, mk_node, mk_secret
from .fakes import World, make_world

SECRET = {"userData": b"test"}


def setup(machine: dict[str, Any]) -> tuple[World, dict[str, Any]]:
    world = make_world()
    world.classes.put(mk_class("machine-0"))
    world.secrets.put(mk_secret("secret-0", userData="test"))
    world.machines.put(machine)
    return world, world.machines.get(machine["metadata"]["name"])


def create(world: World, machine: dict[str, Any], data: dict[str, bytes] | None = None) -> Result:
    klass = MachineClass.from_dict(mk_class("machine-0"))
    return trigger_creation_flow(world.deps, machine, klass, SECRET if data is None else data)


def stored(world: World) -> dict[str, Any]:
    return world.machines.get("machine-0")


def phase(machine: dict[str, Any]) -> str:
    return str(machine.get("status", {}).get("currentStatus", {}).get("phase", ""))


def test_1_machine_creation_succeeds_with_object_update() -> None:
    """HEAD: the same pass goes on to InitializeMachine (Unimplemented) and Pending."""
    world, machine = setup(mk_machine(make_world().clock, finalizer=True))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    after = stored(world)
    assert after["spec"]["providerID"] == "fakeID-0"
    assert after["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"
    assert after["metadata"]["annotations"][c.ANNOTATION_MACHINE_PRIORITY] == "3"
    assert phase(after) == c.PHASE_PENDING
    assert after["status"]["lastOperation"]["description"] == c.DESC_CREATING
    assert after["status"]["currentStatus"]["timeoutActive"] is True
    assert [call.method for call in world.driver.calls] == [
        "get_machine_status",
        "create_machine",
        "initialize_machine",
    ]


def test_2_machine_creation_succeeds_with_status_update() -> None:
    clock = make_world().clock
    world, machine = setup(
        mk_machine(
            clock, provider_id="fakeID-0", node="fakeNode-0", annotations={c.ANNOTATION_MACHINE_PRIORITY: "3"}
        )
    )
    world.driver.always("get_machine_status", GetMachineStatusResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert phase(stored(world)) == c.PHASE_PENDING
    assert world.machines.writes == [("update_status", "machine-0")]


def test_3_machine_creation_has_already_succeeded_so_no_update() -> None:
    clock = make_world().clock
    world, machine = setup(
        mk_machine(
            clock,
            provider_id="fakeID-0",
            node="fakeNode-0",
            annotations={c.ANNOTATION_MACHINE_PRIORITY: "3"},
            phase=c.PHASE_PENDING,
            description=c.DESC_CREATING,
            op_type=c.OPERATION_CREATE,
        )
    )
    world.driver.always("get_machine_status", GetMachineStatusResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.LONG_RETRY)
    assert world.machines.writes == []


@pytest.mark.parametrize(
    ("name", "created_ago", "expected"),
    [
        ("4 fails with CrashLoopBackOff", 0.0, c.PHASE_CRASH_LOOP_BACK_OFF),
        ("5 fails with Failure due to timeout", 3600.0, c.PHASE_FAILED),
    ],
)
def test_4_5_machine_creation_fails(name: str, created_ago: float, expected: str) -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock, created_ago=created_ago))
    world.driver.script(
        "create_machine", MachineError(Code.Internal, "Provider is returning error on create call")
    )
    assert create(world, machine) == Result.after(c.MEDIUM_RETRY)
    after = stored(world)
    assert phase(after) == expected
    assert after["status"]["lastOperation"]["description"] == (
        "Cloud provider message - machine codes error: code = [Internal] "
        "message = [Provider is returning error on create call]"
    )
    assert after["status"]["lastOperation"]["errorCode"] == "Internal"


def test_6_failure_due_to_vm_using_stale_node_obj() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.nodes.put(mk_node("fakeNode-0"))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    after = stored(world)
    assert phase(after) == c.PHASE_FAILED
    assert after["status"]["lastOperation"]["description"] == c.DESC_OLD_NODE_OBJECT
    assert [call.method for call in world.driver.calls][-1] == "delete_machine"


def test_6b_the_vms_own_node_registered_before_create_answered_is_not_stale() -> None:
    """Found by the chaos suite: CreateMachine made the VM but its answer was lost; its Node
    registered; the retry (GetMachineStatus ``Uninitialized`` without a providerID, so an
    idempotent CreateMachine) returns that VM. Its Node carries the VM's provider ID: it is the
    VM's own Node, not a stale one, so the VM is adopted, not deleted."""
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-0"}))
    world.driver.script("get_machine_status", MachineError(Code.Uninitialized, "not initialized"))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    after = stored(world)
    assert phase(after) == c.PHASE_PENDING
    assert after["spec"]["providerID"] == "fakeID-0"
    assert "delete_machine" not in [call.method for call in world.driver.calls]


def test_6c_a_node_of_another_vm_under_the_same_name_is_stale() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.nodes.put(mk_node("fakeNode-0", spec={"providerID": "fakeID-old"}))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert phase(stored(world)) == c.PHASE_FAILED
    assert [call.method for call in world.driver.calls][-1] == "delete_machine"


def test_retryable_get_status_error_is_short_and_keeps_last_known_state() -> None:
    world = make_world()
    machine = mk_machine(world.clock, provider_id="fakeID-0")
    machine["status"]["lastKnownState"] = "state-1"
    world, machine = setup(machine)
    world.driver.always("get_machine_status", MachineError(Code.Unavailable, "try later"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert stored(world)["status"]["lastKnownState"] == "state-1"


def test_resource_exhausted_uses_its_own_retry() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.driver.script("create_machine", MachineError(Code.ResourceExhausted, "quota"))
    assert create(world, machine) == Result.after(c.LONG_RETRY)


@pytest.mark.parametrize(("configured", "retry"), [(90.0, 90.0), (0.0, c.LONG_RETRY)])
def test_resource_exhausted_retries_after_the_configured_period_or_the_long_one(
    configured: float, retry: float
) -> None:
    import dataclasses

    world, machine = setup(mk_machine(make_world().clock))
    world.deps.options = dataclasses.replace(world.deps.options, resource_exhausted_retry=configured)
    world.driver.script("create_machine", MachineError(Code.ResourceExhausted, "quota"))
    assert create(world, machine) == Result.after(retry)


def test_driver_raising_a_non_machine_error_is_internal() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.driver.script("create_machine", RuntimeError("boom"))
    assert create(world, machine) == Result.after(c.MEDIUM_RETRY)
    assert "code = [Internal]" in stored(world)["status"]["lastOperation"]["description"]


def test_user_data_missing_is_short_without_status_write() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    assert create(world, machine, data={}) == Result.after(c.SHORT_RETRY)
    assert world.machines.writes == []
    assert world.driver.calls == []


def test_bootstrap_token_secret_and_user_data() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock, name="machine-0"))
    create(world, machine, data={"userData": b"token=<<BOOTSTRAP_TOKEN>> name=<<MACHINE_NAME>>"})
    token = world.target_secrets.get(token_secret_name("machine-0"))
    data = {k: base64.b64decode(v).decode() for k, v in token["data"].items()}
    assert token["type"] == c.BOOTSTRAP_TOKEN_SECRET_TYPE
    assert (
        data["description"]
        == 'A bootstrap token for machine "machine-0" generated by MachineControllerManager.'
    )
    assert data["token-id"] == token_id("machine-0") == "696e65"  # hex of "ine", the 5th- to 3rd-last bytes
    assert data["expiration"] == "2026-01-01T12:20:00Z"
    request = world.driver.calls_to("create_machine")[0].request
    assert isinstance(request, CreateMachineRequest)
    sent = request.secret_data["userData"].decode()
    assert sent == f"token={data['token-id']}.{data['token-secret']} name=machine-0"


@pytest.mark.parametrize("name", ["m", "ab", "abcd"])
def test_machine_names_shorter_than_five_bytes_get_a_token(name: str) -> None:
    assert len(token_id(name)) == 6


def test_crash_loop_back_off_re_enters_creation_head() -> None:
    world = make_world()
    world, machine = setup(
        mk_machine(
            world.clock, provider_id="fake:///machine-0", node="machine-0", phase=c.PHASE_CRASH_LOOP_BACK_OFF
        )
    )
    world.driver.add_vm("fake:///machine-0", "machine-0")
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert phase(stored(world)) == c.PHASE_PENDING


def test_uninitialized_vm_gets_initialized_head() -> None:
    from mcm.driver import FakeDriver

    world = make_world(driver=FakeDriver(initialization=True))
    world.classes.put(mk_class("machine-0"))
    world.machines.put(mk_machine(world.clock))
    machine = world.machines.get("machine-0")
    create(world, machine)
    assert [call.method for call in world.driver.calls] == [
        "get_machine_status",
        "create_machine",
        "initialize_machine",
    ]
    assert phase(stored(world)) == c.PHASE_PENDING


# --- validation (#ValidateMachine, #ValidateMachineClass) -----------------------------------------


def test_validate_machine_aws() -> None:
    machine = {"spec": {"class": {"kind": "AWSMachineClass", "name": "aws"}}}
    assert validate_machine(machine) == []


@pytest.mark.parametrize(
    ("name", "class_name", "secret", "class_finalizer", "ok", "data"),
    [
        ("1 non-existing machine class", "non-existing", True, True, False, None),
        ("2 non-existing secret", "class-0", False, True, True, None),
        ("3 valid machineClass", "class-0", True, True, True, {"foo": b"bar"}),
        ("4 machineClass without Finalizer", "class-0", True, False, False, {"foo": b"bar"}),
    ],
)
def test_validate_machine_class(
    name: str, class_name: str, secret: bool, class_finalizer: bool, ok: bool, data: dict[str, bytes] | None
) -> None:
    """Adapted: a class without finalizer is returned (not nil) but the resolution is not ok
    and the class is enqueued for its finalizer."""
    world = make_world()
    world.classes.put(mk_class("class-0", finalizer=class_finalizer))
    if secret:
        world.secrets.put(mk_secret("secret-0", foo="bar"))
    machine = mk_machine(world.clock, class_name=class_name)
    resolution = MachineReconciler(world.deps).resolve_class(machine)
    assert resolution.ok is ok
    if ok:
        assert resolution.secret_data == data
    if not class_finalizer:
        assert resolution.retry == c.SHORT_RETRY
        assert world.enqueued == [("machineclass", "class-0")]


def test_invalid_spec_and_missing_class_never_crash() -> None:
    world = make_world()
    reconciler = MachineReconciler(world.deps)
    bad = mk_machine(world.clock)
    bad["spec"] = {"class": {"kind": "", "name": ""}}
    world.machines.put(bad)
    assert reconciler.reconcile_machine_key("test-ns/machine-0") == Result.after(c.LONG_RETRY)
    world.machines.put(mk_machine(world.clock, class_name="missing"))
    assert reconciler.reconcile_machine_key("test-ns/machine-0") == Result.after(c.LONG_RETRY)
    other_kind = mk_machine(world.clock)
    other_kind["spec"]["class"]["kind"] = "AWSMachineClass"
    world.machines.put(other_kind)
    assert reconciler.reconcile_machine_key("test-ns/machine-0") == Result.after(c.LONG_RETRY)
    assert world.driver.calls == []


# --- issue 23 "tests that notice" --------------------------------------------------------------


@pytest.mark.parametrize("code", [Code.NotFound, Code.Unimplemented])
def test_a_machine_with_a_provider_id_is_never_given_a_second_vm(code: Code) -> None:
    """GetMachineStatus answers NotFound/Unimplemented for a machine that has a providerID: the
    VM it names is kept (no CreateMachine); upstream's ``and not providerID`` branch."""
    clock = make_world().clock
    world, machine = setup(mk_machine(clock, provider_id="fakeID-0", node="fakeNode-0"))
    world.driver.always("get_machine_status", MachineError(code, "not there"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert world.driver.calls_to("create_machine") == []
    after = stored(world)
    assert after["spec"]["providerID"] == "fakeID-0"
    assert phase(after) == c.PHASE_PENDING


@pytest.mark.parametrize(
    ("created_ago", "expected"), [(0.0, c.PHASE_CRASH_LOOP_BACK_OFF), (3600.0, c.PHASE_FAILED)]
)
def test_a_failed_initialize_machine_is_a_failed_create_operation(created_ago: float, expected: str) -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock, created_ago=created_ago))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    world.driver.script("initialize_machine", MachineError(Code.Unavailable, "still booting"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    after = stored(world)
    assert after["spec"]["providerID"] == "fakeID-0"  # the VM is recorded before InitializeMachine
    assert phase(after) == expected
    last = after["status"]["lastOperation"]
    assert last["state"] == c.STATE_FAILED and last["type"] == c.OPERATION_CREATE
    assert last["errorCode"] == "Unavailable"
    assert last["description"] == c.DESC_INITIALIZE_FAILED.format(
        err="machine codes error: code = [Unavailable] message = [still booting]"
    )


def test_a_deletion_during_create_machine_still_learns_the_vms_node() -> None:
    """Found by the chaos suite: the Machine was deleted while CreateMachine ran, so the metadata
    PUT (computed from the copy before) got 409; the deletion then found the VM Uninitialized,
    deleted it without knowing its Node, and the Node stayed for ever. The VM's provider ID and
    node name are kept on the Machine with a merge patch of those fields only."""
    world = make_world()
    with_uid = mk_machine(world.clock, finalizer=True, labels={"team": "a"})
    with_uid["metadata"]["uid"] = "uid-0"
    world, machine = setup(with_uid)

    def deleted_meanwhile(ctx: Any, request: CreateMachineRequest) -> CreateMachineResponse:
        world.machines.delete("machine-0")
        return CreateMachineResponse("fakeID-0", "fakeNode-0")

    world.driver.script("create_machine", deleted_meanwhile)
    assert create(world, machine) == Result.after(c.CONFLICT_RETRY)
    after = stored(world)
    assert after["metadata"].get("deletionTimestamp")
    assert after["spec"]["providerID"] == "fakeID-0"
    assert after["metadata"]["labels"] == {"team": "a", c.LABEL_NODE: "fakeNode-0"}
    assert c.MCM_FINALIZER in after["metadata"]["finalizers"]
    name, patch = world.machines.patches[-1]
    assert name == "machine-0"
    assert patch["metadata"]["uid"] == "uid-0"


def test_an_abandoned_create_machine_keeps_what_it_made_on_the_machine_when_it_returns() -> None:
    """Found by the chaos suite: CreateMachine passed --driver-call-timeout, the Machine was
    deleted meanwhile, and the call then made the VM. The deletion (held off until the call
    returned) found it Uninitialized without a node label, deleted it, and left its Node for
    ever. The late answer now goes onto the Machine before the hold is released."""
    import threading

    from mcm.controller.drivercalls import DriverCaller

    world = make_world()
    world, machine = setup(mk_machine(world.clock, finalizer=True))
    world.deps.calls = DriverCaller(world.clock, world.deps.metrics, 10.0)
    booting, release = threading.Event(), threading.Event()

    def slow_create(ctx: Any, request: CreateMachineRequest) -> CreateMachineResponse:
        booting.set()
        release.wait(10)
        return CreateMachineResponse("fakeID-0", "fakeNode-0")

    world.driver.script("create_machine", slow_create)
    results: list[Result] = []
    runner = threading.Thread(target=lambda: results.append(create(world, machine)))
    runner.start()
    assert booting.wait(5)
    world.clock.step(10.0)  # abandoned: the worker's call still runs
    assert "test-ns/machine-0" in world.deps.creation
    world.machines.delete("machine-0")
    release.set()
    runner.join(5)
    # DeadlineExceeded, whatever the driver said; its status write meets the Machine the late
    # answer changed, so the retry comes soon.
    assert results == [Result.after(c.CONFLICT_RETRY)]
    assert "test-ns/machine-0" not in world.deps.creation
    after = stored(world)
    assert after["metadata"].get("deletionTimestamp")
    assert after["spec"]["providerID"] == "fakeID-0"
    assert after["metadata"]["labels"][c.LABEL_NODE] == "fakeNode-0"


def test_a_driver_answer_without_provider_id_is_a_failed_create() -> None:
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.driver.script("create_machine", CreateMachineResponse("", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.MEDIUM_RETRY)
    after = stored(world)
    assert "providerID" not in after["spec"]
    assert phase(after) == c.PHASE_CRASH_LOOP_BACK_OFF
    assert after["status"]["lastOperation"]["errorCode"] == "Internal"


def test_a_conflict_on_the_failed_create_status_write_is_retried_soon() -> None:
    from mcm.runtime.client.errors import Conflict

    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.driver.script("create_machine", MachineError(Code.Internal, "quota"))
    world.machines.fail("update_status", Conflict({"message": "modified", "code": 409}), 1)
    assert create(world, machine) == Result.after(c.CONFLICT_RETRY)


def test_without_a_target_cluster_a_vm_with_any_node_name_becomes_available() -> None:
    import dataclasses

    world = make_world()
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=None)
    world.deps.writers = dataclasses.replace(world.deps.writers, nodes=None, target_secrets=None)
    world.classes.put(mk_class("machine-0"))
    world.machines.put(mk_machine(world.clock))
    machine = world.machines.get("machine-0")
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "some-other-node"))
    assert create(world, machine) == Result.after(c.LONG_RETRY)
    assert phase(stored(world)) == c.PHASE_AVAILABLE


@pytest.mark.parametrize(
    ("init_state", "expected"),
    [("", "created-state"), ("init-state", "init-state")],
)
def test_a_failed_initialize_machine_keeps_the_latest_last_known_state(
    init_state: str, expected: str
) -> None:
    """What CreateMachine returned is kept, unless InitializeMachine's error brings a newer state."""
    world = make_world()
    world, machine = setup(mk_machine(world.clock))
    world.driver.script(
        "create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0", last_known_state="created-state")
    )
    world.driver.script(
        "initialize_machine", MachineError(Code.Unavailable, "still booting", last_known_state=init_state)
    )
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert stored(world)["status"]["lastKnownState"] == expected


def test_bootstrap_token_secrets_are_uniform_over_the_alphabet() -> None:
    """The token secret comes from one CSPRNG read per token (issue 39: one per character was
    3 % of the controller's CPU in a burst), still uniform over [0-9a-z]."""
    from collections import Counter

    from mcm.controller.bootstrap import random_token

    tokens = [random_token(16) for _ in range(2000)]
    assert all(len(t) == 16 and t.isalnum() and t == t.lower() for t in tokens)
    counts = Counter("".join(tokens))
    assert set(counts) == set("0123456789abcdefghijklmnopqrstuvwxyz")
    expected = 16 * 2000 / 36
    assert all(abs(n - expected) < 0.2 * expected for n in counts.values())  # 889 ± 178: > 5 sigma
    assert len(set(tokens)) == len(tokens)


def test_a_name_that_cannot_be_a_label_value_is_failed_before_any_driver_call() -> None:
    """The node label will carry the machine's name: a name longer than a label value is refused
    (Failed, retried after the long period) before CreateMachine."""
    name = "m" + "-x" * 126
    world, machine = setup(mk_machine(make_world().clock, name))
    assert create(world, machine) == Result.after(c.LONG_RETRY)
    assert world.driver.calls == []
    assert phase(world.machines.get(name)) == c.PHASE_FAILED


@pytest.mark.parametrize("implemented", [True, False])
def test_the_initialization_time_is_exported_only_for_an_initialize_machine_that_ran(
    implemented: bool,
) -> None:
    from mcm.driver import InitializeMachineResponse

    world, machine = setup(mk_machine(make_world().clock))
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    if implemented:
        world.driver.script("initialize_machine", InitializeMachineResponse("fakeID-0", "fakeNode-0"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert phase(stored(world)) == c.PHASE_PENDING
    samples = [
        sample
        for metric in world.deps.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "mcm_machine_initialize_duration_seconds"
    ]
    assert len(samples) == (1 if implemented else 0)


def test_a_failed_create_of_a_machine_without_creation_time_is_a_crash_loop() -> None:
    """No creationTimestamp: the creation timeout cannot have passed."""
    machine = mk_machine(make_world().clock)
    del machine["metadata"]["creationTimestamp"]
    world, stored_machine = setup(machine)
    world.driver.script("create_machine", MachineError(Code.Internal, "quota"))
    assert create(world, stored_machine) == Result.after(c.MEDIUM_RETRY)
    assert phase(stored(world)) == c.PHASE_CRASH_LOOP_BACK_OFF


@pytest.mark.parametrize(
    ("code", "initialized"), [(Code.Uninitialized, True), (Code.NotFound, False), (Code.Unimplemented, False)]
)
def test_an_adopted_vm_is_initialized_only_when_the_driver_says_uninitialized(
    code: Code, initialized: bool
) -> None:
    clock = make_world().clock
    world, machine = setup(mk_machine(clock, provider_id="fakeID-0", node="fakeNode-0"))
    world.driver.script("get_machine_status", MachineError(code, "status"))
    create(world, machine)
    assert ("initialize_machine" in [call.method for call in world.driver.calls]) is initialized
    assert "create_machine" not in [call.method for call in world.driver.calls]


def test_a_failed_metadata_write_records_a_warning() -> None:
    from mcm.runtime.client.errors import InternalError
    from mcm.runtime.record import EventRecorder

    world, machine = setup(mk_machine(make_world().clock))
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(
        lambda e: events.append(e) or True, "machine-controller", clock=world.clock
    )
    world.driver.script("create_machine", CreateMachineResponse("fakeID-0", "fakeNode-0"))
    world.machines.fail("update", InternalError({"message": "etcd down", "code": 500}), 1)
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert ("Warning", "UpdateFailed") in [(e["type"], e["reason"]) for e in events]

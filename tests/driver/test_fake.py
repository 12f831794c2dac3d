"""FakeDriver: the in-memory cloud, scripting per method and per machine, the call log."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import Machine, NodeAddress
from mcm.driver import (
    CallContext,
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    FakeDriver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    InitializeMachineRequest,
    ListMachinesRequest,
    MachineError,
)
from mcm.driver.fake import NOT_FOUND_MESSAGE, DriverRequest, DriverResponse
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

CTX = CallContext.background()
CLASS = sample_machine_class("small")
SECRET = {"userData": b"#!/bin/sh"}


def machine(name: str, provider_id: str | None = None) -> Machine:
    m = sample_machine(name, "small")
    m.spec.provider_id = provider_id
    return m


def create(fake: FakeDriver, name: str) -> CreateMachineResponse:
    return fake.create_machine(CTX, CreateMachineRequest(machine(name), CLASS, SECRET))


def status(fake: FakeDriver, name: str, provider_id: str | None = None) -> GetMachineStatusResponse:
    return fake.get_machine_status(CTX, GetMachineStatusRequest(machine(name, provider_id), CLASS, SECRET))


def delete(fake: FakeDriver, name: str, provider_id: str | None = None) -> DeleteMachineResponse:
    return fake.delete_machine(CTX, DeleteMachineRequest(machine(name, provider_id), CLASS, SECRET))


def test_create_makes_one_vm_per_machine_name() -> None:
    fake = FakeDriver(last_known_state="lks")
    first = create(fake, "m1")
    assert first == CreateMachineResponse("fake:///m1", "m1", last_known_state="lks")
    assert create(fake, "m1") == first
    assert list(fake.vms) == ["fake:///m1"]
    assert fake.vms["fake:///m1"].class_name == "small"


def test_create_without_a_machine_name_is_invalid_argument() -> None:
    with pytest.raises(MachineError) as raised:
        create(FakeDriver(), "")
    assert raised.value.code == Code.InvalidArgument


def test_status_by_provider_id_or_name_and_not_found_message() -> None:
    fake = FakeDriver(provider_id_prefix="aws:///eu-1/")
    create(fake, "m1")
    assert status(fake, "m1") == GetMachineStatusResponse("aws:///eu-1/m1", "m1")
    assert status(fake, "other-name", "aws:///eu-1/m1").provider_id == "aws:///eu-1/m1"
    with pytest.raises(MachineError) as raised:
        status(fake, "m1", "aws:///eu-1/gone")
    assert (raised.value.code, raised.value.message) == (Code.NotFound, NOT_FOUND_MESSAGE)


def test_a_machine_without_provider_id_finds_its_vm_by_name_through_every_change() -> None:
    """The name index follows added, replaced, renamed and removed VMs; with two VMs of one
    name the first in the table wins, as the scan it replaces decided."""
    fake = FakeDriver()
    fake.add_vm("p:///a", "m1")
    fake.add_vm("p:///b", "m1")
    assert status(fake, "m1").provider_id == "p:///a"
    fake.add_vm("p:///a", "renamed")
    assert status(fake, "m1").provider_id == "p:///b"
    assert status(fake, "renamed").provider_id == "p:///a"
    assert fake.remove_vm("p:///b")
    with pytest.raises(MachineError):
        status(fake, "m1")
    delete(fake, "renamed")
    assert fake.vms == {}
    assert create(fake, "renamed").provider_id == "fake:///renamed"


def test_delete_removes_the_vm_and_tolerates_a_missing_one() -> None:
    fake = FakeDriver()
    create(fake, "m1")
    delete(fake, "m1", "fake:///m1")
    assert fake.vms == {}
    assert delete(fake, "m1", "fake:///m1") == DeleteMachineResponse("")
    assert delete(fake, "never") == DeleteMachineResponse("")


def test_list_shows_vms_of_the_class_and_classless_vms() -> None:
    fake = FakeDriver()
    create(fake, "m1")
    fake.add_vm("fake:///orphan", "orphan-machine")
    fake.add_vm("fake:///big", "big-machine", class_name="big")
    listed = fake.list_machines(CTX, ListMachinesRequest(CLASS, SECRET)).machine_list
    assert listed == {"fake:///m1": "m1", "fake:///orphan": "orphan-machine"}


def test_get_volume_ids_returns_csi_handles_only() -> None:
    specs: list[dict[str, Any]] = [
        {"csi": {"driver": "disk.csi", "volumeHandle": "vol-1"}},
        {"hostPath": {"path": "/tmp"}},
        {"csi": {"driver": "disk.csi"}},
        {"csi": "garbage"},
        {"csi": {"volumeHandle": "vol-2"}},
    ]
    response = FakeDriver().get_volume_ids(CTX, GetVolumeIDsRequest(specs))
    assert response.volume_ids == ("vol-1", "vol-2")


def test_initialize_is_unimplemented_by_default() -> None:
    fake = FakeDriver()
    create(fake, "m1")
    with pytest.raises(MachineError) as raised:
        fake.initialize_machine(CTX, InitializeMachineRequest(machine("m1"), CLASS, SECRET))
    assert raised.value.code == Code.Unimplemented
    assert status(fake, "m1").provider_id == "fake:///m1"


def test_initialization_mode_reports_uninitialized_until_initialized() -> None:
    fake = FakeDriver(initialization=True)
    create(fake, "m1")
    with pytest.raises(MachineError) as raised:
        status(fake, "m1")
    assert raised.value.code == Code.Uninitialized
    response = fake.initialize_machine(CTX, InitializeMachineRequest(machine("m1"), CLASS, SECRET))
    assert (response.provider_id, response.node_name) == ("fake:///m1", "m1")
    assert status(fake, "m1").provider_id == "fake:///m1"


def test_initialize_of_missing_vm_is_not_found() -> None:
    fake = FakeDriver(initialization=True)
    with pytest.raises(MachineError) as raised:
        fake.initialize_machine(CTX, InitializeMachineRequest(machine("m1"), CLASS, SECRET))
    assert raised.value.code == Code.NotFound


def test_add_vm_with_addresses_and_remove_vm() -> None:
    fake = FakeDriver()
    address = NodeAddress(type="InternalIP", address="10.0.0.5")
    fake.add_vm("fake:///x", "m1", node_name="node-x", addresses=[address])
    assert status(fake, "m1") == GetMachineStatusResponse("fake:///x", "node-x", (address,))
    assert fake.remove_vm("fake:///x")
    assert not fake.remove_vm("fake:///x")


def test_one_shot_scripts_run_in_order_then_simulation_resumes() -> None:
    fake = FakeDriver()
    quota = MachineError(Code.ResourceExhausted, "quota")
    fake.script("create_machine", quota, CreateMachineResponse("p-scripted", "n-scripted"))
    with pytest.raises(MachineError) as raised:
        create(fake, "m1")
    assert raised.value is quota
    assert create(fake, "m1") == CreateMachineResponse("p-scripted", "n-scripted")
    assert fake.vms == {}, "scripted outcomes do not touch the in-memory cloud"
    assert create(fake, "m1").provider_id == "fake:///m1"


def test_standing_outcome_repeats_until_cleared() -> None:
    fake = FakeDriver()
    fake.always("list_machines", MachineError(Code.Unavailable, "api down"))
    for _ in range(3):
        with pytest.raises(MachineError):
            fake.list_machines(CTX, ListMachinesRequest(CLASS, SECRET))
    fake.always("list_machines", None)
    assert fake.list_machines(CTX, ListMachinesRequest(CLASS, SECRET)).machine_list == {}


def test_machine_scripts_win_over_method_scripts() -> None:
    fake = FakeDriver()
    fake.always("get_machine_status", MachineError(Code.Internal, "everyone"))
    fake.always("get_machine_status", GetMachineStatusResponse("p-special", "n"), machine="special")
    fake.script("get_machine_status", MachineError(Code.Aborted, "once"), machine="special")
    with pytest.raises(MachineError) as raised:
        status(fake, "special")
    assert raised.value.code == Code.Aborted
    assert status(fake, "special").provider_id == "p-special"
    with pytest.raises(MachineError) as raised:
        status(fake, "other")
    assert raised.value.code == Code.Internal


def test_method_queue_wins_over_method_standing_outcome() -> None:
    fake = FakeDriver()
    fake.always("delete_machine", MachineError(Code.Internal, "standing"))
    fake.script("delete_machine", DeleteMachineResponse("queued"))
    assert delete(fake, "m1") == DeleteMachineResponse("queued")
    with pytest.raises(MachineError, match="standing"):
        delete(fake, "m1")
    fake.reset_scripts()
    assert delete(fake, "m1") == DeleteMachineResponse("")


def test_callable_outcome_sees_context_and_request() -> None:
    fake = FakeDriver()
    seen: list[tuple[CallContext, DriverRequest]] = []

    def answer(ctx: CallContext, request: DriverRequest) -> DriverResponse:
        seen.append((ctx, request))
        return GetMachineStatusResponse("p-from-callable", "n")

    fake.always("get_machine_status", answer)
    assert status(fake, "m1").provider_id == "p-from-callable"
    assert seen[0][0] is CTX
    assert isinstance(seen[0][1], GetMachineStatusRequest)


def test_scripted_response_of_the_wrong_type_is_a_type_error() -> None:
    fake = FakeDriver()
    fake.script("create_machine", DeleteMachineResponse())
    with pytest.raises(TypeError, match=r"create_machine.*DeleteMachineResponse"):
        create(fake, "m1")


def test_call_log_records_every_call_including_failures() -> None:
    fake = FakeDriver()
    fake.script("get_machine_status", MachineError(Code.NotFound, "no"))
    with pytest.raises(MachineError):
        status(fake, "m1")
    create(fake, "m1")
    fake.list_machines(CTX, ListMachinesRequest(CLASS, SECRET))
    assert [(c.method, c.machine) for c in fake.calls] == [
        ("get_machine_status", "m1"),
        ("create_machine", "m1"),
        ("list_machines", None),
    ]
    assert [c.machine for c in fake.calls_to("create_machine")] == ["m1"]
    assert fake.calls_to("create_machine", machine="m2") == []
    request = fake.calls[1].request
    assert isinstance(request, CreateMachineRequest)
    assert request.secret_data == SECRET


def test_secret_data_is_not_in_request_repr() -> None:
    request = CreateMachineRequest(machine("m1"), CLASS, {"userData": b"top-secret-token"})
    assert "top-secret-token" not in repr(request)


def test_concurrent_creates_of_one_machine_make_one_vm() -> None:
    fake = FakeDriver()
    results: list[str] = []
    barrier = threading.Barrier(8)

    def run() -> None:
        barrier.wait(timeout=5)
        results.append(create(fake, "m1").provider_id)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert results == ["fake:///m1"] * 8
    assert len(fake.vms) == 1
    assert len(fake.calls) == 8


def test_a_fake_built_without_a_call_log_keeps_no_requests_and_still_simulates() -> None:
    fake = FakeDriver(record_calls=False)
    create(fake, "m1")
    assert status(fake, "m1").provider_id == "fake:///m1"
    delete(fake, "m1", "fake:///m1")
    assert fake.calls == []
    assert fake.vms == {}


def test_the_commands_fake_driver_keeps_no_call_log() -> None:
    """``machine-controller --driver=fake`` runs for as long as its user likes: a log of every
    request (each with its typed Machine, class and secret) would grow without bound."""
    from mcm.app.options import Options
    from mcm.app.runner import load_driver

    driver = load_driver(Options.defaults(driver="fake"))
    assert isinstance(driver, FakeDriver)
    create(driver, "m1")
    assert driver.calls == []
    assert list(driver.vms) == ["fake:///m1"]

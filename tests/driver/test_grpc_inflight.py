"""The sidecar never runs a second CreateMachine (or a DeleteMachine) beside a CreateMachine for
the same Machine that its client gave up on (issue 23, found by the chaos suite's long run)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import Machine
from mcm.driver import (
    CallContext,
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    FakeDriver,
    GetMachineStatusRequest,
    MachineError,
)
from mcm.driver.fake import DriverRequest, DriverResponse
from mcm.driver.grpc import DriverServer, GrpcDriver, serve
from mcm.driver.grpc.inflight import CREATE, DELETE, MachineCalls, machine_key
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

CLASS = sample_machine_class("small")


class Gate:
    """A slow driver call that ignores cancellation: it runs until :meth:`open`."""

    def __init__(self, answer: DriverResponse) -> None:
        self.answer = answer
        self.started = threading.Event()
        self.released = threading.Event()
        self.returned = threading.Event()
        self.saw_cancel = threading.Event()

    def __call__(self, ctx: CallContext, request: DriverRequest) -> DriverResponse:
        ctx.on_cancel(self.saw_cancel.set)
        self.started.set()
        try:
            self.released.wait(10)
            return self.answer
        finally:
            self.returned.set()

    def open(self) -> None:
        self.released.set()


@pytest.fixture
def fake() -> FakeDriver:
    return FakeDriver()


@pytest.fixture
def server(fake: FakeDriver) -> Iterator[DriverServer]:
    with serve(fake, "127.0.0.1:0") as srv:
        yield srv


@pytest.fixture
def client(server: DriverServer) -> Iterator[GrpcDriver]:
    with GrpcDriver(server.endpoint, timeout=10.0) as drv:
        yield drv


def ctx(seconds: float = 10.0) -> CallContext:
    return CallContext.with_timeout(seconds)


def in_namespace(name: str, namespace: str) -> Machine:
    machine = sample_machine(name, "small")
    machine.metadata.namespace = namespace
    return machine


def create(name: str = "m1", namespace: str = "default") -> CreateMachineRequest:
    return CreateMachineRequest(in_namespace(name, namespace), CLASS, {})


def delete(name: str = "m1") -> DeleteMachineRequest:
    return DeleteMachineRequest(sample_machine(name, "small"), CLASS, {})


def refusal(call: Callable[[], Any]) -> MachineError:
    with pytest.raises(MachineError) as raised:
        call()
    return raised.value


def accepted_eventually(call: Callable[[], Any], timeout: float = 5.0) -> Any:
    """``call()``'s answer once the server no longer refuses it (the held call is returning)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except MachineError as err:
            if err.code != Code.Aborted or time.monotonic() > deadline:
                raise
        threading.Event().wait(0.01)


def abandon_slow_create(fake: FakeDriver, client: GrpcDriver, name: str = "m1") -> Gate:
    """A CreateMachine whose client deadline passes while the driver keeps running."""
    gate = Gate(CreateMachineResponse(f"fake:///first-{name}", name))
    fake.script("create_machine", gate, machine=name)
    with pytest.raises(MachineError) as raised:
        client.create_machine(ctx(0.3), create(name))
    assert raised.value.code == Code.DeadlineExceeded
    assert gate.started.is_set()
    assert gate.saw_cancel.wait(5), "the sidecar's driver never saw the deadline"
    assert not gate.returned.is_set()
    return gate


def test_a_second_create_machine_is_aborted_while_the_abandoned_one_still_runs(
    fake: FakeDriver, client: GrpcDriver
) -> None:
    gate = abandon_slow_create(fake, client)
    err = refusal(lambda: client.create_machine(ctx(), create()))
    assert err.code == Code.Aborted
    assert "a CreateMachine for machine default/m1 is still running" in err.message
    assert len(fake.calls_to("create_machine")) == 1, "the second call reached the driver"
    assert fake.vms == {}
    gate.open()
    answer = accepted_eventually(lambda: client.create_machine(ctx(), create()))
    assert answer.provider_id == "fake:///m1"
    assert len(fake.calls_to("create_machine")) == 2


def test_a_delete_machine_is_aborted_while_a_create_machine_for_it_still_runs(
    fake: FakeDriver, client: GrpcDriver
) -> None:
    """Otherwise the delete finds nothing, the Machine's finalizer goes, and the create then
    makes a VM nobody deletes."""
    gate = abandon_slow_create(fake, client)
    err = refusal(lambda: client.delete_machine(ctx(), delete()))
    assert err.code == Code.Aborted
    assert "a CreateMachine for machine default/m1 is still running" in err.message
    assert fake.calls_to("delete_machine") == []
    gate.open()
    accepted_eventually(lambda: client.delete_machine(ctx(), delete()))
    assert len(fake.calls_to("delete_machine")) == 1


def test_a_create_machine_is_aborted_while_a_delete_machine_for_it_still_runs(
    fake: FakeDriver, client: GrpcDriver
) -> None:
    gate = Gate(DeleteMachineResponse())
    fake.script("delete_machine", gate, machine="m1")
    with pytest.raises(MachineError):
        client.delete_machine(ctx(0.3), delete())
    err = refusal(lambda: client.create_machine(ctx(), create()))
    assert err.code == Code.Aborted
    assert "a DeleteMachine for machine default/m1 is still running" in err.message
    gate.open()
    accepted_eventually(lambda: client.create_machine(ctx(), create()))


def test_other_machines_other_namespaces_and_other_calls_are_never_refused(
    fake: FakeDriver, client: GrpcDriver
) -> None:
    gate = abandon_slow_create(fake, client)
    assert client.create_machine(ctx(), create("m2")).provider_id == "fake:///m2"
    assert client.create_machine(ctx(), create("m1", "other")).provider_id == "fake:///m1"
    with pytest.raises(MachineError) as raised:
        client.get_machine_status(ctx(), GetMachineStatusRequest(sample_machine("m3", "small"), CLASS, {}))
    assert raised.value.code == Code.NotFound
    gate.open()


def test_concurrent_delete_machines_for_one_machine_both_run(fake: FakeDriver, client: GrpcDriver) -> None:
    gate = Gate(DeleteMachineResponse())
    fake.script("delete_machine", gate, machine="m1")
    with futures.ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(client.delete_machine, ctx(), delete())
        assert gate.started.wait(5)
        client.delete_machine(ctx(), delete())
        assert not gate.returned.is_set()
        gate.open()
        first.result(5)
    assert len(fake.calls_to("delete_machine")) == 2


def test_a_refused_call_and_a_failed_call_release_nothing_they_do_not_hold() -> None:
    calls = MachineCalls()
    key = ("default", "m1")
    assert calls.admit(CREATE, key) is None
    assert calls.admit(CREATE, key) == CREATE
    assert calls.admit(DELETE, key) == CREATE
    calls.done(CREATE, key)
    assert calls.running(CREATE, key) == 0
    assert calls.admit(DELETE, key) is None
    assert calls.admit(DELETE, key) is None
    assert calls.admit(CREATE, key) == DELETE
    calls.done(DELETE, key)
    assert calls.admit(CREATE, key) == DELETE
    calls.done(DELETE, key)
    assert calls.admit(CREATE, key) is None


def test_a_driver_error_releases_the_machine(fake: FakeDriver, client: GrpcDriver) -> None:
    fake.script("create_machine", MachineError(Code.Internal, "quota"), machine="m1")
    assert refusal(lambda: client.create_machine(ctx(), create())).code == Code.Internal
    assert client.create_machine(ctx(), create()).provider_id == "fake:///m1"


def test_a_machine_without_a_name_is_not_tracked() -> None:
    assert machine_key(Machine.from_dict({"metadata": {"namespace": "default"}})) is None
    assert machine_key(sample_machine("m1", "small")) == ("default", "m1")

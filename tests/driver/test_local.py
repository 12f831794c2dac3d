"""The local provider: conformance in process and over gRPC, nodes, injected failures, restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.driver import (
    CallContext,
    Code,
    CreateMachineRequest,
    DeleteMachineRequest,
    GetMachineStatusRequest,
    ListMachinesRequest,
    MachineError,
)
from mcm.driver.grpc import GrpcDriver, serve
from mcm.driver.local import DEFAULT_NAMESPACE, LocalDriver, LocalSpec
from mcm.emulator import ClusterPair
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import CONFIG_MAPS, NODES
from mcm.runtime.clock import FakeClock
from mcm.testing.driver_conformance import (
    ConformanceCase,
    DriverConformanceSuite,
    sample_machine,
    sample_machine_class,
)


@pytest.fixture
def control(kubeconfig: str) -> Iterator[ClusterClient]:
    client = load_config(kubeconfig, qps=-1)
    yield client
    client.close()


def _class(provider_spec: dict[str, Any] | None = None, **template: Any) -> MachineClass:
    body = sample_machine_class().to_dict()
    body["providerSpec"] = provider_spec or {}
    if template:
        body["nodeTemplate"] = template
    return MachineClass.from_dict(body)


def _case(driver: LocalDriver | GrpcDriver) -> ConformanceCase:
    return ConformanceCase(driver, sample_machine(), sample_machine_class(), {"userData": b"#!/bin/sh"}, 10.0)


class TestLocalDriverConformance(DriverConformanceSuite):
    @pytest.fixture
    def driver_conformance_case(self, control: ClusterClient) -> ConformanceCase:
        return _case(LocalDriver(control))


class TestGrpcServedLocalDriverConformance(DriverConformanceSuite):
    @pytest.fixture
    def driver_conformance_case(self, control: ClusterClient) -> Iterator[ConformanceCase]:
        with serve(LocalDriver(control), "127.0.0.1:0") as server:
            with GrpcDriver(server.endpoint, timeout=10.0) as client:
                yield _case(client)


def _create(driver: LocalDriver, name: str, machine_class: MachineClass) -> Any:
    request = CreateMachineRequest(sample_machine(name), machine_class, {})
    return driver.create_machine(CallContext.with_timeout(10), request)


def test_vms_are_config_maps_that_outlive_the_driver(control: ClusterClient) -> None:
    machine_class = _class({}, capacity={"cpu": 4, "memory": "16Gi"}, instanceType="m5.xlarge", zone="z1")
    first = LocalDriver(control)
    created = _create(first, "m-1", machine_class)
    assert created.provider_id == f"local:///{DEFAULT_NAMESPACE}/m-1"
    assert [a.type for a in created.addresses] == ["InternalIP", "Hostname"]
    record = control.resource(CONFIG_MAPS).get("m-1", namespace=DEFAULT_NAMESPACE)
    assert record["data"]["className"] == "conformance-class"

    again = LocalDriver(control)
    listed = again.list_machines(CallContext.with_timeout(10), ListMachinesRequest(machine_class, {}))
    assert dict(listed.machine_list) == {created.provider_id: "m-1"}
    other = again.list_machines(CallContext.with_timeout(10), ListMachinesRequest(_named_class("other"), {}))
    assert dict(other.machine_list) == {}
    vm = again.simulated_vms()[0]
    assert vm.capacity == {"cpu": "4", "memory": "16Gi"}
    assert vm.labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert vm.labels["topology.kubernetes.io/zone"] == "z1"


def _named_class(name: str) -> MachineClass:
    return MachineClass.from_dict(
        {**sample_machine_class().to_dict(), "metadata": {"name": name, "namespace": "default"}}
    )


def test_injected_create_error_and_never_booting_vm(control: ClusterClient) -> None:
    driver = LocalDriver(control)
    failing = _class({"createErrorCode": "ResourceExhausted", "createErrorMessage": "quota exceeded"})
    with pytest.raises(MachineError) as raised:
        _create(driver, "m-1", failing)
    assert (raised.value.code, raised.value.message) == (Code.ResourceExhausted, "quota exceeded")

    _create(driver, "m-2", _class({"bootNeverCompletes": True}))
    assert [vm.boots for vm in driver.simulated_vms()] == [False]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"bootDelaySeconds": "soon"}, "bootDelaySeconds"),
        ({"createErrorCode": "Sometimes"}, "createErrorCode"),
        ({"bootNeverCompletes": "yes"}, "bootNeverCompletes"),
        ({"addressPrefix": "10.0"}, "addressPrefix"),
    ],
)
def test_bad_provider_spec_is_invalid_argument_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(MachineError) as raised:
        LocalSpec.parse(spec)
    assert raised.value.code == Code.InvalidArgument
    assert field in raised.value.message


def test_slow_delete_waits_within_the_deadline_and_continues_on_the_next_call(control: ClusterClient) -> None:
    clock = FakeClock()
    driver = LocalDriver(control, clock=clock)
    machine_class = _class({"deleteDelaySeconds": 60})
    _create(driver, "m-1", machine_class)
    request = DeleteMachineRequest(sample_machine("m-1"), machine_class, {})
    with pytest.raises(MachineError) as raised:
        driver.delete_machine(CallContext.with_timeout(0, clock), request)
    assert raised.value.code == Code.DeadlineExceeded
    clock.step(60)
    driver.delete_machine(CallContext.with_timeout(0, clock), request)
    with pytest.raises(MachineError) as gone:
        driver.get_machine_status(
            CallContext.with_timeout(10), GetMachineStatusRequest(sample_machine("m-1"), machine_class, {})
        )
    assert gone.value.code == Code.NotFound


def test_vms_boot_into_nodes_in_the_target_cluster(tmp_path: Any) -> None:
    with ClusterPair.start(tmp_path) as pair:
        control = load_config(str(pair.control_kubeconfig), qps=-1)
        target = load_config(str(pair.target_kubeconfig), qps=-1)
        driver = LocalDriver(control, target=target, poll_interval=0.05)
        try:
            created = _create(driver, "m-1", _class({"bootDelaySeconds": 0.2}, capacity={"cpu": 8}))
            node = _wait_for(lambda: target.resource(NODES).get("m-1"))
            assert node["spec"]["providerID"] == created.provider_id
            assert node["status"]["capacity"] == {"cpu": "8"}
            ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
            assert ready == "True"
        finally:
            driver.close()
            control.close()
            target.close()


def _wait_for(read: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except NotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)

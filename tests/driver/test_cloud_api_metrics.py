"""Drivers reach the ``mcm_cloud_api_*`` metrics through the call context: in process, from the
local driver, and from a sidecar over gRPC; the provider label comes from the MachineClass."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.controller.drivercalls import DriverCaller
from mcm.controller.metrics import ControllerMetrics
from mcm.driver import (
    CallContext,
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    FakeDriver,
    GetMachineStatusRequest,
    MachineError,
)
from mcm.driver.grpc import GrpcDriver, serve
from mcm.driver.grpc.cloudapi import MAX_SAMPLES, SAMPLES_KEY, Samples, replay
from mcm.driver.local import LocalDriver
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.clock import FakeClock
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

REQUESTS = "mcm_cloud_api_requests_total"
FAILED = "mcm_cloud_api_requests_failed_total"
DURATION = "mcm_cloud_api_api_request_duration_seconds_count"


class Recorder:
    def __init__(self) -> None:
        self.samples: list[tuple[str, float, bool]] = []

    def observe(self, service: str, seconds: float, failed: bool) -> None:
        self.samples.append((service, seconds, failed))


class CloudDriver(FakeDriver):
    """A fake cloud whose create makes two API requests, the second failing when told to."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        with ctx.cloud_api_request("compute"):
            ctx.clock.sleep(0)
        try:
            with ctx.cloud_api_request("network"):
                if self.fail:
                    raise ConnectionError("network API down")
        except ConnectionError as exc:
            raise MachineError(Code.Unavailable, str(exc)) from exc
        return super().create_machine(ctx, request)


def _class(provider: str | None) -> MachineClass:
    body = sample_machine_class().to_dict()
    if provider is not None:
        body["provider"] = provider
    return MachineClass.from_dict(body)


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_cloud_api_request_counts_successes_failures_and_answers() -> None:
    recorder = Recorder()
    clock = FakeClock()
    ctx = CallContext.with_timeout(30, clock, cloud_api=recorder)
    with ctx.cloud_api_request("compute"):
        clock.step(1.5)
    with pytest.raises(LookupError), ctx.cloud_api_request("compute", answers=(LookupError,)):
        raise LookupError("no such VM")
    with pytest.raises(ValueError), ctx.cloud_api_request("compute"):
        raise ValueError("quota")
    assert recorder.samples == [("compute", 1.5, False), ("compute", 0.0, False), ("compute", 0.0, True)]
    with CallContext.background().cloud_api_request("compute"):  # no controller: nothing to record
        pass


def test_driver_calls_carry_the_metrics_and_the_classes_provider_label() -> None:
    registry = CollectorRegistry()
    caller = DriverCaller(FakeClock(), ControllerMetrics(registry, "from-flag"), 30.0)
    for provider, fail in (("aws", False), ("aws", True), (None, False)):
        driver = CloudDriver(fail=fail)
        request = CreateMachineRequest(sample_machine(), _class(provider), {})
        try:
            caller.call(
                "create_machine",
                lambda ctx, d=driver, r=request: d.create_machine(ctx, r),
                provider=provider,
            )
        except MachineError:
            assert fail
    assert _value(registry, REQUESTS, provider="aws", service="compute") == 2
    assert _value(registry, REQUESTS, provider="aws", service="network") == 1
    assert _value(registry, FAILED, provider="aws", service="network") == 1
    assert _value(registry, DURATION, provider="aws", service="compute") == 2
    assert _value(registry, REQUESTS, provider="from-flag", service="compute") == 1  # no class provider
    duration = "mcm_cloud_api_driver_request_duration_seconds_count"
    assert _value(registry, duration, provider="aws", operation="CreateMachine") == 2
    assert _value(registry, duration, provider="from-flag", operation="CreateMachine") == 1
    failed = "mcm_cloud_api_driver_requests_failed_total"
    assert _value(registry, failed, provider="aws", operation="CreateMachine", error_code="Unavailable") == 1


@pytest.fixture
def control(kubeconfig: str) -> Iterator[ClusterClient]:
    client = load_config(kubeconfig, qps=-1)
    yield client
    client.close()


def test_the_local_driver_counts_its_api_requests(control: ClusterClient) -> None:
    recorder = Recorder()
    ctx = CallContext.with_timeout(30, cloud_api=recorder)
    driver = LocalDriver(control)
    machine_class = _class("local")
    with pytest.raises(MachineError):  # not created yet: a NotFound answer, not a failed request
        driver.get_machine_status(ctx, GetMachineStatusRequest(sample_machine(), machine_class, {}))
    driver.create_machine(ctx, CreateMachineRequest(sample_machine(), machine_class, {}))
    services = [(service, failed) for service, _, failed in recorder.samples]
    assert services == [
        ("configmaps", False),  # status: get
        ("configmaps", False),  # create: get
        ("configmaps", False),  # create: create, NotFound (no VM namespace yet)
        ("namespaces", False),  # create: the VM namespace
        ("configmaps", False),  # create: create again
    ]


def test_a_sidecars_samples_reach_the_controllers_metrics(control: ClusterClient) -> None:
    registry = CollectorRegistry()
    caller = DriverCaller(FakeClock(), ControllerMetrics(registry), 30.0)
    with serve(CloudDriver(), "127.0.0.1:0") as server, GrpcDriver(server.endpoint, timeout=10) as client:
        request = CreateMachineRequest(sample_machine(), _class("mycloud"), {})
        caller.call("create_machine", lambda ctx: client.create_machine(ctx, request), provider="mycloud")
    with (
        serve(CloudDriver(fail=True), "127.0.0.1:0") as server,
        GrpcDriver(server.endpoint, timeout=10) as client,
    ):
        with pytest.raises(MachineError):
            caller.call("create_machine", lambda ctx: client.create_machine(ctx, request), provider="mycloud")
    assert _value(registry, REQUESTS, provider="mycloud", service="compute") == 2
    assert _value(registry, REQUESTS, provider="mycloud", service="network") == 1
    assert _value(registry, FAILED, provider="mycloud", service="network") == 1


def test_samples_are_capped_and_bad_ones_ignored() -> None:
    samples = Samples()
    for _ in range(MAX_SAMPLES + 5):
        samples.observe("compute", 0.1, False)
    ((key, value),) = samples.trailers()
    assert key == SAMPLES_KEY and len(json.loads(value)) == MAX_SAMPLES and samples.dropped == 5
    assert Samples().trailers() == ()
    recorder = Recorder()
    bad = json.dumps(
        [["ok", 1, False], ["", 1, False], ["x" * 65, 1, False], ["n", -1, True], ["n", "1", True],
         ["n", 1, "yes"], ["n", float("inf"), True], "junk", ["n", True, True]]
    )  # fmt: skip
    replay([(SAMPLES_KEY, bad), (SAMPLES_KEY, "{not json"), ("other", "[]")], recorder)
    replay(None, recorder)
    assert recorder.samples == [("ok", 1.0, False)]

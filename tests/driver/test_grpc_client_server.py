"""GrpcDriver against serve(FakeDriver) in this process: payloads, errors, deadlines, endpoints."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from structlog.testing import capture_logs

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
from mcm.driver.fake import DriverRequest, DriverResponse
from mcm.driver.grpc import DriverServer, GrpcDriver, UndecodableDriverError, serve
from mcm.driver.grpc.client import CHANNEL_OPTIONS
from mcm.driver.grpc.rpcs import CREATE_MACHINE, SERVICE_NAME
from mcm.driver.grpc.server import SERVER_OPTIONS
from mcm.driver.grpc.status import MAX_DETAILS, MAX_LAST_KNOWN_STATE
from mcm.driver.proto.mcm.driver.v1 import driver_pb2 as pb
from mcm.testing.driver_conformance import sample_machine_class

CLASS = sample_machine_class("small")
SECRET = {"userData": b"#!/bin/sh\necho hi", "binary": bytes(range(256))}


@pytest.fixture
def fake() -> FakeDriver:
    return FakeDriver(initialization=True, last_known_state="lks-0")


@pytest.fixture
def server(fake: FakeDriver) -> Iterator[DriverServer]:
    with serve(fake, "127.0.0.1:0") as srv:
        yield srv


@pytest.fixture
def client(server: DriverServer) -> Iterator[GrpcDriver]:
    with GrpcDriver(server.endpoint, timeout=10.0) as drv:
        yield drv


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path (unix socket paths are limited to ~107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="mcm-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def machine(name: str = "m1", provider_id: str | None = None) -> Machine:
    m = Machine.from_dict(
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "shoot--a", "labels": {"node": "n"}},
            "spec": {"class": {"kind": "MachineClass", "name": "small"}, "futureField": {"x": [1]}},
            "status": {"lastKnownState": "s"},
        }
    )
    m.spec.provider_id = provider_id
    return m


def ctx(seconds: float = 10.0) -> CallContext:
    return CallContext.with_timeout(seconds)


def test_every_rpc_round_trips(fake: FakeDriver, client: GrpcDriver) -> None:
    address = NodeAddress(type="InternalIP", address="10.1.2.3")
    created = client.create_machine(ctx(), CreateMachineRequest(machine(), CLASS, SECRET))
    assert created == CreateMachineResponse("fake:///m1", "m1", last_known_state="lks-0")
    with pytest.raises(MachineError) as raised:
        client.get_machine_status(ctx(), GetMachineStatusRequest(machine(), CLASS, SECRET))
    assert raised.value.code == Code.Uninitialized
    initialized = client.initialize_machine(ctx(), InitializeMachineRequest(machine(), CLASS, SECRET))
    assert (initialized.provider_id, initialized.node_name) == ("fake:///m1", "m1")
    fake.script("get_machine_status", GetMachineStatusResponse("fake:///m1", "m1", (address,)))
    status = client.get_machine_status(ctx(), GetMachineStatusRequest(machine(), CLASS, SECRET))
    assert status == GetMachineStatusResponse("fake:///m1", "m1", (address,))
    listed = client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    assert dict(listed.machine_list) == {"fake:///m1": "m1"}
    specs = [{"csi": {"driver": "d", "volumeHandle": "vol-1"}}, {"nfs": {"server": "s"}}]
    assert client.get_volume_ids(ctx(), GetVolumeIDsRequest(specs)).volume_ids == ("vol-1",)
    deleted = client.delete_machine(ctx(), DeleteMachineRequest(machine("m1", "fake:///m1"), CLASS, SECRET))
    assert deleted == DeleteMachineResponse("lks-0")
    assert fake.vms == {}


def test_requests_arrive_intact(fake: FakeDriver, client: GrpcDriver) -> None:
    sent = machine("m1", "fake:///m1")
    client.delete_machine(ctx(), DeleteMachineRequest(sent, CLASS, SECRET))
    specs = [{"csi": {"volumeHandle": "v", "volumeAttributes": {"k": "ü"}}}]
    client.get_volume_ids(ctx(), GetVolumeIDsRequest(specs))
    delete_request, volumes_request = (call.request for call in fake.calls)
    assert isinstance(delete_request, DeleteMachineRequest)
    assert delete_request.machine.to_dict() == sent.to_dict()
    assert delete_request.machine_class.to_dict() == CLASS.to_dict()
    assert dict(delete_request.secret_data) == SECRET
    assert isinstance(volumes_request, GetVolumeIDsRequest)
    assert list(volumes_request.pv_specs) == specs


@pytest.mark.parametrize("code", list(Code))
def test_every_code_reaches_the_client(fake: FakeDriver, client: GrpcDriver, code: Code) -> None:
    fake.always("create_machine", MachineError(code, f"scripted {code.name}", last_known_state="half"))
    with pytest.raises(MachineError) as raised:
        client.create_machine(ctx(), CreateMachineRequest(machine(), CLASS, SECRET))
    assert (raised.value.code, raised.value.message, raised.value.last_known_state) == (
        code,
        f"scripted {code.name}",
        "half",
    )


def test_driver_exception_without_code_is_undecodable_at_the_client(
    fake: FakeDriver, client: GrpcDriver
) -> None:
    fake.always("list_machines", KeyError("region"))
    with pytest.raises(UndecodableDriverError, match="region"):
        client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))


def test_undecodable_request_is_invalid_argument_and_skips_the_driver(
    fake: FakeDriver, server: DriverServer
) -> None:
    with grpc.insecure_channel(server.endpoint) as channel:
        call = channel.unary_unary(
            CREATE_MACHINE.path,
            request_serializer=pb.CreateMachineRequest.SerializeToString,
            response_deserializer=pb.CreateMachineResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as raised:
            call(pb.CreateMachineRequest(machine_json=b"{not json", machine_class_json=b"[]"), timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "machine_json is not valid JSON" in (raised.value.details() or "")
    assert fake.calls == []


def blocking_until_cancelled(
    seen: list[CallContext], done: threading.Event
) -> Callable[[CallContext, DriverRequest], DriverResponse]:
    def answer(call_ctx: CallContext, request: DriverRequest) -> DriverResponse:
        seen.append(call_ctx)
        call_ctx.cancelled.wait(10)
        done.set()
        raise MachineError(Code.Internal, "should never reach the client")

    return answer


def test_client_timeout_cuts_a_hanging_call_and_cancels_the_driver(
    fake: FakeDriver, server: DriverServer
) -> None:
    seen: list[CallContext] = []
    done = threading.Event()
    fake.always("get_machine_status", blocking_until_cancelled(seen, done))
    with GrpcDriver(server.endpoint, timeout=0.5) as short:
        start = time.monotonic()
        with pytest.raises(MachineError) as raised:
            short.get_machine_status(CallContext.background(), GetMachineStatusRequest(machine(), CLASS, {}))
    assert raised.value.code == Code.DeadlineExceeded
    assert time.monotonic() - start < 5
    assert "GetMachineStatus" in raised.value.message
    assert done.wait(5), "the driver's context was not cancelled when the deadline passed"
    assert seen[0].deadline is not None


def test_context_deadline_is_shorter_than_client_timeout(fake: FakeDriver, client: GrpcDriver) -> None:
    remaining: list[float | None] = []

    def answer(call_ctx: CallContext, request: DriverRequest) -> DriverResponse:
        remaining.append(call_ctx.remaining())
        return GetMachineStatusResponse("p", "n")

    fake.always("get_machine_status", answer)
    client.get_machine_status(ctx(2.0), GetMachineStatusRequest(machine(), CLASS, {}))
    (left,) = remaining
    assert left is not None
    assert 0 < left <= 2.1  # the 2 s context, not the 10 s client timeout (gRPC rounds up a little)


def test_expired_or_cancelled_context_fails_without_a_call(fake: FakeDriver, client: GrpcDriver) -> None:
    with pytest.raises(MachineError) as raised:
        client.list_machines(CallContext.with_timeout(0.0), ListMachinesRequest(CLASS, {}))
    assert raised.value.code == Code.DeadlineExceeded
    cancelled = CallContext.background()
    cancelled.cancel()
    with pytest.raises(MachineError) as raised:
        client.list_machines(cancelled, ListMachinesRequest(CLASS, {}))
    assert raised.value.code == Code.Canceled
    assert fake.calls == []


def test_unix_socket_endpoint_and_restart_on_the_same_path(short_dir: Path) -> None:
    endpoint = f"unix:{short_dir / 'driver.sock'}"
    for _ in range(2):  # the second serve replaces the socket file the first one left
        with serve(FakeDriver(), endpoint) as srv, GrpcDriver(srv.endpoint, timeout=10) as drv:
            assert srv.endpoint == endpoint
            assert drv.list_machines(ctx(), ListMachinesRequest(CLASS, {})).machine_list == {}


def test_missing_sidecar_is_unavailable_at_once(short_dir: Path) -> None:
    endpoint = f"unix:{short_dir / 'nobody.sock'}"
    with GrpcDriver(endpoint, timeout=30) as drv:
        assert not drv.wait_ready(0.1)
        start = time.monotonic()
        with pytest.raises(MachineError) as raised:
            drv.list_machines(ctx(), ListMachinesRequest(CLASS, {}))
    assert time.monotonic() - start < 5
    assert raised.value.code == Code.Unavailable
    assert endpoint in raised.value.message


def test_stopped_server_is_unavailable_then_recovers_when_back(short_dir: Path) -> None:
    endpoint = f"unix:{short_dir / 'driver.sock'}"
    with GrpcDriver(endpoint, timeout=10) as drv:
        with serve(FakeDriver(), endpoint):
            assert drv.wait_ready(5)
            drv.list_machines(ctx(), ListMachinesRequest(CLASS, {}))
        with pytest.raises(MachineError) as raised:
            drv.list_machines(ctx(), ListMachinesRequest(CLASS, {}))
        assert raised.value.code == Code.Unavailable
        with serve(FakeDriver(), endpoint):
            assert drv.wait_ready(10), "the client did not reconnect to the restarted sidecar"
            drv.list_machines(ctx(), ListMachinesRequest(CLASS, {}))


def test_closed_client_is_unavailable(server: DriverServer) -> None:
    drv = GrpcDriver(server.endpoint, timeout=10)
    drv.close()
    with pytest.raises(MachineError) as raised:
        drv.list_machines(ctx(), ListMachinesRequest(CLASS, {}))
    assert raised.value.code == Code.Unavailable


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout"):
        GrpcDriver("127.0.0.1:1", timeout=0)


def test_server_logs_never_contain_secret_data(fake: FakeDriver, client: GrpcDriver) -> None:
    secret = {"userData": b"bootstrap-token-abcdef.0123456789abcdef"}
    fake.always("create_machine", RuntimeError("driver crashed"))
    fake.always("delete_machine", MachineError(Code.Internal, "failed"))
    with capture_logs() as logs:
        with pytest.raises(UndecodableDriverError):
            client.create_machine(ctx(), CreateMachineRequest(machine(), CLASS, secret))
        with pytest.raises(MachineError):
            client.delete_machine(ctx(), DeleteMachineRequest(machine(), CLASS, secret))
    assert {entry["event"] for entry in logs} >= {"driver_call_raised", "driver_call_failed"}
    assert "bootstrap-token" not in repr(logs)


def test_sidecar_without_a_method_answers_unimplemented() -> None:
    old = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    old.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, {}),))
    port = old.add_insecure_port("127.0.0.1:0")
    old.start()
    try:
        with GrpcDriver(f"127.0.0.1:{port}", timeout=10) as drv:
            with pytest.raises(MachineError) as raised:
                drv.initialize_machine(ctx(), InitializeMachineRequest(machine(), CLASS, SECRET))
        assert raised.value.code == Code.Unimplemented
    finally:
        old.stop(None).wait()


def test_client_keepalive_pings_are_within_what_the_server_accepts() -> None:
    client_opts, server_opts = dict(CHANNEL_OPTIONS), dict(SERVER_OPTIONS)
    assert client_opts["grpc.keepalive_permit_without_calls"] == 1
    assert server_opts["grpc.keepalive_permit_without_calls"] == 1
    assert (
        client_opts["grpc.keepalive_time_ms"] >= server_opts["grpc.http2.min_ping_interval_without_data_ms"]
    )


@pytest.mark.parametrize("size", [20_000, 200_000, 3_000_000])
def test_huge_errors_still_arrive_with_their_code(fake: FakeDriver, client: GrpcDriver, size: int) -> None:
    fake.always("list_machines", MachineError(Code.Internal, "x" * size, last_known_state="s" * size))
    # The scrubber reads a message only as far as its cut: the 3 MB error costs what its first
    # 4 KiB cost (tens of ms), so the usual 10 s deadline holds on a loaded machine.
    with pytest.raises(MachineError) as raised:
        client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    error = raised.value
    assert error.code == Code.Internal
    assert error.message.startswith("x" * 1000)
    if size <= MAX_LAST_KNOWN_STATE:
        assert error.last_known_state == "s" * size
    else:
        assert error.last_known_state == ""
        assert "last known state of 3000000 bytes not sent" in error.message
    if size > MAX_DETAILS:
        assert "more characters cut" in error.message

"""The sidecar boundary under hostile conditions: secrets in errors, bad input, overload, cancel, exposure."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from structlog.testing import capture_logs

from mcm.driver import (
    MAX_MESSAGE,
    CallContext,
    Code,
    CreateMachineRequest,
    FakeDriver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    ListMachinesRequest,
    MachineError,
)
from mcm.driver.fake import DriverRequest, DriverResponse
from mcm.driver.grpc import DriverServer, GrpcDriver, InsecureEndpointError, UndecodableDriverError, serve
from mcm.driver.grpc.__main__ import main as sidecar_main
from mcm.driver.grpc.__main__ import parse_args, server_credentials
from mcm.driver.grpc.rpcs import CREATE_MACHINE, GET_VOLUME_IDS, LIST_MACHINES, SERVICE_NAME
from mcm.driver.grpc.server import is_local_endpoint
from mcm.driver.grpc.status import MACHINE_CODE_KEY
from mcm.driver.proto.mcm.driver.v1 import driver_pb2 as pb
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

TOKEN = "bootstrap-token-abcdef.0123456789abcdef"
CREDENTIAL = "AKIAEXAMPLESECRETKEY0123"
SECRET = {"userData": f"#!/bin/sh\njoin --token {TOKEN}\n".encode(), "accessKey": CREDENTIAL.encode()}
CLASS = sample_machine_class("small")


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


def ctx() -> CallContext:
    return CallContext.with_timeout(10.0)


def raw_call(endpoint: str, path: str, payload: bytes) -> grpc.RpcError:
    """Send ``payload`` as-is to ``path`` and return the error the server answers with."""
    with grpc.insecure_channel(endpoint) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
        with pytest.raises(grpc.RpcError) as raised:
            call(payload, timeout=10)
    return raised.value


# --- secrets never leave the process ---------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        MachineError(Code.PermissionDenied, f"key {CREDENTIAL} rejected; userData had {TOKEN}"),
        RuntimeError(f"boom with {CREDENTIAL}"),
    ],
    ids=["machine-error", "plain-exception"],
)
def test_secret_values_are_scrubbed_from_status_and_server_logs(
    fake: FakeDriver, client: GrpcDriver, failure: Exception
) -> None:
    fake.always("create_machine", failure)
    with capture_logs() as logs, pytest.raises((MachineError, UndecodableDriverError)) as raised:
        client.create_machine(ctx(), CreateMachineRequest(sample_machine("m1", "small"), CLASS, SECRET))
    text = str(raised.value) + repr(logs)
    assert CREDENTIAL not in text
    assert TOKEN not in text
    assert "[redacted]" in str(raised.value)
    assert any("[redacted]" in str(entry.get("message")) for entry in logs)


def test_client_scrubs_what_a_foreign_sidecar_sends(tmp_path: Path) -> None:
    """A sidecar in another language may echo the secret; the client never passes it on."""

    def leak(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_trailing_metadata(((MACHINE_CODE_KEY, "7"),))
        context.abort(grpc.StatusCode.PERMISSION_DENIED, f"denied for {CREDENTIAL} " + "x" * 20_000)

    foreign = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(leak)
    foreign.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE_NAME, {"ListMachines": handler}),)
    )
    port = foreign.add_insecure_port("127.0.0.1:0")
    foreign.start()
    try:
        with GrpcDriver(f"127.0.0.1:{port}", timeout=10) as drv, pytest.raises(MachineError) as raised:
            drv.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    finally:
        foreign.stop(None).wait()
    assert raised.value.code == Code.PermissionDenied
    assert raised.value.message.startswith("denied for [redacted] xxx")
    assert len(raised.value.message) < 2 * MAX_MESSAGE + 100


def test_status_details_are_capped(fake: FakeDriver, client: GrpcDriver) -> None:
    fake.always("list_machines", MachineError(Code.Internal, "y" * 20_000))
    with pytest.raises(MachineError) as raised:
        client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    assert raised.value.message == "y" * MAX_MESSAGE + "... (15904 more characters cut)"


# --- bad input gets a clear answer -----------------------------------------------------------


def test_deeply_nested_json_is_invalid_argument(fake: FakeDriver, server: DriverServer) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    request = pb.CreateMachineRequest(machine_json=deep, machine_class_json=b"{}")
    error = raw_call(server.endpoint, CREATE_MACHINE.path, request.SerializeToString())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "machine_json is nested too deeply" in (error.details() or "")
    nested_object = ('{"a":' * 100_000 + "1" + "}" * 100_000).encode()
    volumes = pb.GetVolumeIDsRequest(pv_specs_json=[nested_object])
    error = raw_call(server.endpoint, GET_VOLUME_IDS.path, volumes.SerializeToString())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fake.calls == []


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xff\xff\xff",
        b"\x0a\x05ab",
        pb.ListMachinesRequest(machine_class_json=b"\xc3(").SerializeToString(),
    ],
    ids=["garbage", "truncated", "not-utf8-json"],
)
def test_undecodable_requests_are_invalid_argument(
    fake: FakeDriver, server: DriverServer, payload: bytes
) -> None:
    error = raw_call(server.endpoint, LIST_MACHINES.path, payload)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fake.calls == []


def test_decoding_errors_through_the_client_carry_the_machine_code(
    fake: FakeDriver, server: DriverServer
) -> None:
    with grpc.insecure_channel(server.endpoint) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(LIST_MACHINES.path)
        with pytest.raises(grpc.RpcError) as raised:
            call(
                pb.ListMachinesRequest(machine_class_json=json.dumps([1]).encode()).SerializeToString(),
                timeout=10,
            )
    error: Any = raised.value
    trailers = {key: value for key, value in error.trailing_metadata() or ()}
    assert trailers[MACHINE_CODE_KEY] == str(int(Code.InvalidArgument))


# --- no wait without a bound -----------------------------------------------------------------


def test_overload_is_resource_exhausted_not_a_backlog(fake: FakeDriver) -> None:
    started, release = threading.Event(), threading.Event()

    def blocker(call_ctx: CallContext, request: DriverRequest) -> DriverResponse:
        started.set()
        release.wait(10)
        return GetMachineStatusResponse("p", "n")

    fake.always("get_machine_status", blocker)
    request = GetMachineStatusRequest(sample_machine("m1", "small"), CLASS, {})
    with serve(fake, "127.0.0.1:0", max_workers=1, max_queued=0) as srv, GrpcDriver(srv.endpoint, 10) as drv:
        with futures.ThreadPoolExecutor(max_workers=1) as pool:
            first = pool.submit(drv.get_machine_status, ctx(), request)
            assert started.wait(10)
            start = time.monotonic()
            with pytest.raises(MachineError) as raised:
                drv.get_machine_status(ctx(), request)
            assert time.monotonic() - start < 5
            release.set()
            assert first.result(10).provider_id == "p"
    assert raised.value.code == Code.ResourceExhausted


def test_serve_rejects_nonsense_limits(fake: FakeDriver) -> None:
    with pytest.raises(ValueError, match="max_workers"):
        serve(fake, "127.0.0.1:0", max_workers=0)


def test_cancelling_the_context_cancels_the_call_in_flight(fake: FakeDriver, client: GrpcDriver) -> None:
    started, driver_cancelled = threading.Event(), threading.Event()

    def wait_for_cancel(call_ctx: CallContext, request: DriverRequest) -> DriverResponse:
        started.set()
        if call_ctx.cancelled.wait(10):
            driver_cancelled.set()
        return GetMachineStatusResponse("p", "n")

    fake.always("get_machine_status", wait_for_cancel)
    call_ctx = CallContext.background()
    with futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(
            client.get_machine_status,
            call_ctx,
            GetMachineStatusRequest(sample_machine("m1", "small"), CLASS, {}),
        )
        assert started.wait(10)
        call_ctx.cancel()
        with pytest.raises(MachineError) as raised:
            pending.result(5)
    assert raised.value.code == Code.Canceled
    assert driver_cancelled.wait(5), "the sidecar's driver never saw the cancellation"


def test_on_cancel_runs_once_and_can_be_unregistered() -> None:
    call_ctx = CallContext.background()
    ran: list[str] = []
    call_ctx.on_cancel(lambda: ran.append("a"))
    forget = call_ctx.on_cancel(lambda: ran.append("b"))
    forget()
    call_ctx.cancel()
    call_ctx.cancel()
    call_ctx.on_cancel(lambda: ran.append("late"))
    assert ran == ["a", "late"]


# --- plaintext only where nobody else listens -----------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("unix:/run/mcm/driver.sock", True),
        ("127.0.0.1:50051", True),
        ("127.9.9.9:1", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        (":50051", False),
        ("10.0.0.5:50051", False),
        ("driver.example:50051", False),
    ],
)
def test_local_endpoints(endpoint: str, local: bool) -> None:
    assert is_local_endpoint(endpoint) is local


def test_plaintext_on_all_interfaces_needs_an_explicit_opt_in(fake: FakeDriver) -> None:
    with pytest.raises(InsecureEndpointError, match="TLS"):
        serve(fake, "0.0.0.0:0")
    with capture_logs() as logs, serve(fake, "0.0.0.0:0", insecure=True) as srv:
        port = srv.endpoint.rsplit(":", 1)[1]
        with GrpcDriver(f"127.0.0.1:{port}", timeout=10) as drv:
            assert drv.list_machines(ctx(), ListMachinesRequest(CLASS, {})).machine_list == {}
    warnings = [entry for entry in logs if entry["event"] == "driver_server_insecure"]
    assert warnings and warnings[0]["log_level"] == "warning"
    started = [entry for entry in logs if entry["event"] == "driver_server_started"]
    assert started[0]["transport"] == "insecure"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a certificate")
def test_tls_on_all_interfaces(fake: FakeDriver, tmp_path: Path) -> None:
    from mcm.emulator.kubeconfig import make_tls_material

    tls = make_tls_material(tmp_path)
    credentials = grpc.ssl_server_credentials([(tls.server_key.read_bytes(), tls.server_cert.read_bytes())])
    with capture_logs() as logs, serve(fake, "0.0.0.0:0", credentials=credentials, any_client=True) as srv:
        port = srv.endpoint.rsplit(":", 1)[1]
        channel_credentials = grpc.ssl_channel_credentials(root_certificates=tls.ca_pem())
        with GrpcDriver(f"127.0.0.1:{port}", timeout=10, credentials=channel_credentials) as drv:
            assert drv.list_machines(ctx(), ListMachinesRequest(CLASS, {})).machine_list == {}
        with GrpcDriver(f"127.0.0.1:{port}", timeout=3) as plaintext, pytest.raises(MachineError) as raised:
            plaintext.list_machines(ctx(), ListMachinesRequest(CLASS, {}))
    assert raised.value.code == Code.Unavailable
    started = [entry for entry in logs if entry["event"] == "driver_server_started"]
    assert started[0]["transport"] == "tls"


def test_sidecar_cli_refuses_plaintext_on_all_interfaces(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = sidecar_main(["--driver", "mcm.driver:FakeDriver", "--endpoint", "0.0.0.0:0"])
    finally:
        structlog.reset_defaults()
    assert code == 2
    assert "--insecure" in capsys.readouterr().err


def test_sidecar_cli_tls_flags_go_together(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(ValueError, match="go together"):
        server_credentials(parse_args(["--driver", "m:f", "--tls-cert-file", str(cert)]))
    with pytest.raises(ValueError, match="needs --tls-cert-file"):
        server_credentials(parse_args(["--driver", "m:f", "--tls-client-ca-file", str(cert)]))
    assert server_credentials(parse_args(["--driver", "m:f"])) is None

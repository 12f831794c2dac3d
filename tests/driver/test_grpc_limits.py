"""Issue 36 #10: the sidecar's message cap, its budget of request bytes in flight, its memory
under a flood of large requests, and TLS off loopback without a client CA."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from structlog.testing import capture_logs

from mcm.apis.machine.v1alpha1 import Machine
from mcm.driver import (
    CallContext,
    Code,
    FakeDriver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    ListMachinesRequest,
    ListMachinesResponse,
    MachineError,
)
from mcm.driver.fake import DriverRequest, DriverResponse
from mcm.driver.grpc import GrpcDriver, InsecureEndpointError, serve
from mcm.driver.grpc.limits import MAX_MESSAGE_BYTES, ByteBudget, MiB
from mcm.driver.grpc.rpcs import GET_MACHINE_STATUS
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

REPO = Path(__file__).resolve().parents[2]
CLASS = sample_machine_class("small")
CHART_VALUES = yaml.safe_load((REPO / "charts" / "machine-controller" / "values.yaml").read_text())
CHART_MEMORY_LIMIT = (
    int(CHART_VALUES["driver"]["sidecar"]["resources"]["limits"]["memory"].removesuffix("Mi")) * MiB
)
"""The chart's memory limit of the sidecar container (values.yaml, in Mi)."""
SIDECAR_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2"}
"""What the chart sets in the sidecar container's environment besides the provider's settings
(``tests/app/test_chart.py`` checks the chart says so)."""


def ctx() -> CallContext:
    return CallContext.with_timeout(20)


def status_request(name: str, size: int) -> GetMachineStatusRequest:
    """A request of about ``size`` bytes, carried by an annotation of the Machine (not by its
    secret data, which every error message would then be scrubbed of, at great cost)."""
    machine = Machine.from_dict(
        {
            **sample_machine(name, "small").to_dict(),
            "metadata": {"name": name, "namespace": "default", "annotations": {"bulk": "x" * size}},
        }
    )
    return GetMachineStatusRequest(machine, CLASS, {"userData": b"#!/bin/sh"})


def raw_call(endpoint: str, payload: bytes, timeout: float = 20) -> grpc.StatusCode:
    """Send ``payload`` as a GetMachineStatus request from a client without a send cap."""
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(endpoint, options=options) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(GET_MACHINE_STATUS.path)
        try:
            call(payload, timeout=timeout)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def encoded(request: GetMachineStatusRequest) -> bytes:
    return bytes(GET_MACHINE_STATUS.encode_request(request).SerializeToString())


def test_the_cap_is_a_few_mib_and_holds_two_full_secrets() -> None:
    assert 2 * MiB < MAX_MESSAGE_BYTES <= 8 * MiB


def test_a_request_over_the_cap_is_refused_before_the_driver_sees_it() -> None:
    fake = FakeDriver()
    fake.always("get_machine_status", GetMachineStatusResponse("fake:///fits", "fits"))
    with serve(fake, "127.0.0.1:0") as server:
        assert raw_call(server.endpoint, encoded(status_request("big", 5 * MiB))) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED
        )
        assert fake.calls_to("get_machine_status") == []
        assert raw_call(server.endpoint, encoded(status_request("fits", 3 * MiB))) == grpc.StatusCode.OK
        assert len(fake.calls_to("get_machine_status")) == 1


def test_the_client_neither_sends_nor_reads_a_message_over_the_cap() -> None:
    fake = FakeDriver()
    huge = {f"fake:///vm-{n:07d}-{'p' * 80}": f"machine-{n}" for n in range(50_000)}  # > 4 MiB
    fake.always("list_machines", ListMachinesResponse(huge))
    with serve(fake, "127.0.0.1:0") as server, GrpcDriver(server.endpoint, timeout=20) as client:
        with pytest.raises(MachineError) as sending:
            client.get_machine_status(ctx(), status_request("big", 5 * MiB))
        assert sending.value.code == Code.ResourceExhausted
        assert fake.calls_to("get_machine_status") == []
        with pytest.raises(MachineError) as reading:
            client.list_machines(ctx(), ListMachinesRequest(CLASS, {}))
        assert reading.value.code == Code.ResourceExhausted


def test_the_byte_budget_refuses_what_does_not_fit_and_never_less_than_one_message() -> None:
    budget = ByteBudget(MAX_MESSAGE_BYTES)
    assert budget.try_take(3 * MiB)
    assert not budget.try_take(2 * MiB)
    assert budget.try_take(1000)
    budget.release(3 * MiB)
    assert budget.try_take(2 * MiB)
    with pytest.raises(ValueError, match="hold one message"):
        ByteBudget(MAX_MESSAGE_BYTES - 1)


def test_large_requests_beyond_the_budget_are_refused_while_small_ones_still_run() -> None:
    fake = FakeDriver()
    entered, release = threading.Event(), threading.Event()

    def held(call_ctx: CallContext, request: DriverRequest) -> DriverResponse:
        entered.set()
        release.wait(20)
        return GetMachineStatusResponse("fake:///held", "held")

    fake.always("get_machine_status", held, machine="held")
    with serve(fake, "127.0.0.1:0", max_inflight_bytes=MAX_MESSAGE_BYTES) as server:
        with GrpcDriver(server.endpoint, timeout=20) as client:
            first = threading.Thread(
                target=client.get_machine_status, args=(ctx(), status_request("held", 3 * MiB)), daemon=True
            )
            first.start()
            assert entered.wait(20)
            with pytest.raises(MachineError) as refused:
                client.get_machine_status(ctx(), status_request("second", 3 * MiB))
            assert refused.value.code == Code.ResourceExhausted and "retry later" in refused.value.message
            with pytest.raises(MachineError) as small:
                client.get_machine_status(ctx(), status_request("small", 100))
            assert small.value.code == Code.NotFound  # admitted: the fake has no such VM
            release.set()
            first.join(20)
    assert [c.machine for c in fake.calls_to("get_machine_status")] == ["held", "small"]


# --- memory of a sidecar process under a flood ---------------------------------------------------


def _memory(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1)) * 1024 for k in ("VmRSS", "VmHWM")}  # type: ignore[union-attr]


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    command = [
        sys.executable,
        "-m",
        "mcm.driver.grpc",
        "--driver",
        "tests.driver.sidecar_process:scripted_driver",
    ]
    with (tmp_path / "sidecar.log").open("w") as log:
        process = subprocess.Popen(
            [*command, "--endpoint", "127.0.0.1:0", "--grace", "1"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, **SIDECAR_ENVIRONMENT},
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("serving "), line
            yield process, line.split(" ", 1)[1]
        finally:
            process.kill()
            process.wait(10)


def _flood(endpoint: str, payload: bytes, count: int, timeout: float) -> Counter[str]:
    codes: Counter[str] = Counter()
    lock = threading.Lock()

    def one() -> None:
        code = raw_call(endpoint, payload, timeout)
        with lock:
            codes[code.name] += 1

    threads = [threading.Thread(target=one, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 30)
    return codes


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the sidecar's memory from /proc")
def test_a_flood_of_large_requests_stays_within_the_charts_memory_limit(
    sidecar: tuple[subprocess.Popen[str], str],
) -> None:
    """Twelve requests of 60 MiB took the sidecar to 2.6 GiB; now they are refused unread, and
    a flood of maximal requests that the driver holds (machine ``hang`` waits for cancellation)
    is bounded by the worker, queue and byte limits."""
    process, endpoint = sidecar
    oversized = encoded(status_request("hang", 20 * MiB))
    assert _flood(endpoint, oversized, 4, timeout=20) == Counter({"RESOURCE_EXHAUSTED": 4})
    maximal = encoded(status_request("hang", MAX_MESSAGE_BYTES - 64 * 1024))
    codes = _flood(endpoint, maximal, 40, timeout=6)
    assert codes["RESOURCE_EXHAUSTED"] > 0 and codes["DEADLINE_EXCEEDED"] > 0, codes
    peak = _memory(process.pid)["VmHWM"]
    assert peak < CHART_MEMORY_LIMIT * 0.9, f"the sidecar peaked at {peak / MiB:.0f} MiB"


# --- TLS off loopback -----------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a certificate")
def test_tls_off_loopback_without_a_client_ca_is_refused_unless_any_client_is_allowed(tmp_path: Path) -> None:
    from mcm.emulator.kubeconfig import make_tls_material

    material = make_tls_material(tmp_path)
    pair = [(material.server_key.read_bytes(), material.server_cert.read_bytes())]
    fake = FakeDriver()
    with pytest.raises(InsecureEndpointError, match="--tls-client-ca-file"):
        serve(fake, "0.0.0.0:0", credentials=grpc.ssl_server_credentials(pair))
    with (
        capture_logs() as logs,
        serve(fake, "0.0.0.0:0", credentials=grpc.ssl_server_credentials(pair), any_client=True),
    ):
        pass
    warnings = [e for e in logs if e["event"] == "driver_server_accepts_any_client"]
    assert warnings and warnings[0]["log_level"] == "warning"
    verified = grpc.ssl_server_credentials(pair, material.ca_pem(), require_client_auth=True)
    with capture_logs() as logs, serve(fake, "0.0.0.0:0", credentials=verified, verifies_clients=True):
        pass
    assert not [e for e in logs if e["event"] == "driver_server_accepts_any_client"]
    with serve(fake, "127.0.0.1:0", credentials=grpc.ssl_server_credentials(pair)):
        pass  # on loopback nobody else can reach it


def test_the_sidecar_command_refuses_tls_off_loopback_without_a_client_ca(tmp_path: Path) -> None:
    cert = tmp_path / "x.pem"
    cert.write_text("not read: the rule is checked first")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcm.driver.grpc",
            "--driver",
            "mcm.driver:FakeDriver",
            "--endpoint",
            "0.0.0.0:0",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(cert),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--tls-client-ca-file" in result.stderr and "--tls-any-client" in result.stderr

"""End to end: GrpcDriver against a FakeDriver sidecar process (``python -m mcm.driver.grpc``)."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcm.apis.machine.v1alpha1 import Machine
from mcm.driver import (
    CallContext,
    Code,
    CreateMachineRequest,
    DeleteMachineRequest,
    GetMachineStatusRequest,
    GetVolumeIDsRequest,
    InitializeMachineRequest,
    ListMachinesRequest,
    MachineError,
    status_from_error,
)
from mcm.driver.grpc import GrpcDriver, UndecodableDriverError
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

REPO = Path(__file__).resolve().parents[2]
SIDECAR = [
    sys.executable,
    "-m",
    "mcm.driver.grpc",
    "--driver",
    "tests.driver.sidecar_process:scripted_driver",
]
CLASS = sample_machine_class("small")
SECRET = {"userData": b"#!/bin/sh"}


@dataclass
class Sidecar:
    process: subprocess.Popen[str]
    endpoint: str
    lines: queue.Queue[str]

    def expect(self, text: str, timeout: float = 20) -> str:
        """Wait (bounded) for a stdout line starting with ``text``."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if line.startswith(text):
                return line

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


def _pump(stream: object, lines: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line.strip())


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Sidecar]:
    with (tmp_path / "sidecar.log").open("w") as log:
        process = subprocess.Popen(
            [*SIDECAR, "--endpoint", "127.0.0.1:0", "--grace", "1"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
        side = Sidecar(process, "", lines)
        try:
            side.endpoint = side.expect("serving ").split(" ", 1)[1]
            yield side
        finally:
            if process.poll() is None:
                side.kill()


@pytest.fixture
def client(sidecar: Sidecar) -> Iterator[GrpcDriver]:
    with GrpcDriver(sidecar.endpoint, timeout=20) as drv:
        yield drv


def ctx() -> CallContext:
    return CallContext.with_timeout(20)


def machine(name: str, provider_id: str | None = None) -> Machine:
    m = sample_machine(name, "small")
    m.spec.provider_id = provider_id
    return m


def status_error(client: GrpcDriver, name: str) -> Exception:
    with pytest.raises(Exception) as raised:
        client.get_machine_status(ctx(), GetMachineStatusRequest(machine(name), CLASS, SECRET))
    return raised.value


def test_every_rpc_against_a_sidecar_process(client: GrpcDriver) -> None:
    created = client.create_machine(ctx(), CreateMachineRequest(machine("m1"), CLASS, SECRET))
    assert (created.provider_id, created.node_name) == ("fake:///m1", "m1")
    known = machine("m1", created.provider_id)
    error = status_error(client, "m1")
    assert isinstance(error, MachineError)
    assert error.code == Code.Uninitialized
    client.initialize_machine(ctx(), InitializeMachineRequest(known, CLASS, SECRET))
    assert client.get_machine_status(ctx(), GetMachineStatusRequest(known, CLASS, SECRET)).node_name == "m1"
    assert dict(client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET)).machine_list) == {
        "fake:///m1": "m1"
    }
    volumes = client.get_volume_ids(ctx(), GetVolumeIDsRequest([{"csi": {"volumeHandle": "vol-9"}}]))
    assert volumes.volume_ids == ("vol-9",)
    client.delete_machine(ctx(), DeleteMachineRequest(known, CLASS, SECRET))
    error = status_error(client, "m1")
    assert isinstance(error, MachineError)
    assert error.code == Code.NotFound


def test_every_code_from_a_sidecar_process(client: GrpcDriver) -> None:
    for code in Code:
        error = status_error(client, f"code-{int(code)}")
        assert isinstance(error, MachineError), code
        assert (error.code, error.message, error.last_known_state) == (
            code,
            f"scripted {code.name}",
            f"state-{int(code)}",
        )
    broken = status_error(client, "broken")
    assert isinstance(broken, UndecodableDriverError)
    assert status_from_error(broken)[1] is False


def test_killed_sidecar_is_unavailable_quickly(sidecar: Sidecar, client: GrpcDriver) -> None:
    client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    sidecar.kill()
    start = time.monotonic()
    with pytest.raises(MachineError) as raised:
        client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    assert raised.value.code == Code.Unavailable
    assert sidecar.endpoint in raised.value.message
    assert time.monotonic() - start < 5


def test_sidecar_killed_during_a_call_fails_the_call_quickly(sidecar: Sidecar, client: GrpcDriver) -> None:
    outcome: queue.Queue[BaseException | None] = queue.Queue()

    def call() -> None:
        try:
            client.get_machine_status(ctx(), GetMachineStatusRequest(machine("hang"), CLASS, SECRET))
            outcome.put(None)
        except BaseException as exc:
            outcome.put(exc)

    threading.Thread(target=call, daemon=True).start()
    sidecar.expect("HANG")
    start = time.monotonic()
    sidecar.kill()
    error = outcome.get(timeout=10)
    assert isinstance(error, MachineError)
    assert error.code == Code.Unavailable
    assert time.monotonic() - start < 5


def test_sigterm_stops_the_sidecar_cleanly(sidecar: Sidecar, client: GrpcDriver) -> None:
    client.list_machines(ctx(), ListMachinesRequest(CLASS, SECRET))
    sidecar.process.terminate()
    assert sidecar.process.wait(timeout=10) == 0


def test_bad_driver_spec_exits_with_a_clear_error() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcm.driver.grpc",
            "--driver",
            "mcm.driver:CallContext",
            "--endpoint",
            "127.0.0.1:0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "not a mcm.driver.Driver" in result.stderr

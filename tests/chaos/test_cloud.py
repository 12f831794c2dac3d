"""The chaos cloud driver's injected errors: which codes which call may fail with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import Machine, MachineClass
from mcm.driver import CallContext, Code, MachineError
from mcm.driver.driver import CreateMachineRequest, DeleteMachineRequest, GetMachineStatusRequest
from mcm.testing.chaos.cloud import ChaosDriver, DriverFaults


class _NoCloud:
    """The driver's cloud client; a failure injected before the call never reaches it."""

    def resource(self, name: str) -> Any:
        return self


def _driver(tmp_path: Path, faults: DriverFaults) -> ChaosDriver:
    path = tmp_path / "faults.json"
    path.write_text(faults.to_json(), encoding="utf-8")
    return ChaosDriver(_NoCloud(), faults_file=str(path), seed=7)  # type: ignore[arg-type]


def _codes(call: Any, times: int = 60) -> set[Code]:
    codes = set()
    for _ in range(times):
        with pytest.raises(MachineError) as caught:
            call()
        codes.add(caught.value.code)
    return codes


def test_resource_exhausted_fails_only_creates(tmp_path: Path) -> None:
    """After a create, ResourceExhausted is retried after --resource-exhausted-retry; after any
    other call only after the 10-minute long retry, longer than every scenario's bound."""
    driver = _driver(
        tmp_path,
        DriverFaults(
            error_rate=1.0,
            error_codes=("Unavailable",),
            create_codes=("ResourceExhausted",),
            after_effect=0.0,
        ),
    )
    machine = Machine.from_dict({"metadata": {"name": "m1", "namespace": "ns", "uid": "u1"}})
    machine_class = MachineClass.from_dict({"metadata": {"name": "c", "namespace": "ns"}})
    ctx = CallContext.background()
    create = CreateMachineRequest(machine, machine_class, {})
    delete = DeleteMachineRequest(machine, machine_class, {})
    status = GetMachineStatusRequest(machine, machine_class, {})

    assert _codes(lambda: driver.create_machine(ctx, create)) == {Code.Unavailable, Code.ResourceExhausted}
    assert _codes(lambda: driver.delete_machine(ctx, delete)) == {Code.Unavailable}
    assert _codes(lambda: driver.get_machine_status(ctx, status)) == {Code.Unavailable}


def test_the_control_file_round_trips_every_field() -> None:
    faults = DriverFaults(0.2, ("Aborted",), ("ResourceExhausted",), 0.3, 1.5, 0.4)
    assert DriverFaults.parse(json.loads(faults.to_json())) == faults

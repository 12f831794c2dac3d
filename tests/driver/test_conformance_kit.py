"""The conformance kit used as a provider repo uses it, and it catches broken drivers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

CONFTEST = '''
import pytest

from mcm.driver import Code, CreateMachineResponse, FakeDriver, MachineError
from mcm.testing.driver_conformance import ConformanceCase, sample_machine, sample_machine_class

pytest_plugins = ["mcm.testing.driver_conformance"]


class NewVMEveryTime(FakeDriver):
    """Not idempotent: every create makes another VM."""

    def create_machine(self, ctx, request):
        self.count = getattr(self, "count", 0) + 1
        name = request.machine.metadata.name
        vm = self.add_vm(f"fake:///{name}-{self.count}", name, class_name="conformance-class")
        return CreateMachineResponse(vm.provider_id, vm.node_name)


class InternalForMissing(FakeDriver):
    """Reports a missing VM as Internal and fails to delete a missing one."""

    def get_machine_status(self, ctx, request):
        try:
            return super().get_machine_status(ctx, request)
        except MachineError as exc:
            raise MachineError(Code.Internal, exc.message) from None

    def delete_machine(self, ctx, request):
        if not self.vms:
            raise MachineError(Code.NotFound, "nothing to delete")
        return super().delete_machine(ctx, request)


class RaisesPlainErrors(FakeDriver):
    """Raises KeyError instead of MachineError."""

    def get_machine_status(self, ctx, request):
        raise KeyError("vm")


class EchoesSecrets(FakeDriver):
    """Puts the user data into its NotFound message."""

    def get_machine_status(self, ctx, request):
        try:
            return super().get_machine_status(ctx, request)
        except MachineError as exc:
            user_data = request.secret_data["userData"].decode()
            raise MachineError(exc.code, f"{exc.message}; user data was {user_data}") from None


DRIVERS = {
    "good": FakeDriver,
    "echoes_secrets": EchoesSecrets,
    "not_idempotent": NewVMEveryTime,
    "internal_for_missing": InternalForMissing,
    "plain_errors": RaisesPlainErrors,
}


@pytest.fixture
def driver_conformance_case(request):
    driver = DRIVERS[request.module.DRIVER]()
    secret = {"userData": b"#!/bin/sh\\necho conformance-0123"}
    return ConformanceCase(driver, sample_machine(), sample_machine_class(), secret, 5.0)
'''

TEST_MODULE = """
from mcm.testing.driver_conformance import DriverConformanceSuite

DRIVER = "{driver}"


class TestConformance(DriverConformanceSuite):
    pass
"""

DRIVERS = ["good", "not_idempotent", "internal_for_missing", "plain_errors", "echoes_secrets"]


def run_kit(tmp_path: Path) -> dict[tuple[str, str], bool]:
    """Run the kit against every driver in a fresh pytest process; (driver, test) → passed."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    for driver in DRIVERS:
        (tmp_path / f"test_{driver}.py").write_text(TEST_MODULE.format(driver=driver))
    report = tmp_path / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    results: dict[tuple[str, str], bool] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        driver = case.attrib["classname"].split(".")[0].removeprefix("test_")
        failed = any(child.tag in ("failure", "error") for child in case)
        results[(driver, case.attrib["name"])] = not failed
    return results


def test_kit_passes_a_good_driver_and_fails_broken_ones(tmp_path: Path) -> None:
    results = run_kit(tmp_path)
    tests = sorted({name for _, name in results})
    assert len(tests) == 10
    assert all(results[("good", name)] for name in tests)

    def failing(driver: str) -> set[str]:
        return {name for name in tests if not results[(driver, name)]}

    assert failing("not_idempotent") == {"test_create_is_idempotent_for_the_same_machine_name"}
    assert failing("internal_for_missing") == {
        "test_status_of_unknown_machine_is_not_found",
        "test_delete_of_missing_vm_succeeds",
        "test_delete_removes_the_vm",
    }
    assert "test_status_of_unknown_machine_is_not_found" in failing("echoes_secrets")
    assert failing("plain_errors") >= {
        "test_status_of_unknown_machine_is_not_found",
        "test_status_finds_created_vm_by_provider_id",
    }


def test_kit_without_the_fixture_override_explains_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["mcm.testing.driver_conformance"]\n')
    (tmp_path / "test_kit.py").write_text(TEST_MODULE.format(driver="none"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "override the driver_conformance_case fixture" in result.stdout

"""docs/driver.md is runnable: a provider-style directory made from its code alone goes green, and
the conformance kit never prints a driver's secret-bearing exception in clear."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "driver.md"
SECRET_LINE = "echo s3cr3t-bootstrap-token-0123456789abcdef"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh pytest run in ``directory``, as a provider repository runs it."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, str(directory)],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_the_documented_provider_directory_goes_green_without_warnings(tmp_path: Path) -> None:
    files: dict[str, str] = {}
    snippets: list[str] = []
    for block in _python_blocks(DOC.read_text(encoding="utf-8")):
        header = re.match(r"# (\w+\.py)\n", block)
        if header:
            files[header.group(1)] = block
        else:
            snippets.append(block)
    assert set(files) == {"mycloud.py", "conftest.py", "test_conformance.py", "e2e.py"}
    for name, code in files.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    for snippet in snippets:
        ran = subprocess.run(
            [sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert ran.returncode == 0, f"{snippet}\n{ran.stderr}"
    result = _pytest(tmp_path, "-q", "-W", "error")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10 passed" in result.stdout and "warning" not in result.stdout.lower(), result.stdout


LEAKY_CONFTEST = f'''
import pytest

from mcm.driver import Code, FakeDriver, MachineError
from mcm.testing.driver_conformance import ConformanceCase, sample_machine, sample_machine_class

pytest_plugins = ["mcm.testing.driver_conformance"]


class RaisesUserData(FakeDriver):
    """A buggy driver: its cloud SDK error quotes the user data, and it is not a MachineError."""

    def create_machine(self, ctx, request):
        raise RuntimeError("cloud refused user data " + request.secret_data["userData"].decode())


class EchoesUserData(FakeDriver):
    """A MachineError whose message quotes the user data."""

    def create_machine(self, ctx, request):
        raise MachineError(Code.InvalidArgument, "bad user data " + request.secret_data["userData"].decode())


@pytest.fixture(params=[RaisesUserData, EchoesUserData])
def driver_conformance_case(request):
    secret = {{"userData": b"#!/bin/sh\\n{SECRET_LINE}\\n"}}
    return ConformanceCase(request.param(), sample_machine(), sample_machine_class(), secret)
'''

LEAKY_TEST = """
from mcm.testing.driver_conformance import DriverConformanceSuite


class TestLeaky(DriverConformanceSuite):
    pass
"""


def test_a_driver_exception_with_user_data_is_not_printed_in_clear(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(LEAKY_CONFTEST)
    (tmp_path / "test_leaky.py").write_text(LEAKY_TEST)
    for style in ("auto", "long", "native"):
        result = _pytest(tmp_path, f"--tb={style}", "-k", "test_create_returns_provider_id")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert "2 failed" in output, output
        assert "s3cr3t-bootstrap-token" not in output, f"--tb={style} printed the user data:\n{output}"
        assert "the driver raised RuntimeError (cloud refused user data" in output
        assert "the driver echoed secret data (userData)" in output
        assert "[redacted]" in output
        assert "During handling of the above exception" not in output

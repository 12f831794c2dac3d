"""``--driver=MODULE:ATTR`` finds MODULE as ``python -m`` would: installed, else in the current
directory, also from the ``machine-controller`` console script (which, unlike ``python -m``, does
not put the current directory on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.driver import FakeDriver
from mcm.driver.grpc.__main__ import load_driver as sidecar_load_driver
from mcm.driver.importing import import_driver_module

DRIVER_MODULE = (
    "from mcm.driver import FakeDriver\n\nORIGIN = {origin!r}\n\n\ndef make():\n    return FakeDriver()\n"
)


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sys.path and the test's modules restored afterwards."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_module_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_imports: None
) -> None:
    (tmp_path / "cwd_driver_a.py").write_text(DRIVER_MODULE.format(origin="cwd"))
    monkeypatch.chdir(tmp_path)
    module = import_driver_module("cwd_driver_a")
    assert module.ORIGIN == "cwd"
    assert sys.path[0] == str(tmp_path)
    assert isinstance(sidecar_load_driver("cwd_driver_a:make"), FakeDriver)


def test_an_installed_module_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_imports: None
) -> None:
    installed, cwd = tmp_path / "site", tmp_path / "work"
    installed.mkdir()
    cwd.mkdir()
    (installed / "cwd_driver_b.py").write_text(DRIVER_MODULE.format(origin="installed"))
    (cwd / "cwd_driver_b.py").write_text(DRIVER_MODULE.format(origin="cwd"))
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.chdir(cwd)
    path_before = list(sys.path)
    assert import_driver_module("cwd_driver_b").ORIGIN == "installed"
    assert sys.path == path_before


def test_a_module_that_fails_to_import_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_imports: None
) -> None:
    (tmp_path / "cwd_driver_c.py").write_text("import a_dependency_that_is_missing\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModuleNotFoundError) as info:
        import_driver_module("cwd_driver_c")
    assert info.value.name == "a_dependency_that_is_missing"


def test_a_missing_module_stays_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_imports: None
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModuleNotFoundError) as info:
        import_driver_module("no_such_driver_module")
    assert info.value.name == "no_such_driver_module"


def test_the_console_script_loads_a_driver_from_the_current_directory(tmp_path: Path) -> None:
    """Past the driver, the command stops at the missing cluster: the driver loaded."""
    (tmp_path / "cwd_driver_d.py").write_text(DRIVER_MODULE.format(origin="cwd"))
    script = Path(sys.executable).parent / "machine-controller"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "KUBERNETES_SERVICE_HOST"}}
    result = subprocess.run(
        [str(script), "--driver=cwd_driver_d:make"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "--driver" not in result.stderr, result.stderr
    assert "error: target cluster" in result.stderr, result.stderr

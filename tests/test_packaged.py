"""Files shipped inside the package: found through importlib.resources, and their mirrors in the
repository (the charts' crds/) byte-equal to them (docs/architecture.md, "Packaged files")."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

import mcm.packaged
from mcm.packaged import PackagedFileMissing

REPO = Path(__file__).resolve().parents[1]
SYNC = REPO / "hack" / "sync-packaged.py"


def _sync_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_packaged", SYNC)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kinds(directory: Path) -> set[str]:
    return {yaml.safe_load(p.read_text())["spec"]["names"]["kind"] for p in directory.glob("*.yaml")}


def test_the_packaged_crds_are_the_api_groups_kinds() -> None:
    assert _kinds(mcm.packaged.machine_crds()) == {
        "Machine",
        "MachineClass",
        "MachineSet",
        "MachineDeployment",
    }
    assert _kinds(mcm.packaged.machineconfig_crds()) == {
        "MachineConfig",
        "MachinePool",
        "KubeletConfig",
        "ControllerConfig",
    }


def test_a_missing_packaged_file_is_a_clear_error() -> None:
    with pytest.raises(PackagedFileMissing, match="mcm/apis/nothing"):
        mcm.packaged.path("apis/nothing")


def test_every_mirror_is_byte_equal_to_the_package() -> None:
    result = subprocess.run(
        [sys.executable, str(SYNC), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_mirrors_are_the_charts_crds() -> None:
    mirrors = {(source, mirror) for source, mirror, _ in _sync_module().MIRRORS}
    assert ("mcm/" + mcm.packaged.MACHINE_CRDS, "charts/machine-controller/crds") in mirrors
    assert ("mcm/" + mcm.packaged.MACHINECONFIG_CRDS, "charts/machine-config-controller/crds") in mirrors


def test_the_check_finds_a_changed_a_missing_and_an_extra_file(tmp_path: Path) -> None:
    sync = _sync_module()
    source, mirror = tmp_path / "source", tmp_path / "mirror"
    source.mkdir()
    (source / "a.yaml").write_text("a: 1\n")
    (source / "b.yaml").write_text("b: 1\n")
    sync.sync(source, mirror, "*.yaml")
    assert sync.differences(source, mirror, "*.yaml") == []
    (mirror / "a.yaml").write_text("a: 2\n")
    (mirror / "b.yaml").unlink()
    (mirror / "c.yaml").write_text("c: 1\n")
    assert sorted(sync.differences(source, mirror, "*.yaml")) == [
        f"{mirror / 'a.yaml'}: differs from {source / 'a.yaml'}",
        f"{mirror / 'b.yaml'}: missing",
        f"{mirror / 'c.yaml'}: not in {source}",
    ]
    sync.sync(source, mirror, "*.yaml")
    assert sync.differences(source, mirror, "*.yaml") == []


def test_the_command_prints_a_packaged_path_for_the_shell() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mcm.packaged", mcm.packaged.MACHINE_CRDS],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(result.stdout.strip()) == mcm.packaged.machine_crds()


def test_the_command_fails_on_a_missing_file_and_without_an_argument(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert mcm.packaged.main(["apis/nothing"]) == 1
    assert "mcm/apis/nothing is not installed" in capsys.readouterr().err
    assert mcm.packaged.main([]) == 2
    assert "usage: python -m mcm.packaged RELATIVE" in capsys.readouterr().err

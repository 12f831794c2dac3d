"""The wheel works outside the checkout: built from the sources the image builds from, installed
into a fresh venv in a temp directory (its dependencies at the versions locked in requirements/,
plus only the ``conformance`` extra), and run from a directory outside the checkout with no
PYTHONPATH: both commands' ``--help`` and ``demo``, the packaged CRDs, the envtest build
command, the conformance kit, the license files."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.driver.test_driver_docs import DOC, _python_blocks

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("wheel")]


@dataclass(frozen=True)
class Installed:
    venv: Path
    elsewhere: Path
    """A directory outside the checkout to run commands in."""

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``command`` (a script of the venv, or ``python``) from outside the checkout."""
        program = self.venv / "bin" / command[0]
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
        env = {k: v for k, v in env.items() if not k.startswith(("PYTEST_", "MCM_"))}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
        return subprocess.run(
            [str(program), *command[1:]],
            cwd=self.elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _pip(python: Path, *args: str) -> None:
    result = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _build_wheel(tmp: Path) -> Path:
    """The wheel, built as the image builds it: from a copy of what .dockerignore lets through,
    with the locked build tools (this venv's) and no build isolation."""
    source = tmp / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(REPO / "mcm", source / "mcm", ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        shutil.copy(REPO / name, source / name)
    _pip(
        Path(sys.executable),
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(tmp / "dist"),
        str(source),
    )
    (wheel,) = (tmp / "dist").glob("mcm-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("wheel")
    assert not tmp.is_relative_to(REPO)
    wheel = _build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    _pip(python, "install", "--quiet", "--require-hashes", "-r", str(REPO / "requirements" / "build.txt"))
    # The wheel's own metadata decides what comes in; the lock decides the versions and hashes.
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    wanted = tmp / "wheel.txt"
    wanted.write_text(f"mcm[conformance] @ {wheel.as_uri()} --hash=sha256:{digest}\n")
    _pip(python, "install", "--quiet", "-c", str(REPO / "requirements" / "dev.txt"), "-r", str(wanted))
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    yield Installed(venv, elsewhere)


def test_mcm_comes_from_the_venv_with_only_the_conformance_extra(installed: Installed) -> None:
    where = installed.run("python", "-c", "import mcm; print(mcm.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.venv)
    packages = installed.run("python", "-m", "pip", "list", "--format=freeze").stdout.lower()
    assert "pytest==" in packages
    for only_in_test in ("pytest-xdist", "freezegun", "helm-python-sdk", "mypy"):
        assert f"{only_in_test}==" not in packages


@pytest.mark.parametrize("command", ["machine-controller", "machine-config-controller"])
def test_help(installed: Installed, command: str) -> None:
    result = installed.run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "--kubeconfig" in result.stdout or "--control-kubeconfig" in result.stdout


def test_machine_controller_demo(installed: Installed) -> None:
    result = installed.run("machine-controller", "demo", "--machines", "1", "--timeout", "90", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "==> done in" in result.stdout


def test_machine_config_controller_demo(installed: Installed) -> None:
    result = installed.run("machine-config-controller", "demo", "--timeout", "120", timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "==> done in" in result.stdout


def test_the_packaged_files_are_installed(installed: Installed) -> None:
    for relative, count in (("apis/machine/crds", 4), ("machineconfig/crds", 4)):
        result = installed.run("python", "-m", "mcm.packaged", relative)
        assert result.returncode == 0, result.stderr
        directory = Path(result.stdout.strip())
        assert directory.is_relative_to(installed.venv)
        assert len(list(directory.glob("*.yaml"))) == count
    (dist_info,) = installed.venv.glob("lib/python*/site-packages/mcm-*.dist-info")
    assert "Apache License" in (dist_info / "licenses" / "LICENSE").read_text()
    assert "client-go" in (dist_info / "licenses" / "NOTICE").read_text()


def test_the_envtest_build_command_finds_its_go_module(installed: Installed) -> None:
    result = installed.run("python", "-m", "mcm.testing.envtest", "build", "--print-dir")
    assert result.returncode == 0, result.stderr
    assert re.search(r"mcm-envtest/v1\.\d+\.\d+/bin$", result.stdout.strip()), result.stdout
    module = installed.run("python", "-c", "from mcm.testing.envtest import build; print(build.module_dir())")
    files = {
        p.relative_to(Path(module.stdout.strip())).as_posix() for p in Path(module.stdout.strip()).rglob("*")
    }
    assert {"go.mod", "go.sum", "etcd/main.go"} <= files


def test_the_conformance_kit_runs_the_documented_provider(installed: Installed) -> None:
    provider = installed.elsewhere / "provider"
    provider.mkdir()
    for block in _python_blocks(DOC.read_text(encoding="utf-8")):
        header = re.match(r"# (\w+\.py)\n", block)
        if header and header.group(1) in {"mycloud.py", "conftest.py", "test_conformance.py"}:
            (provider / header.group(1)).write_text(block, encoding="utf-8")
    result = installed.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(provider))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10 passed" in result.stdout

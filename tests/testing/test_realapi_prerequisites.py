"""Issue 36 #6: under ``CI=true`` no real-API test skips for a missing prerequisite (kubectl,
helm-python-sdk): it fails with one line naming what is missing, before any control plane is
started. Elsewhere it skips with the same reason.

Each case runs pytest on one real-API test in a subprocess whose environment lacks the tool;
``MCM_ENVTEST_ASSETS`` names no binaries, so reaching the control plane would say so instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

KUBECTL_TEST = (
    "tests/realapi/test_kubectl.py::test_auth_cluster_info_server_side_apply_explain_diff_and_dry_run"
)
CHART_TEST = "tests/realapi/test_chart.py::test_rendered_objects_apply_server_side_dry_run_then_for_real"


def run_pytest(test: str, tmp_path: Path, *, ci: bool, path: str, pythonpath: str = "") -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTHONPATH")}
    env.update(PATH=path, MCM_ENVTEST_ASSETS=str(tmp_path / "no-binaries"))
    if ci:
        env["CI"] = "true"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:randomly", test],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


@pytest.fixture
def no_kubectl(tmp_path: Path) -> str:
    """A PATH with no kubectl on it."""
    empty = tmp_path / "bin"
    empty.mkdir()
    return str(empty)


def test_a_missing_kubectl_fails_the_real_api_tier_under_ci(tmp_path: Path, no_kubectl: str) -> None:
    code, output = run_pytest(KUBECTL_TEST, tmp_path, ci=True, path=no_kubectl)
    assert code != 0, output
    assert "realapi tier required under CI=true: kubectl is not installed on this machine" in output
    assert "skipped" not in output


def test_a_missing_kubectl_skips_the_real_api_tier_elsewhere(tmp_path: Path, no_kubectl: str) -> None:
    code, output = run_pytest(KUBECTL_TEST, tmp_path, ci=False, path=no_kubectl)
    assert code == 0, output
    assert "realapi tier skipped: kubectl is not installed on this machine" in output


def test_a_missing_helm_python_fails_the_real_api_tier_under_ci(tmp_path: Path) -> None:
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "helm_python.py").write_text('raise ImportError("helm_python is not installed here")\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text("#!/bin/sh\nexit 0\n")  # present; never reached
    (bin_dir / "kubectl").chmod(0o755)
    code, output = run_pytest(CHART_TEST, tmp_path, ci=True, path=str(bin_dir), pythonpath=str(stub))
    assert code != 0, output
    assert "realapi tier required under CI=true: helm-python-sdk is not installed" in output
    assert "skipped" not in output

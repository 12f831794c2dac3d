"""Shared fixtures: a fresh API server emulator per test and a kubeconfig pointing at it; the real
control plane (``real_pair``) shared by the tests of the ``realapi`` tier."""

from __future__ import annotations

import importlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

import pytest

from mcm import packaged

if TYPE_CHECKING:
    from mcm.emulator import Emulator
    from mcm.testing.envtest import ControlPlanePair

REPO_ROOT = Path(__file__).resolve().parent.parent
MCM_CRDS_DIR = packaged.machine_crds()
MCC_CRDS_DIR = packaged.machineconfig_crds()


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """A running emulator (plain HTTP, loopback, ephemeral port) with the mcm CRDs installed."""
    from mcm.emulator import Emulator

    crds = sorted(MCM_CRDS_DIR.glob("*.yaml"))
    with Emulator() as emu:
        if crds:
            emu.install_crds(crds)
        yield emu


@pytest.fixture
def kubeconfig(emulator: Emulator, tmp_path: Path) -> str:
    """Path of a kubeconfig file for ``emulator`` that both the Python client and kubectl accept."""
    path = tmp_path / "kubeconfig"
    emulator.write_kubeconfig(path)
    return str(path)


REALAPI_GROUP = "realapi"
"""The xdist group of every test on the real control plane: one worker, one shared pair."""
REALAPI_MARKS = (pytest.mark.realapi, pytest.mark.xdist_group(REALAPI_GROUP))
"""Marks for a test (``pytestmark``) or a parameter (``pytest.param(..., marks=...)``) that runs
on the real control plane."""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, stop the run if pytest-xdist did not group a marked test (it
    tags the node id with ``@<group>``): the real-API tier would silently spread over every worker,
    each starting control planes of its own."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid:
            raise pytest.UsageError(f"pytest-xdist did not group {item.nodeid} (pytest/xdist versions?)")


def realapi_unavailable(reason: str) -> NoReturn:
    """Skip the real-API tier with one line, or fail it when ``CI=true`` (CI must run it)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"realapi tier required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"realapi tier skipped: {reason}")


def optional_module(name: str) -> ModuleType | None:
    """``import name``, or ``None`` when it is not installed (a prerequisite fixture reports it)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@pytest.fixture(scope="session")
def needs_kubectl() -> str:
    """kubectl on PATH, for the real-API tests that run it (``usefixtures``): without it they
    skip, or fail under ``CI=true``, before a control plane is started."""
    path = shutil.which("kubectl")
    if path is None:
        realapi_unavailable("kubectl is not installed on this machine")
    return path


@pytest.fixture(scope="session")
def needs_helm_python() -> ModuleType:
    """helm-python-sdk (renders the charts), for the real-API chart tests: as :func:`needs_kubectl`."""
    module = optional_module("helm_python")
    if module is None:
        realapi_unavailable("helm-python-sdk is not installed (pip install -e '.[dev]')")
    return module


@pytest.fixture(scope="session")
def real_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlanePair]:
    """A real control + target pair (etcd, kube-apiserver, kube-controller-manager; the MCM CRDs
    in control), shared by every real-API test of this worker."""
    from mcm.testing.envtest import BinariesMissing, ControlPlanePair, find_binaries

    try:
        binaries = find_binaries()
    except BinariesMissing as exc:
        realapi_unavailable(str(exc))
    with ControlPlanePair(tmp_path_factory.mktemp("envtest"), crds=MCM_CRDS_DIR, binaries=binaries) as pair:
        yield pair

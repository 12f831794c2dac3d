"""Shared fixtures: a fresh API server emulator per test and a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mcm.emulator import Emulator

REPO_ROOT = Path(__file__).resolve().parent.parent
MCM_CRDS_DIR = REPO_ROOT / "charts" / "machine-controller" / "crds"


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

"""Fixtures: an emulator with the MachineConfig CRDs, a :class:`Cluster` on it, and a check that no
reconcile hit a bug (an exception reported by a worker) during the test."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mcm.runtime import errors
from mcm.runtime.client import ClusterClient, load_config

from .fixtures import CRDS, Cluster

if TYPE_CHECKING:
    from mcm.emulator import Emulator


@pytest.fixture
def mcc_emulator() -> Iterator[Emulator]:
    from mcm.emulator import Emulator

    with Emulator() as emu:
        emu.install_crds(CRDS)
        yield emu


@pytest.fixture
def client(mcc_emulator: Emulator, tmp_path: Path) -> Iterator[ClusterClient]:
    cluster_client = load_config(str(mcc_emulator.write_kubeconfig(tmp_path / "kubeconfig")), qps=-1)
    yield cluster_client
    cluster_client.close()


@pytest.fixture(autouse=True)
def no_reconcile_bugs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException]]:
    """Fail the test if any worker reported an exception escaping a reconcile (a bug)."""
    bugs: list[BaseException] = []

    def record(err: BaseException, context: Mapping[str, object]) -> None:
        if "traceback" in context:
            bugs.append(err)

    monkeypatch.setattr(errors, "ERROR_HANDLERS", [*errors.ERROR_HANDLERS, record])
    yield bugs
    assert bugs == [], f"reconcile raised: {bugs!r}"


@pytest.fixture
def cluster(client: ClusterClient) -> Iterator[Cluster]:
    environment = Cluster(client)
    try:
        yield environment
    finally:
        environment.close()

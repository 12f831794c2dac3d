"""End to end on a ClusterPair: create → Pending → Running, health, deletion with drain, restarts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.apis.machine import constants as c

from .fixtures import NS, Env, eventually, machine


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    try:
        yield environment
    finally:
        environment.close()


def test_create_pending_running(env: Env) -> None:
    env.setup_class()
    env.start()
    env.machines.create(machine("machine-one"), namespace=NS)
    eventually(lambda: env.phase("machine-one") == c.PHASE_PENDING, what="Pending")
    stored = env.get_machine("machine-one")
    assert stored is not None
    assert stored["spec"]["providerID"] == "fake:///machine-one"
    assert stored["metadata"]["labels"][c.LABEL_NODE] == "machine-one"
    assert c.MCM_FINALIZER in stored["metadata"]["finalizers"]
    env.register_nodes()
    eventually(lambda: env.phase("machine-one") == c.PHASE_RUNNING, what="Running")
    assert len(env.driver.calls_to("create_machine")) == 1

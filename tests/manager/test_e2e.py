"""End to end on the emulator: the manager and mcm's machine controller with the fake driver and
the node simulator (see ``cluster.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .cluster import NS, ManagerEnv, Monitor, eventually, md


@pytest.fixture
def env(tmp_path: Path) -> Iterator[ManagerEnv]:
    environment = ManagerEnv(tmp_path)
    try:
        yield environment
    finally:
        environment.close()


def test_create_and_roll_with_max_unavailable_zero(env: ManagerEnv) -> None:
    env.start()
    with Monitor(env) as monitor:
        env.deployments.create(md(replicas=3, max_surge=1, max_unavailable=0), namespace=NS)
        eventually(lambda: env.settled(3), what="3 Running machines")
        monitor.watch(max_machines=4, min_running=3)
        env.update_deployment(lambda d: d["spec"]["template"]["spec"]["class"].update(name="class-b"))
        eventually(lambda: env.settled(3, "class-b"), what="rolled to class-b")
        assert monitor.violations == []
        assert monitor.max_seen == 4

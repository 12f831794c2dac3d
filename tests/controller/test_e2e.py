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


def _running(env: Env, name: str) -> None:
    env.machines.create(machine(name), namespace=NS)
    eventually(lambda: env.phase(name) == c.PHASE_PENDING, what="Pending")
    env.register_nodes()
    eventually(lambda: env.phase(name) == c.PHASE_RUNNING, what="Running")


def _node_exists(env: Env, name: str) -> bool:
    try:
        env.nodes.get(name)
    except Exception:
        return False
    return True


def test_delete_drains_deletes_vm_node_and_finalizer(env: Env) -> None:
    env.setup_class()
    env.start()
    _running(env, "machine-two")
    eventually(lambda: c.NODE_FINALIZER in (env.nodes.get("machine-two")["metadata"].get("finalizers") or []))
    env.machines.delete("machine-two", namespace=NS)
    eventually(lambda: env.get_machine("machine-two") is None, what="machine gone")
    assert env.drainer.cordoned == ["machine-two"]
    assert [r.node_name for r in env.drainer.drained] == ["machine-two"]
    assert env.driver.vms == {}
    assert not _node_exists(env, "machine-two")


def test_node_not_ready_goes_unknown_then_failed(tmp_path: Path) -> None:
    from mcm.controller import ControllerOptions

    environment = Env(tmp_path, options=ControllerOptions(namespace=NS, machine_health_timeout=0.5))
    try:
        environment.setup_class()
        environment.start()
        _running(environment, "machine-three")
        node = environment.nodes.get("machine-three")
        node["status"]["conditions"][0]["status"] = "False"
        environment.nodes.update_status(node)
        eventually(
            lambda: environment.phase("machine-three") in (c.PHASE_UNKNOWN, c.PHASE_FAILED), what="Unknown"
        )
        eventually(lambda: environment.phase("machine-three") == c.PHASE_FAILED, what="Failed")
        stored = environment.get_machine("machine-three") or {}
        assert "health checks failing since last" in stored["status"]["lastOperation"]["description"]
    finally:
        environment.close()

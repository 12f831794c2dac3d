"""Chaos on a ClusterPair (issue 14, scenario 3): the control API server hangs for longer than the
freeze timeout while a machine is Unknown.

Expected: the controller freezes (gauge 1), nothing is marked Failed because of the outage
(although the outage outlasts the machine's health timeout), the controller unfreezes once the
server answers again, and the Unknown machine's health timer is reset (Running, fresh
``lastUpdateTime``, upstream's reset description). The driver call log shows exactly the one VM
created and none deleted.

Real time with short options: status-check timeout 0.5 s, period 0.2 s, health timeout 4 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from mcm.apis.machine import constants as c
from mcm.controller import Controller, ControllerOptions
from mcm.driver import DeleteMachineRequest
from mcm.runtime.client.errors import Conflict

from .fixtures import NS, Env, eventually, machine

HEALTH_TIMEOUT = 4.0


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    options = ControllerOptions(
        namespace=NS,
        machine_health_timeout=HEALTH_TIMEOUT,
        machine_safety_apiserver_statuscheck_timeout=0.5,
        machine_safety_apiserver_statuscheck_period=0.2,
    )
    environment = Env(tmp_path, options=options)
    try:
        yield environment
    finally:
        environment.close()


def frozen_gauge(controller: Controller) -> float | None:
    return controller.registry.get_sample_value("mcm_machine_controller_frozen")


def machine_versions(env: Env, name: str) -> list[dict[str, Any]]:
    history = env.pair.control.history("machines.machine.sapcloud.io")
    return [ch.new.obj for ch in history if ch.new is not None and ch.new.obj["metadata"]["name"] == name]


def test_control_api_server_hang_freezes_without_failing_machines(env: Env) -> None:
    env.setup_class()
    controller = env.start()
    env.machines.create(machine("machine-h"), namespace=NS)
    eventually(lambda: env.phase("machine-h") == c.PHASE_PENDING, what="Pending")
    env.register_nodes()
    eventually(lambda: env.phase("machine-h") == c.PHASE_RUNNING, what="Running")
    eventually(lambda: frozen_gauge(controller) == 0.0, what="collector registered")

    def node_not_ready() -> bool:
        """The controller may still be writing the node (finalizer, template sync): a 409 means
        read it again."""
        node = env.nodes.get("machine-h")
        node["status"]["conditions"][0]["status"] = "False"
        try:
            env.nodes.update_status(node)
        except Conflict:
            return False
        return True

    eventually(node_not_ready, what="node NotReady written")
    eventually(lambda: env.phase("machine-h") == c.PHASE_UNKNOWN, what="Unknown")
    unknown_seen = time.monotonic()

    env.pair.control.pause("hang")
    try:
        eventually(lambda: frozen_gauge(controller) == 1.0, timeout=10, what="frozen")
        assert controller.frozen
        # Keep the server hung until the machine's health timeout has certainly passed: without
        # the freeze and the reset, the machine would be marked Failed right after the outage.
        time.sleep(max(0.0, unknown_seen + HEALTH_TIMEOUT + 1.5 - time.monotonic()))
        assert controller.frozen
    finally:
        env.pair.control.resume()
    resumed = time.time()

    eventually(lambda: frozen_gauge(controller) == 0.0, what="unfrozen")
    stored = eventually(lambda: _reset(env), what="health timeout reset")
    assert stored["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING
    reset_at = stored["status"]["currentStatus"]["lastUpdateTime"]
    assert time.strptime(reset_at, "%Y-%m-%dT%H:%M:%SZ") >= time.gmtime(int(resumed) - 1)
    assert stored["status"]["lastOperation"]["state"] == c.STATE_SUCCESSFUL
    assert stored["status"]["lastOperation"]["type"] == c.OPERATION_HEALTH_CHECK
    assert stored["status"].get("conditions")  # other status fields kept

    phases = [
        (v.get("status") or {}).get("currentStatus", {}).get("phase")
        for v in machine_versions(env, "machine-h")
    ]
    assert c.PHASE_FAILED not in phases
    assert c.PHASE_UNKNOWN in phases

    assert [call.machine for call in env.driver.calls_to("create_machine")] == ["machine-h"]
    deleted = [
        cast(DeleteMachineRequest, call.request).machine.spec.provider_id
        for call in env.driver.calls_to("delete_machine")
    ]
    assert deleted == []
    assert set(env.driver.vms) == {"fake:///machine-h"}


def _reset(env: Env) -> dict[str, Any] | None:
    stored = env.get_machine("machine-h")
    if stored is None:
        return None
    description = ((stored.get("status") or {}).get("lastOperation") or {}).get("description")
    return stored if description == c.DESC_HEALTH_TIMEOUT_RESET else None

"""Controller test fixtures: object builders, a stub drainer, a controller on a ClusterPair."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.controller import Controller, ControllerOptions
from mcm.drain import DrainOptions, DrainResult
from mcm.driver import FakeDriver
from mcm.emulator import ClusterPair
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import NODES, SECRETS
from mcm.testing.nodesim import NodeSimulator

NS = "default"
TIMEOUT = 20.0


def eventually(predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached in {timeout}s"
        time.sleep(0.02)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(
    name: str = "cloud-secret", user_data: str | None = "#!/bin/sh\necho <<BOOTSTRAP_TOKEN>>"
) -> dict[str, Any]:
    data = {"userData": b64(user_data)} if user_data is not None else {}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": data}


def machine_class(name: str = "class-a", secret_name: str = "cloud-secret", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": name, "namespace": NS},
        "providerSpec": {"size": "small"},
        "secretRef": {"name": secret_name, "namespace": NS},
        "provider": "fake",
        **extra,
    }


def machine(name: str, class_name: str = "class-a", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": NS, **metadata},
        "spec": {"class": {"kind": "MachineClass", "name": class_name}},
    }


def ready_node(name: str, provider_id: str = "", ready: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"providerID": provider_id},
        "status": {
            "conditions": [
                {"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "ready"},
                {
                    "type": "DiskPressure",
                    "status": "False",
                    "reason": "KubeletHasNoDiskPressure",
                    "message": "ok",
                },
            ]
        },
    }


@dataclass(frozen=True)
class DrainCall:
    """One call of :meth:`StubDrainer.drain`."""

    node_name: str
    options: DrainOptions
    machine: Any


@dataclass
class StubDrainer:
    """Stands in for ``mcm.drain.Drainer``: records cordons and drains; a drain fails (its
    result's error) while ``fail_with`` is set."""

    cordoned: list[str] = field(default_factory=list)
    drained: list[DrainCall] = field(default_factory=list)
    fail_with: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cordon(self, node_name: str) -> None:
        with self.lock:
            self.cordoned.append(node_name)

    def drain(self, node_name: str, options: DrainOptions, *, machine_ref: Any = None) -> DrainResult:
        with self.lock:
            self.drained.append(DrainCall(node_name, options, machine_ref))
        return DrainResult(node=node_name, duration=0.0, error=self.fail_with)


class Env:
    """A ClusterPair, clients, a FakeDriver and (once started) a running controller."""

    def __init__(
        self,
        directory: Path,
        *,
        drainer: Any = None,
        real_drain: bool = False,
        options: ControllerOptions | None = None,
    ) -> None:
        self.pair = ClusterPair.start(directory)
        self.control: ClusterClient = load_config(str(self.pair.control_kubeconfig), qps=-1, burst=0)
        self.target: ClusterClient = load_config(str(self.pair.target_kubeconfig), qps=-1, burst=0)
        self.driver = FakeDriver()
        self.sim = NodeSimulator(self.target, self.driver, heartbeat_interval=3600.0)
        self.drainer = drainer if drainer is not None or real_drain else StubDrainer()

        self.options = options or ControllerOptions(namespace=NS)
        self.machines = self.control.resource(MACHINES)
        self.classes = self.control.resource(MACHINE_CLASSES)
        self.secrets = self.control.resource(SECRETS)
        self.nodes = self.target.resource(NODES)
        self.controller: Controller | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, workers: int = 2) -> Controller:
        self.stop = threading.Event()
        self.controller = Controller(
            self.control,
            self.target,
            self.driver,
            self.options,
            drainer=self.drainer,
        )
        self.thread = threading.Thread(target=self.controller.run, args=(workers, self.stop), daemon=True)
        self.thread.start()
        return self.controller

    def stop_controller(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
            assert not self.thread.is_alive()

    def close(self) -> None:
        self.stop_controller()
        self.pair.close()

    def get_machine(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.machines.get(name, namespace=NS))
        except NotFound:
            return None

    def phase(self, name: str) -> str:
        m = self.get_machine(name) or {}
        return str(((m.get("status") or {}).get("currentStatus") or {}).get("phase") or "")

    def setup_class(self) -> None:
        self.secrets.create(secret(), namespace=NS)
        self.classes.create(machine_class(), namespace=NS)

    def register_nodes(self) -> None:
        """Play kubelet: one pass of the node simulator (a Ready Node for every VM)."""
        self.sim.sync()


def env_fixture(tmp_path: Path) -> Iterator[Env]:
    env = Env(tmp_path)
    try:
        yield env
    finally:
        env.close()


__all__ = ["NS", "Env", "StubDrainer", "c", "eventually"]

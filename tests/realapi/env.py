"""The controller in process on the real pair: a namespace of its own, a FakeDriver, the node
simulator as the kubelets (registering Nodes and finishing pod termination), the real drain."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.app.drainer import drain_factory
from mcm.app.runner import event_recorder
from mcm.controller import Controller, ControllerOptions
from mcm.driver import FakeDriver
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import NAMESPACES, NODES, PODS, SECRETS
from mcm.testing.envtest import ControlPlanePair
from mcm.testing.nodesim import NodeSimulator
from tests.controller.fixtures import machine, machine_class, secret

TIMEOUT = 60.0


def eventually(predicate: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll ``predicate`` until truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached in {timeout:.0f}s"
        time.sleep(0.05)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def in_namespace(body: dict[str, Any], namespace: str) -> dict[str, Any]:
    copy = {**body, "metadata": {**body["metadata"], "namespace": namespace}}
    if "secretRef" in copy:
        copy["secretRef"] = {**copy["secretRef"], "namespace": namespace}
    return copy


class RealEnv:
    """One test's controller on the shared real pair (see the module docstring)."""

    def __init__(self, pair: ControlPlanePair, options: ControllerOptions | None = None) -> None:
        self.pair = pair
        self.ns = unique("rt")
        self.control: ClusterClient = load_config(str(pair.control_kubeconfig), qps=-1, burst=0)
        self.target: ClusterClient = load_config(str(pair.target_kubeconfig), qps=-1, burst=0)
        for cluster in (self.control, self.target):
            cluster.resource(NAMESPACES).create({"metadata": {"name": self.ns}})
        self.driver = FakeDriver()
        self.sim = NodeSimulator(
            self.target, self.driver, heartbeat_interval=3600.0, poll_interval=0.2, finish_pods=True
        )
        self.options = options or ControllerOptions(namespace=self.ns)
        self.machines = self.control.resource(MACHINES)
        self.nodes = self.target.resource(NODES)
        self.pods = self.target.resource(PODS)
        self.controller: Controller | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.node_names: set[str] = set()
        self.broadcaster, self.recorder = event_recorder(self.control)

    def setup_class(self) -> None:
        self.control.resource(SECRETS).create(in_namespace(secret(), self.ns))
        self.control.resource(MACHINE_CLASSES).create(in_namespace(machine_class(), self.ns))

    def start(self, workers: int = 2) -> Controller:
        self.sim.start()
        self.stop = threading.Event()
        self.controller = Controller(
            self.control,
            self.target,
            self.driver,
            self.options,
            drainer_factory=drain_factory,
            recorder=self.recorder,
        )
        self.thread = threading.Thread(target=self.controller.run, args=(workers, self.stop), daemon=True)
        self.thread.start()
        return self.controller

    def stop_controller(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
            assert not self.thread.is_alive(), "the controller did not stop"
            self.thread = None

    def close(self) -> None:
        self.stop_controller()
        self.broadcaster.shutdown()
        self.sim.stop()
        for name in self.node_names | set(self.sim.node_names):
            try:
                self.nodes.delete(name)
            except NotFound:
                pass
        for cluster in (self.control, self.target):
            try:
                cluster.resource(NAMESPACES).delete(self.ns)
            except NotFound:
                pass
            cluster.close()

    # --- reading ---------------------------------------------------------------------------------

    def create_machine(self, name: str) -> None:
        self.node_names.add(name)
        self.machines.create(in_namespace(machine(name), self.ns))

    def get_machine(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.machines.get(name, namespace=self.ns))
        except NotFound:
            return None

    def phase(self, name: str) -> str:
        m = self.get_machine(name) or {}
        return str(((m.get("status") or {}).get("currentStatus") or {}).get("phase") or "")

    def last_operation(self, name: str) -> str:
        m = self.get_machine(name) or {}
        return str(((m.get("status") or {}).get("lastOperation") or {}).get("description") or "")

    def running(self, name: str) -> None:
        """Create machine ``name`` and wait until it is Running on its simulated Node."""
        self.create_machine(name)
        eventually(lambda: self.phase(name) == c.PHASE_RUNNING, f"{name} Running")

    def node_exists(self, name: str) -> bool:
        try:
            self.nodes.get(name)
        except NotFound:
            return False
        return True

"""End-to-end fixture: the manager and mcm's machine controller on an emulated ClusterPair.

:class:`ManagerEnv` runs, in this process: two emulators (control, target), the machine
controller (:class:`mcm.controller.Controller`) with the in-memory :class:`~mcm.driver.FakeDriver`
and a drain stand-in, a :class:`~mcm.testing.nodesim.NodeSimulator` that boots a Node for each VM,
and the manager (:class:`mcm.manager.Manager`). The manager can be stopped and started again
(a restart), as can the whole machine side.

:class:`Monitor` watches Machines through its own watch on the control cluster and checks the
roll-out bounds on every event it sees, independently of the manager's bookkeeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from mcm.controller import Controller, ControllerOptions
from mcm.driver import FakeDriver
from mcm.emulator import ClusterPair
from mcm.manager import Manager, ManagerOptions
from mcm.runtime import objects as o
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, NODES, SECRETS
from mcm.runtime.record import EventBroadcaster
from mcm.testing.nodesim import NodeSimulator

from ..controller.fixtures import StubDrainer, machine_class, secret

NS = "default"
TIMEOUT = 60.0


def eventually(predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached in {timeout}s"
        time.sleep(0.05)


def md(
    name: str = "pool",
    replicas: int = 3,
    *,
    class_name: str = "class-a",
    strategy: str = "RollingUpdate",
    max_surge: Any = 1,
    max_unavailable: Any = 0,
    **spec: Any,
) -> dict[str, Any]:
    strategy_spec: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        strategy_spec["rollingUpdate"] = {"maxSurge": max_surge, "maxUnavailable": max_unavailable}
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"name": name}},
            "template": {
                "metadata": {"labels": {"name": name}},
                "spec": {"class": {"kind": "MachineClass", "name": class_name}},
            },
            "strategy": strategy_spec,
            **spec,
        },
    }


class ManagerEnv:
    """See the module docstring."""

    def __init__(
        self,
        directory: Path,
        *,
        options: ManagerOptions | None = None,
        controller_options: ControllerOptions | None = None,
    ) -> None:
        self.directory = directory
        self.pair = ClusterPair.start(directory)
        self.control: ClusterClient = load_config(str(self.pair.control_kubeconfig), qps=-1, burst=0)
        self.target: ClusterClient = load_config(str(self.pair.target_kubeconfig), qps=-1, burst=0)
        self.machines = self.control.resource(MACHINES)
        self.machine_sets = self.control.resource(MACHINE_SETS)
        self.deployments = self.control.resource(MACHINE_DEPLOYMENTS)
        self.nodes = self.target.resource(NODES)
        self.driver = FakeDriver()
        self.sim = NodeSimulator(self.target, self.driver, heartbeat_interval=3600.0, poll_interval=0.05)
        self.options = options or ManagerOptions(namespace=NS, machine_safety_overshooting_period=1.0)
        self.controller_options = controller_options or ControllerOptions(namespace=NS)
        self.manager: Manager | None = None
        self.broadcaster: EventBroadcaster | None = None
        self._manager_stop = threading.Event()
        self._manager_thread: threading.Thread | None = None
        self._controller_stop = threading.Event()
        self._controller_thread: threading.Thread | None = None
        self.controller: Controller | None = None
        self._setup_classes()

    def _setup_classes(self) -> None:
        self.control.resource(SECRETS).create(secret(), namespace=NS)
        classes = self.control.resource(MACHINE_CLASSES)
        for name in ("class-a", "class-b"):
            body = machine_class(name)
            body["metadata"]["namespace"] = NS
            classes.create(body, namespace=NS)

    # --- the machine side -------------------------------------------------------------------------

    def start_machine_side(self) -> None:
        self._controller_stop = threading.Event()
        self.controller = Controller(
            self.control, self.target, self.driver, self.controller_options, drainer=StubDrainer()
        )
        self._controller_thread = threading.Thread(
            target=self.controller.run, args=(4, self._controller_stop), daemon=True
        )
        self._controller_thread.start()
        self.sim.start()

    def stop_machine_side(self) -> None:
        self.sim.stop()
        self._controller_stop.set()
        if self._controller_thread is not None:
            self._controller_thread.join(30)

    # --- the manager ------------------------------------------------------------------------------

    def start_manager(self, workers: int = 4) -> Manager:
        self._manager_stop = threading.Event()
        self.broadcaster = EventBroadcaster()
        self.broadcaster.start_recording_to_sink(self.control)
        recorder = self.broadcaster.new_recorder("machine-controller-manager")
        self.manager = Manager(self.control, self.target, self.options, recorder=recorder)
        self._manager_thread = threading.Thread(
            target=self.manager.run, args=(workers, self._manager_stop), daemon=True
        )
        self._manager_thread.start()
        return self.manager

    def stop_manager(self) -> None:
        """Stop the manager at once (its writes in flight finish; nothing else runs)."""
        self._manager_stop.set()
        if self._manager_thread is not None:
            self._manager_thread.join(30)
            assert not self._manager_thread.is_alive()
        if self.broadcaster is not None:
            self.broadcaster.shutdown()
            self.broadcaster = None

    def events(self) -> list[tuple[str, str, str, str]]:
        """``(kind, name, reason, message)`` of the Events in the control cluster."""
        items = self.control.resource(EVENTS).list(namespace=NS)["items"]
        return [
            (
                e["involvedObject"]["kind"],
                e["involvedObject"]["name"],
                e.get("reason", ""),
                e.get("message", ""),
            )
            for e in items
        ]

    def start(self) -> None:
        self.start_machine_side()
        self.start_manager()

    def close(self) -> None:
        self.stop_manager()
        self.stop_machine_side()
        self.pair.close()

    # --- reading ---------------------------------------------------------------------------------

    def deployment(self, name: str = "pool") -> dict[str, Any]:
        return dict(self.deployments.get(name, namespace=NS))

    def get_deployment(self, name: str = "pool") -> dict[str, Any] | None:
        try:
            return self.deployment(name)
        except NotFound:
            return None

    def all_machines(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.machines.list(namespace=NS)["items"]]

    def all_sets(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.machine_sets.list(namespace=NS)["items"]]

    def running(self, class_name: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for m in self.all_machines()
            if o.text(m, "status", "currentStatus", "phase") == c.PHASE_RUNNING
            and not o.deletion_timestamp(m)
            and (class_name is None or o.text(m, "spec", "class", "name") == class_name)
        ]

    def settled(self, replicas: int, class_name: str = "class-a", name: str = "pool") -> bool:
        """Exactly ``replicas`` machines, all Running on ``class_name``, and the status says so."""
        machines = self.all_machines()
        if len(machines) != replicas or len(self.running(class_name)) != replicas:
            return False
        status = o.sub(self.deployment(name), "status")
        return (status.get("availableReplicas") or 0) == replicas and (
            status.get("updatedReplicas") or 0
        ) == replicas

    def update_deployment(
        self, change: Callable[[dict[str, Any]], None], name: str = "pool"
    ) -> dict[str, Any]:
        for _ in range(20):
            body = self.deployment(name)
            change(body)
            try:
                return dict(self.deployments.update(body, namespace=NS))
            except Exception as err:  # a conflict with the manager's own write: read again
                if (
                    "409" not in str(err)
                    and "modified" not in str(err)
                    and "Conflict" not in type(err).__name__
                ):
                    raise
        raise AssertionError("could not update the deployment")


class Monitor:
    """Checks roll-out bounds on every Machine event of its own watch (see the module docstring).

    ``bounds``: ``(max machines, min Running)``; ``None`` while no roll-out is being checked.
    A machine counts as Running when its phase is Running and it is not being deleted. It
    watches the Machines of ``env`` (a :class:`ManagerEnv`, namespace ``default``), or of the
    ``machines`` client in ``namespace`` that ``label_selector`` selects.
    """

    def __init__(
        self,
        env: ManagerEnv | None = None,
        *,
        machines: Any = None,
        namespace: str = NS,
        label_selector: str | None = None,
    ) -> None:
        self.machines = env.machines if env is not None else machines
        self.namespace = namespace
        self.label_selector = label_selector
        self.bounds: tuple[int, int] | None = None
        self.violations: list[str] = []
        self.max_seen = 0
        self.min_running_seen: int | None = None
        self.classes_seen: list[set[str]] = []
        """The classes of the machines at each event, while bounds are checked."""
        self._machines: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.stop()
        self._thread.join(10)

    def watch(self, max_machines: int, min_running: int) -> None:
        with self._lock:
            self.bounds = (max_machines, min_running)
            self.max_seen, self.min_running_seen = 0, None
            self.classes_seen = []
            self._check()

    def unwatch(self) -> None:
        with self._lock:
            self.bounds = None

    def _run(self) -> None:
        selector = {"label_selector": self.label_selector} if self.label_selector else {}
        listing = self.machines.list(namespace=self.namespace, **selector)
        with self._lock:
            self._machines = {o.name_of(m): dict(m) for m in listing["items"]}
        version = listing["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            stream = self.machines.watch(
                namespace=self.namespace, resource_version=version, timeout_seconds=5, **selector
            )
            with self._lock:
                self._stream = stream
            if self._stop.is_set():
                stream.stop()
            for event in stream:
                self._apply(event)
                version = o.meta(event.object).get("resourceVersion", version)
                if self._stop.is_set():
                    return

    def _apply(self, event: Any) -> None:
        obj = event.object or {}
        with self._lock:
            if event.type == "DELETED":
                self._machines.pop(o.name_of(obj), None)
            elif event.type in ("ADDED", "MODIFIED"):
                self._machines[o.name_of(obj)] = dict(obj)
            self._check()

    def _check(self) -> None:
        if self.bounds is None:
            return
        total = len(self._machines)
        running = sum(
            1
            for m in self._machines.values()
            if o.text(m, "status", "currentStatus", "phase") == c.PHASE_RUNNING
            and not o.deletion_timestamp(m)
        )
        self.max_seen = max(self.max_seen, total)
        self.min_running_seen = (
            running if self.min_running_seen is None else min(self.min_running_seen, running)
        )
        self.classes_seen.append({o.text(m, "spec", "class", "name") for m in self._machines.values()})
        maximum, minimum = self.bounds
        if total > maximum:
            self.violations.append(f"{total} machines > {maximum}")
        if running < minimum:
            self.violations.append(f"{running} Running < {minimum}")


def env_fixture(directory: Path) -> Iterator[ManagerEnv]:
    env = ManagerEnv(directory)
    try:
        yield env
    finally:
        env.close()

"""The interop fixture: mcm's and upstream's Go managers and machine controllers, as processes of
their own, on one emulated pair of clusters.

:class:`InteropEnv` holds a :class:`~mcm.emulator.ClusterPair` (in this process) with every CRD
of upstream's release (upstream's machine controller writes ``status.node``, which today's
CRDs prune, and upstream's manager also watches the provider-specific machine classes; mcm reads
and writes both sets), two MachineClasses (``class-a``, ``class-b``) on the fake provider, and a
:class:`~mcm.testing.nodesim.NodeSimulator` whose VMs are the Machines that have a provider ID:
it plays the kubelets for either machine controller, since neither driver's VMs are visible from
here (mcm's ``--driver=fake`` and upstream's in-memory driver both name a VM's Node after its
machine and give it the provider ID ``fake:///<machine>``).

The processes: :meth:`InteropEnv.start_controller` (``mcm``: the ``machine-controller`` command
with ``--driver=fake``; ``go``: upstream's ``machine-controller`` built by
``hack/upstream-mcm.sh``) and :meth:`InteropEnv.start_manager` (``mcm``: mcm's manager;
``go``: upstream's ``machine-controller-manager``), both the ``machine-controller-manager``
command. No leader election, so a manager can be
replaced by the other at once.

:class:`History` watches the Machines and MachineSets on its own watch: every name and UID ever
seen, the largest number of Machines at one time and the fewest Running ones, to check that a
manager taking over creates nothing it should not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from mcm.emulator import ClusterPair
from mcm.runtime import objects as o
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import Conflict, NotFound
from mcm.runtime.client.resources import EVENTS, NODES, SECRETS
from mcm.testing.chaos.processes import Managed, controller_command, free_port
from mcm.testing.nodesim import NodeSimulator, SimulatedVM

NS = "default"
TIMEOUT = 180.0
"""Seconds a step may take: generous, as the machine is shared and each side is a process."""
REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "upstream-mcm.sh"
HASH_LABEL = "machine-template-hash"
SIDES = ("mcm", "go")


@dataclass(frozen=True)
class Upstream:
    """Upstream's binaries and the CRDs of their release."""

    controller: Path
    manager: Path
    crds: Path


def manager_command() -> list[str]:
    """mcm's ``machine-controller-manager`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("machine-controller-manager")
    found = str(script) if script.exists() else shutil.which("machine-controller-manager")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from mcm.app.manager.cli import main; sys.exit(main())"]


def upstream_paths() -> Upstream:
    """Where ``hack/upstream-mcm.sh`` puts the binaries (built or not); ``MCM_UPSTREAM_DIR``
    names another directory holding both and ``crds/``."""
    directory = os.environ.get("MCM_UPSTREAM_DIR")
    if directory:
        base = Path(directory)
        return Upstream(base / "machine-controller", base / "machine-controller-manager", base / "crds")

    def ask(flag: str) -> Path:
        done = subprocess.run([str(BUILD_SCRIPT), flag], check=True, capture_output=True, text=True)
        return Path(done.stdout.strip())

    controller = ask("--path")
    return Upstream(controller, ask("--manager-path"), controller.parent / "crds")


def missing(upstream: Upstream) -> str | None:
    """Why the interop tests cannot run here, or ``None``."""
    for path in (upstream.controller, upstream.manager):
        if not os.access(path, os.X_OK):
            return f"{path} is not built (hack/upstream-mcm.sh builds it; it needs Go)"
    if not (upstream.crds / "machine.sapcloud.io_machinedeployments.yaml").is_file():
        return f"{upstream.crds} lacks the release's CRDs (hack/upstream-mcm.sh copies them)"
    return None


def eventually(predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached in {timeout:.0f}s"
        time.sleep(0.1)


def machine_deployment(
    name: str = "pool",
    replicas: int = 3,
    *,
    class_name: str = "class-a",
    max_surge: Any = 1,
    max_unavailable: Any = 0,
) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": 0,
            "revisionHistoryLimit": 2,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"name": name}},
            "template": {
                "metadata": {"labels": {"name": name}},
                "spec": {"class": {"kind": "MachineClass", "name": class_name}},
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
            },
        },
    }


def node_name(machine: Mapping[str, Any]) -> str:
    """The machine's Node: its ``node`` label, v0.47's ``status.node``, else its name."""
    return o.label(machine, c.LABEL_NODE) or o.text(machine, "status", "node") or o.name_of(machine)


class MachineVMs:
    """A VM source for the node simulator: one VM per Machine that has a provider ID and is not
    being deleted (the kubelet stops with the deletion: heartbeats end, the Node is left to the
    machine controller). :meth:`hold` keeps VMs that have not booted yet from booting until
    :meth:`release`."""

    def __init__(self, control: ClusterClient) -> None:
        self._factory = SharedInformerFactory(control, NS)
        self._lister = self._factory.lister(MACHINES)
        self._held: set[str] | None = None
        self._booted: set[str] = set()
        self._lock = threading.Lock()

    def start(self, stop: threading.Event) -> None:
        self._factory.start(stop)
        self._factory.wait_for_cache_sync(stop)

    def hold(self) -> None:
        with self._lock:
            self._held = set(self._booted)

    def release(self) -> None:
        with self._lock:
            self._held = None

    def __call__(self) -> list[SimulatedVM]:
        vms = []
        with self._lock:
            for machine in self._lister.list():
                provider_id = o.text(machine, "spec", "providerID")
                if not provider_id or o.deletion_timestamp(machine):
                    continue
                name = node_name(machine)
                boots = self._held is None or name in self._held
                if boots:
                    self._booted.add(name)
                vms.append(SimulatedVM(provider_id=provider_id, node_name=name, boots=boots))
        return vms


class History:
    """Every Machine and MachineSet seen on its own watches; see the module docstring."""

    def __init__(self, control: ClusterClient) -> None:
        self.lock = threading.Lock()
        self.machines: dict[str, dict[str, Any]] = {}
        self.machine_uids: set[str] = set()
        self.machine_set_uids: set[str] = set()
        self.max_machines = 0
        self.at_max: list[tuple[str, str, bool]] = []
        """``(name, phase, being deleted)`` of the machines when there were the most."""
        self.min_running: int | None = None
        self._factory = SharedInformerFactory(control, NS)
        handler = ResourceEventHandlerFuncs(
            on_add=self._machine, on_update=lambda _old, new: self._machine(new), on_delete=self._gone
        )
        self._factory.informer_for(MACHINES).add_event_handler(handler)
        self._factory.informer_for(MACHINE_SETS).add_event_handler(
            ResourceEventHandlerFuncs(on_add=self._machine_set)
        )

    def start(self, stop: threading.Event) -> None:
        self._factory.start(stop)
        self._factory.wait_for_cache_sync(stop)

    def reset_bounds(self) -> None:
        with self.lock:
            self.max_machines, self.min_running, self.at_max = 0, None, []
            self._count()

    def _machine(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            self.machines[o.name_of(obj)] = dict(obj)
            self.machine_uids.add(str(o.meta(obj).get("uid")))
            self._count()

    def _gone(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        with self.lock:
            self.machines.pop(o.name_of(obj), None)
            self._count()

    def _machine_set(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            self.machine_set_uids.add(str(o.meta(obj).get("uid")))

    def _count(self) -> None:
        running = sum(
            1
            for m in self.machines.values()
            if o.text(m, "status", "currentStatus", "phase") == c.PHASE_RUNNING
            and not o.deletion_timestamp(m)
        )
        if len(self.machines) > self.max_machines:
            self.max_machines = len(self.machines)
            self.at_max = [
                (name, o.text(m, "status", "currentStatus", "phase"), bool(o.deletion_timestamp(m)))
                for name, m in sorted(self.machines.items())
            ]
        self.min_running = running if self.min_running is None else min(self.min_running, running)


class InteropEnv:
    """See the module docstring."""

    def __init__(self, directory: Path, upstream: Upstream) -> None:
        self.directory = directory
        self.upstream = upstream
        self.pair = ClusterPair.start(directory, crds=upstream.crds)
        self.control: ClusterClient = load_config(str(self.pair.control_kubeconfig), qps=-1, burst=0)
        self.target: ClusterClient = load_config(str(self.pair.target_kubeconfig), qps=-1, burst=0)
        self.machines = self.control.resource(MACHINES)
        self.machine_sets = self.control.resource(MACHINE_SETS)
        self.deployments = self.control.resource(MACHINE_DEPLOYMENTS)
        self.nodes = self.target.resource(NODES)
        self._stop = threading.Event()
        self.vms = MachineVMs(self.control)
        self.vms.start(self._stop)
        self.history = History(self.control)
        self.history.start(self._stop)
        self.sim = NodeSimulator(self.target, self.vms, heartbeat_interval=3600.0, poll_interval=0.05)
        self.controller: Managed | None = None
        self.manager: Managed | None = None
        self._install_classes()

    def _install_classes(self) -> None:
        self.control.resource(SECRETS).create(
            {
                "metadata": {"name": "cloud-secret", "namespace": NS},
                "data": {"userData": "I2Nsb3VkLWNvbmZpZw=="},
            },
            namespace=NS,
        )
        for name in ("class-a", "class-b"):
            self.control.resource(MACHINE_CLASSES).create(
                {
                    "apiVersion": "machine.sapcloud.io/v1alpha1",
                    "kind": "MachineClass",
                    "metadata": {
                        "name": name,
                        "namespace": NS,
                        # both controllers' class finalizers, so neither waits to add its own
                        "finalizers": [c.MCM_FINALIZER, c.MC_FINALIZER],
                    },
                    "providerSpec": {"size": name},
                    "secretRef": {"name": "cloud-secret", "namespace": NS},
                    "provider": "fake",
                },
                namespace=NS,
            )

    # --- processes -------------------------------------------------------------------------------

    def _kubeconfig_flags(self) -> list[str]:
        return [
            f"--control-kubeconfig={self.pair.control_kubeconfig}",
            f"--target-kubeconfig={self.pair.target_kubeconfig}",
            f"--namespace={NS}",
            "--leader-elect=false",
        ]

    def _process(self, name: str, command: list[str]) -> Managed:
        process = Managed(name, command, dict(os.environ), self.directory / f"{name}.log")
        process.start()
        return process

    def start_controller(self, side: str) -> Managed:
        """The machine controller of ``side`` (``mcm`` or ``go``) and the node simulator."""
        port = free_port()
        if side == "go":
            command = [
                str(self.upstream.controller),
                *self._kubeconfig_flags(),
                f"--port={port}",
                "--address=127.0.0.1",
            ]
        else:
            command = [*controller_command(), *self._kubeconfig_flags(), "--driver=fake", f"--port={port}"]
        self.controller = self._process(f"{side}-controller", command)
        self.sim.start()
        return self.controller

    def start_manager(self, side: str) -> Managed:
        """The MachineSet/MachineDeployment manager of ``side`` (``mcm`` or ``go``)."""
        port = free_port()
        if side == "go":
            command = [
                str(self.upstream.manager),
                *self._kubeconfig_flags(),
                f"--port={port}",
                "--address=127.0.0.1",
            ]
        else:
            command = [*manager_command(), *self._kubeconfig_flags(), f"--port={port}", "--address=127.0.0.1"]
        assert self.manager is None or not self.manager.alive(), "one manager at a time"
        self.manager = self._process(f"{side}-manager", command)
        return self.manager

    def kill_manager(self) -> None:
        """SIGKILL the manager: whatever it was doing stops at once."""
        if self.manager is not None:
            self.manager.kill()
            assert self.manager.proc is not None
            self.manager.proc.wait(30)

    def logs(self) -> str:
        """The tail of each process's log (for assertion messages)."""
        parts = []
        for process in (self.controller, self.manager):
            if process is not None:
                parts.append(f"--- {process.name}\n" + "\n".join(process.log_tail(20)))
        return "\n".join(parts)

    def close(self) -> None:
        for process in (self.manager, self.controller):
            if process is not None:
                process.stop()
        self.sim.stop()
        self._stop.set()
        self.pair.close()

    # --- reading and writing ---------------------------------------------------------------------

    def deployment(self, name: str = "pool") -> dict[str, Any]:
        return dict(self.deployments.get(name, namespace=NS))

    def all_machines(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.machines.list(namespace=NS)["items"]]

    def all_sets(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.machine_sets.list(namespace=NS)["items"]]

    def events(self) -> list[dict[str, Any]]:
        return [dict(e) for e in self.control.resource(EVENTS).list(namespace=NS)["items"]]

    def settled(self, replicas: int, class_name: str = "class-a", name: str = "pool") -> bool:
        """Exactly ``replicas`` machines, all Running on ``class_name``, none being deleted, and the
        deployment's status says so."""
        machines = self.all_machines()
        running = [
            m
            for m in machines
            if o.text(m, "status", "currentStatus", "phase") == c.PHASE_RUNNING
            and not o.deletion_timestamp(m)
            and o.text(m, "spec", "class", "name") == class_name
        ]
        if len(machines) != replicas or len(running) != replicas:
            return False
        deployment = self.deployment(name)
        status = o.sub(deployment, "status")
        return (
            status.get("observedGeneration") == o.meta(deployment).get("generation")
            and (status.get("replicas") or 0) == replicas
            and (status.get("updatedReplicas") or 0) == replicas
            and (status.get("availableReplicas") or 0) == replicas
        )

    def update_deployment(self, change: Callable[[dict[str, Any]], None], name: str = "pool") -> None:
        for _ in range(50):
            body = self.deployment(name)
            change(body)
            try:
                self.deployments.update(body, namespace=NS)
                return
            except Conflict:
                continue
        raise AssertionError("could not update the deployment")

    def scale(self, replicas: int, name: str = "pool") -> None:
        self.update_deployment(lambda d: d["spec"].update(replicas=replicas), name)

    def roll_to(self, class_name: str, name: str = "pool") -> None:
        self.update_deployment(lambda d: d["spec"]["template"]["spec"]["class"].update(name=class_name), name)

    def node_gone(self, machine: Mapping[str, Any]) -> bool:
        try:
            self.nodes.get(node_name(machine))
        except NotFound:
            return True
        return False

"""The world a chaos run happens in: clusters, proxies, kubelets, the owner of the Machines.

:class:`World` starts, in this process:

- three API server emulators: ``control`` (Machine CRDs, the class and its secret), ``target``
  (Nodes) and ``cloud`` (the VM records of :mod:`~mcm.testing.chaos.cloud`), with the
  tracker hooked to their stores;
- a :class:`~mcm.testing.faultproxy.FaultProxy` per controller replica and cluster, and a
  kubeconfig per replica pointing at its proxies (the driver and the kubelets reach their
  clusters directly);
- the kubelets of every VM (:class:`~mcm.testing.nodesim.NodeSimulator`, fed straight from the
  cloud's store) and the node lifecycle controller's part (:meth:`World.stop_heartbeats` marks
  the Node ``Ready=Unknown`` as kube-controller-manager would);
- the bystander and the owner (:class:`Owner`), which plays the MachineSet: it keeps
  ``replicas`` Machines of its own (label :data:`OWNER_LABEL`), replaces Failed ones, and
  deletes some at random while a scenario's faults run ("churn"). It leaves other Machines
  alone (those of a MachineDeployment the manager scenarios run).

The owner and the bystander write straight to the emulators' stores: they are not under test
and no fault touches them.
"""

from __future__ import annotations

import base64
import itertools
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

from mcm.apis.machine import constants as c
from mcm.emulator import ClusterPair, Emulator
from mcm.emulator.kubeconfig import write_kubeconfig
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.errors import TransientError
from mcm.runtime.objects import Obj
from mcm.testing.chaos.bystander import Bystander
from mcm.testing.chaos.cloud import CLOUD_NAMESPACE, PROVIDER_PREFIX
from mcm.testing.chaos.tracker import Tracker
from mcm.testing.faultproxy import FaultProxy
from mcm.testing.nodesim import NodeSimulator, SimulatedVM

__all__ = ["CLASS_NAME", "NAMESPACE", "OWNER_LABEL", "SECRET_NAME", "Owner", "Replica", "World"]

NAMESPACE = "chaos"
OWNER_LABEL = "chaos.mcm.dev/owner"
"""The label (value ``owner``) of the Machines the :class:`Owner` keeps."""
CLASS_NAME = "chaos-class"
SECRET_NAME = "chaos-secret"
MACHINES = "machines.machine.sapcloud.io"


@dataclass
class Replica:
    """What one controller replica connects through."""

    index: int
    control_proxy: FaultProxy
    target_proxy: FaultProxy
    control_kubeconfig: Path
    target_kubeconfig: Path

    @property
    def proxies(self) -> list[FaultProxy]:
        return [self.control_proxy, self.target_proxy]


class World:
    """Clusters, proxies, kubelets, bystander and owner; see the module docstring."""

    def __init__(
        self, directory: Path, seed: int, *, replicas: int = 2, heartbeat_interval: float = 5.0
    ) -> None:
        self.directory = directory
        self.seed = seed
        self.tracker = Tracker(NAMESPACE)
        self.pair = ClusterPair.start(directory, controllers=True)
        self.control: Emulator = self.pair.control
        self.target: Emulator = self.pair.target
        self.cloud = Emulator(name="cloud", controllers=False).start()
        self.tracker.attach(self.control, self.target, self.cloud)
        self.cloud_kubeconfig = self.cloud.write_kubeconfig(directory / "cloud.kubeconfig")
        self.replicas = [self._replica(i) for i in range(replicas)]
        self._seed_objects()
        self.kubelet_client: ClusterClient = load_config(
            str(self.pair.target_kubeconfig), qps=-1, burst=0, user_agent_suffix="chaos-kubelet"
        )
        self.kubelets = NodeSimulator(
            self.kubelet_client,
            self.vms,
            boot_delay=0.5,
            heartbeat_interval=heartbeat_interval,
            poll_interval=0.25,
        ).start()
        self.bystander = Bystander(self.tracker, self.control, self.target, NAMESPACE, seed=seed)
        self.owner = Owner(self, seed)

    def _replica(self, index: int) -> Replica:
        proxies = [
            FaultProxy(
                (emu.host, emu.port), seed=self.seed + 10 * index + n, name=f"r{index}-{emu.name}"
            ).start()
            for n, emu in enumerate((self.control, self.target))
        ]
        files = [
            write_kubeconfig(
                self.directory / f"r{index}-{name}.kubeconfig",
                name,
                proxy.url,
                namespace=NAMESPACE if name == "control" else None,
            )
            for name, proxy in zip(("control", "target"), proxies, strict=True)
        ]
        return Replica(index, proxies[0], proxies[1], files[0], files[1])

    @property
    def proxies(self) -> list[FaultProxy]:
        """Every proxy of every replica."""
        return [p for r in self.replicas for p in r.proxies]

    def _seed_objects(self) -> None:
        self.control.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        self.cloud.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CLOUD_NAMESPACE}}])
        user_data = base64.b64encode(b"#!/bin/sh\necho <<BOOTSTRAP_TOKEN>> <<MACHINE_NAME>>\n").decode()
        self.control.seed(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": SECRET_NAME, "namespace": NAMESPACE},
                    "data": {"userData": user_data},
                },
                {
                    "apiVersion": "machine.sapcloud.io/v1alpha1",
                    "kind": "MachineClass",
                    "metadata": {"name": CLASS_NAME, "namespace": NAMESPACE},
                    "providerSpec": {"flavour": "chaos"},
                    "secretRef": {"name": SECRET_NAME, "namespace": NAMESPACE},
                    "provider": "chaos",
                },
            ]
        )

    def start(self) -> None:
        """Start the bystander and the owner."""
        self.bystander.start()
        self.owner.start()

    def close(self) -> None:
        """Stop everything this world started."""
        self.owner.stop()
        self.bystander.stop()
        self.kubelets.stop()
        self.kubelet_client.close()
        for proxy in self.proxies:
            proxy.close()
        self.tracker.detach()
        self.cloud.close()
        self.pair.close()

    # --- the cloud and its kubelets -------------------------------------------------------------

    def vms(self) -> list[SimulatedVM]:
        """The VMs that exist now (the kubelets' source)."""
        return [
            SimulatedVM(
                provider_id=f"{PROVIDER_PREFIX}{record['metadata']['name']}",
                node_name=record["metadata"]["name"],
            )
            for record in self.cloud.list("configmaps", CLOUD_NAMESPACE)
        ]

    def stop_heartbeats(self, node: str) -> bool:
        """The node's kubelet dies; the node lifecycle controller marks it ``Ready=Unknown``.
        False when the node's VM is gone meanwhile (its kubelet has already stopped) or the
        target cluster did not take the write (a fault of another program of the mix)."""
        try:
            self.kubelets.stop_heartbeats(node)
            self.kubelets.set_condition(
                node, "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            )
        except (KeyError, TransientError):  # its VM gone meanwhile; the target paused or restarted
            return False
        self.tracker.record("fault", "heartbeats", node, action="stopped")
        return True

    # --- reads ----------------------------------------------------------------------------------

    def machines(self) -> list[Obj]:
        return self.control.list(MACHINES, NAMESPACE)

    def nodes(self) -> dict[str, Obj]:
        return {n["metadata"]["name"]: n for n in self.target.list("nodes")}


def phase_of(machine: Obj) -> str:
    return str(((machine.get("status") or {}).get("currentStatus") or {}).get("phase") or "")


def owned(machine: Obj) -> bool:
    """Whether ``machine`` is one of the :class:`Owner`'s."""
    return ((machine.get("metadata") or {}).get("labels") or {}).get(OWNER_LABEL) == "owner"


def _ready(node: Obj | None) -> bool:
    if node is None or (node.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(x.get("type") == "Ready" and x.get("status") == "True" for x in conditions)


@dataclass
class Owner:
    """The MachineSet stand-in: keeps ``replicas`` Machines, replaces Failed ones, churns."""

    world: World
    seed: int
    replicas: int = 4
    churn: float = 0.0
    """Deletions per second of a random live Machine (while a scenario's faults run)."""
    interval: float = 0.5
    created: int = 0
    deleted: int = 0
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _random: random.Random = field(init=False)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed * 7919)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="chaos-owner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception as exc:  # a write racing with the controller: next step tries again
                self.world.tracker.record("owner", "error", error=f"{type(exc).__name__}: {exc}")

    def step(self) -> None:
        """Delete its Failed Machines, churn, and create Machines up to ``replicas``."""
        with self._lock:
            live = [
                m for m in self.world.machines() if owned(m) and not m["metadata"].get("deletionTimestamp")
            ]
            for machine in live:
                if phase_of(machine) == c.PHASE_FAILED:
                    self.delete(machine["metadata"]["name"], "failed")
            live = [m for m in live if phase_of(m) != c.PHASE_FAILED]
            if self.churn > 0 and live and self._random.random() < self.churn * self.interval:
                victim = self._random.choice(live)["metadata"]["name"]
                self.delete(victim, "churn")
                live = [m for m in live if m["metadata"]["name"] != victim]
            for _ in range(self.replicas - len(live)):
                self.create()

    def create(self) -> str:
        name = f"m{next(self._names):04d}-{self._random.randrange(16**4):04x}"
        body = {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {OWNER_LABEL: "owner"}},
            "spec": {"class": {"kind": "MachineClass", "name": CLASS_NAME}},
        }
        self.world.control.seed([body])
        self.created += 1
        self.world.tracker.record("owner", "create", name)
        return name

    def delete(self, name: str, why: str) -> None:
        rt = self.world.control.resource_type(MACHINES)
        self.world.control.storage.delete(rt, NAMESPACE, name)
        self.deleted += 1
        self.world.tracker.record("owner", "delete", name, why=why)

    def pending(self) -> list[tuple[str, str]]:
        """Why the world has not converged: ``(machine, VM or node name, what is wrong)`` per
        problem; empty when the owner has ``replicas`` live Machines, every live Machine (its
        own or not) is Running on a Ready Node with exactly one VM, no deletion is in progress
        and nothing is left over."""
        problems: list[tuple[str, str]] = []
        machines = self.world.machines()
        nodes = self.world.nodes()
        vms = {v.node_name for v in self.world.vms()}
        live = [m for m in machines if not m["metadata"].get("deletionTimestamp")]
        mine = sum(1 for m in live if owned(m))
        if mine != self.replicas:
            problems.append(("owner", f"{mine} live machines, want {self.replicas}"))
        for machine in machines:
            name = machine["metadata"]["name"]
            if machine["metadata"].get("deletionTimestamp"):
                problems.append((name, f"still being deleted ({_describe(machine)})"))
                continue
            node_name = (machine["metadata"].get("labels") or {}).get(c.LABEL_NODE, "")
            if phase_of(machine) != c.PHASE_RUNNING or not _ready(nodes.get(node_name)):
                problems.append((name, f"not Running on a Ready node ({_describe(machine)})"))
        wanted = {(m["metadata"].get("labels") or {}).get(c.LABEL_NODE, "") for m in live}
        problems += [(vm, "VM: no live Machine uses it") for vm in sorted(vms - wanted)]
        problems += [(node, "Node: no live Machine uses it") for node in sorted(set(nodes) - wanted)]
        return problems


def _describe(machine: Obj) -> str:
    operation = (machine.get("status") or {}).get("lastOperation") or {}
    state, description = operation.get("state", ""), operation.get("description", "")
    return f"phase={phase_of(machine) or '-'} last={state}: {description}"

"""A node simulator: kubelets for VMs that do not exist, registering Nodes in a target cluster.

Given a target :class:`~mcm.runtime.client.ClusterClient` and a source of VMs, a
:class:`NodeSimulator` plays the kubelet of every VM:

- **registration**: a VM that has booted (``boot_delay`` after it appeared, by the injectable
  clock; never if ``SimulatedVM.boots`` is false) gets a Node named ``node_name`` with
  ``spec.providerID``, ``status.addresses``, ``status.capacity``/``allocatable`` and the
  kubelet's conditions (``Ready`` True, the pressure conditions False). A Node that already
  exists is adopted. A Node deleted while its VM still runs is registered again on the pass
  after a heartbeat found it gone, as a kubelet does, unless the test made it :meth:`vanish`.
- **heartbeats**: every ``heartbeat_interval`` the owned conditions get a fresh
  ``lastHeartbeatTime`` through a strategic-merge patch of ``nodes/status`` keyed by condition
  type, so labels, taints and conditions written by others (the controller's ``Terminating``
  condition) are never overwritten.
- **pod termination** (``finish_pods=True``): a pod bound to a node the simulator plays that is
  being deleted gracefully (``deletionTimestamp`` set) is deleted with grace period 0 on the
  next pass, as its kubelet does once the containers have stopped (simulated containers stop
  at once). kube-apiserver leaves this to the kubelet: without it such pods stay Terminating.
- **VM gone**: heartbeats stop; the Node is left for the machine controller to delete (as with
  a real cloud, where nobody deletes it for you).
- **test hooks**: :meth:`set_ready`, :meth:`set_condition`, :meth:`stop_heartbeats`,
  :meth:`resume_heartbeats`, :meth:`vanish` and :meth:`reappear` change one node; each writes at
  once (no wait for the next pass).

The VM source is a callable returning :class:`SimulatedVM` records (or mappings with the same
keys), a :class:`~mcm.driver.FakeDriver` (its in-memory VMs), or any driver together with the
machine classes to list (``ListMachines``; node name = machine name). :meth:`sync` runs one pass
and is what tests with a :class:`~mcm.runtime.clock.FakeClock` call; :meth:`start` runs passes
every ``poll_interval`` in a background thread until :meth:`stop`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from mcm.apis.machine.v1alpha1 import MachineClass, NodeAddress
from mcm.driver.context import CallContext
from mcm.driver.driver import Driver, ListMachinesRequest
from mcm.driver.errors import MachineError
from mcm.driver.fake import FakeDriver
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import AlreadyExists, ApiError, Conflict, ConnectionFailed, NotFound
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = [
    "DEFAULT_CAPACITY",
    "KUBELET_CONDITIONS",
    "KUBELET_VERSION",
    "NodeSimulator",
    "SimulatedVM",
    "VMSource",
    "driver_vms",
]

KUBELET_VERSION = "v1.37.2"
"""The kubelet version simulated Nodes report: the release the real-API tier runs (a kubelet
older than the API server by more than the supported skew would be refused by a real cluster).
"""

log = structlog.get_logger(__name__)

DEFAULT_CAPACITY: Mapping[str, str] = {"cpu": "2", "memory": "4Gi", "pods": "110"}
"""Capacity of a simulated node whose VM names none."""

KUBELET_CONDITIONS: Mapping[str, tuple[str, str, str]] = {
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}
"""The conditions a healthy kubelet reports: type → (status, reason, message)."""


@dataclass(frozen=True)
class SimulatedVM:
    """What the simulator needs to know of one VM."""

    provider_id: str
    node_name: str
    addresses: tuple[NodeAddress, ...] = ()
    capacity: Mapping[str, str] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    boots: bool = True
    """False: the VM never registers its Node (a boot that never completes)."""
    boot_delay: float | None = None
    """Seconds from first sight to registration; ``None`` takes the simulator's default. Read
    once, when the simulator first sees the VM."""

    @classmethod
    def of(cls, value: SimulatedVM | Mapping[str, Any]) -> SimulatedVM:
        """Accept a record or a mapping with the same keys (``addresses`` as dicts or models)."""
        if isinstance(value, SimulatedVM):
            return value
        data = dict(value)
        data["addresses"] = tuple(_address(a) for a in data.get("addresses") or ())
        return cls(**data)


def _address(value: NodeAddress | Mapping[str, Any]) -> NodeAddress:
    if isinstance(value, NodeAddress):
        return value
    return NodeAddress(type=value.get("type"), address=value.get("address"))


VMSource = Callable[[], Iterable[SimulatedVM | Mapping[str, Any]]]
"""Returns the VMs that exist now."""


def driver_vms(
    driver: Driver,
    machine_classes: Sequence[tuple[MachineClass, Mapping[str, bytes]]] = (),
    *,
    timeout: float = 30.0,
) -> VMSource:
    """A VM source for a driver: a FakeDriver's in-memory VMs, else ``list_machines`` per class."""
    if isinstance(driver, FakeDriver):
        fake = driver

        def fake_vms() -> list[SimulatedVM]:
            return [SimulatedVM(vm.provider_id, vm.node_name, vm.addresses) for vm in fake.vms.values()]

        return fake_vms

    def listed_vms() -> list[SimulatedVM]:
        vms: dict[str, SimulatedVM] = {}
        for machine_class, secret_data in machine_classes:
            response = driver.list_machines(
                CallContext.with_timeout(timeout), ListMachinesRequest(machine_class, secret_data)
            )
            for provider_id, machine_name in response.machine_list.items():
                vms[provider_id] = SimulatedVM(provider_id, machine_name)
        return list(vms.values())

    return listed_vms


@dataclass
class _NodeState:
    """What the simulator tracks per node it plays the kubelet of."""

    vm: SimulatedVM
    boot_at: float
    """Monotonic reading at which the node registers (first sight plus the boot delay)."""
    conditions: dict[str, tuple[str, str, str]] = field(default_factory=lambda: dict(KUBELET_CONDITIONS))
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Condition type → (status, lastTransitionTime) as last written."""
    registered: bool = False
    present: bool = False
    """Whether the Node is believed to exist (set on registration, cleared by a 404)."""
    heartbeats: bool = True
    vanished: bool = False
    last_heartbeat: float | None = None


class NodeSimulator:
    """Registers and heartbeats a Node per VM of ``source``; see the module docstring."""

    def __init__(
        self,
        target: ClusterClient,
        source: VMSource | Driver,
        *,
        machine_classes: Sequence[tuple[MachineClass, Mapping[str, bytes]]] = (),
        clock: Clock = REAL_CLOCK,
        boot_delay: float = 0.0,
        heartbeat_interval: float = 10.0,
        poll_interval: float = 1.0,
        labels: Mapping[str, str] | None = None,
        finish_pods: bool = False,
    ) -> None:
        self.target = target
        self.finish_pods = finish_pods
        self.source: VMSource = driver_vms(source, machine_classes) if isinstance(source, Driver) else source
        self.clock = clock
        self.boot_delay = boot_delay
        self.heartbeat_interval = heartbeat_interval
        self.poll_interval = poll_interval
        self.labels = dict(labels or {})
        self._nodes = target.resource(NODES)
        self._pods = target.resource(PODS)
        self._lock = threading.RLock()
        self._states: dict[str, _NodeState] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> NodeSimulator:
        """Run :meth:`sync` every ``poll_interval`` in a daemon thread."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="node-simulator", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the background passes (nodes stay as they are)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> NodeSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception:
                log.exception("node_simulator_pass_failed")
            self.clock.wait(self._stop, self.poll_interval)

    # --- one pass -------------------------------------------------------------------------------

    def sync(self) -> None:
        """One pass: list the VMs, register booted ones, heartbeat the due ones."""
        vms = {vm.node_name: vm for vm in (SimulatedVM.of(v) for v in self._list_vms())}
        now = self.clock.monotonic()
        with self._lock:
            for name in [n for n in self._states if n not in vms]:
                log.info("vm_gone_heartbeats_stop", node=name)
                del self._states[name]
            for name, vm in vms.items():
                state = self._states.get(name)
                if state is None:
                    delay = self.boot_delay if vm.boot_delay is None else vm.boot_delay
                    state = self._states[name] = _NodeState(vm, now + delay)
                state.vm = vm
        for name in list(vms):
            self._sync_node(name, now)
        if self.finish_pods:
            self.finish_pod_terminations()

    def _list_vms(self) -> Iterable[SimulatedVM | Mapping[str, Any]]:
        try:
            return list(self.source())
        except (MachineError, ApiError, ConnectionFailed) as exc:
            log.warning("vm_list_failed_known_nodes_kept", error=str(exc))
            with self._lock:
                return [s.vm for s in self._states.values()]

    def _sync_node(self, name: str, now: float) -> None:
        with self._lock:
            state = self._states.get(name)
            if state is None or state.vanished or not state.vm.boots:
                return
            if now < state.boot_at:
                return
            due = state.last_heartbeat is None or now - state.last_heartbeat >= self.heartbeat_interval
        try:
            if not state.present:
                self._register(state)
            elif due and state.heartbeats:
                self._heartbeat(state)
            else:
                return
        except NotFound:
            state.present = False  # deleted under us: the next pass registers it if the VM lives
            return
        except (ApiError, ConnectionFailed) as exc:
            log.warning("node_write_failed_will_retry", node=name, error=str(exc))
            return
        state.last_heartbeat = now

    def finish_pod_terminations(self) -> int:
        """Delete with grace period 0 every terminating pod bound to a node this simulator
        plays (registered, not vanished); returns how many it deleted."""
        with self._lock:
            nodes = {n for n, s in self._states.items() if s.present and not s.vanished}
        if not nodes:
            return 0
        try:
            pods = self._pods.list().get("items") or []
        except (ApiError, ConnectionFailed) as exc:
            log.warning("pod_list_failed_will_retry", error=str(exc))
            return 0
        finished = 0
        for pod in pods:
            meta = pod.get("metadata") or {}
            if not meta.get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName") not in nodes:
                continue
            try:
                self._pods.delete(
                    meta["name"],
                    namespace=meta["namespace"],
                    grace_period_seconds=0,
                    preconditions={"uid": meta["uid"]},
                )
            except (NotFound, Conflict):
                continue  # gone already, or a new pod of the same name
            except (ApiError, ConnectionFailed) as exc:
                log.warning("pod_termination_finish_failed", pod=meta["name"], error=str(exc))
                continue
            finished += 1
            log.info(
                "pod_terminated", pod=meta["name"], namespace=meta["namespace"], node=pod["spec"]["nodeName"]
            )
        return finished

    # --- writes ---------------------------------------------------------------------------------

    def _conditions(self, state: _NodeState) -> list[dict[str, Any]]:
        now = _timestamp(self.clock)
        result = []
        for ctype, (status, reason, message) in state.conditions.items():
            previous = state.transitions.get(ctype)
            transition = previous[1] if previous is not None and previous[0] == status else now
            state.transitions[ctype] = (status, transition)
            result.append(
                {
                    "type": ctype,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": transition,
                }
            )
        return result

    def _register(self, state: _NodeState) -> None:
        vm = state.vm
        capacity = dict(vm.capacity or DEFAULT_CAPACITY)
        labels = {"kubernetes.io/hostname": vm.node_name, "kubernetes.io/os": "linux", **self.labels}
        labels.update(vm.labels)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": vm.node_name, "labels": labels},
            "spec": {"providerID": vm.provider_id},
            "status": {
                "addresses": [{"type": a.type, "address": a.address} for a in vm.addresses],
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": self._conditions(state),
                "nodeInfo": {
                    "kubeletVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }
        try:
            created = self._nodes.create(node)
        except AlreadyExists:  # e.g. registered by an earlier simulator: adopt it
            self._heartbeat(state)
            state.registered = state.present = True
            return
        if not created.get("status", {}).get("conditions"):
            self._nodes.patch(
                vm.node_name, {"status": node["status"]}, kind="strategic", subresource="status"
            )
        state.registered = state.present = True
        log.info("node_registered", node=vm.node_name, provider_id=vm.provider_id)

    def _heartbeat(self, state: _NodeState) -> None:
        body = {"status": {"conditions": self._conditions(state)}}
        self._nodes.patch(state.vm.node_name, body, kind="strategic", subresource="status")

    def _write_now(self, name: str) -> None:
        with self._lock:
            state = self._states.get(name)
        if state is None or state.vanished:
            return
        if not state.present:
            return
        try:
            self._heartbeat(state)
        except NotFound:
            state.present = False
            return
        state.last_heartbeat = self.clock.monotonic()

    def _state(self, name: str) -> _NodeState:
        with self._lock:
            state = self._states.get(name)
            if state is None:
                raise KeyError(f"the simulator has no VM with node {name!r} (run sync() first)")
            return state

    # --- test hooks -----------------------------------------------------------------------------

    def set_ready(
        self, name: str, ready: bool = True, *, reason: str | None = None, message: str = ""
    ) -> None:
        """Report ``Ready`` True, or False (kubelet reporting NotReady) from now on."""
        if ready:
            self.set_condition(name, "Ready", *KUBELET_CONDITIONS["Ready"])
        else:
            self.set_condition(name, "Ready", "False", reason or "KubeletNotReady", message or "simulated")

    def set_condition(self, name: str, ctype: str, status: str, reason: str = "", message: str = "") -> None:
        """Report condition ``ctype`` with ``status`` from now on (e.g. ``ReadonlyFilesystem`` True)."""
        state = self._state(name)
        with self._lock:
            state.conditions[ctype] = (status, reason or f"Simulated{ctype}", message)
        self._write_now(name)

    def stop_heartbeats(self, name: str) -> None:
        """Freeze the node's conditions as last written (a dead kubelet)."""
        self._state(name).heartbeats = False

    def resume_heartbeats(self, name: str) -> None:
        """Heartbeat the node again from the next pass on."""
        state = self._state(name)
        state.heartbeats = True
        state.last_heartbeat = None

    def vanish(self, name: str) -> None:
        """Delete the Node and never register it again while its VM lives (until :meth:`reappear`)."""
        state = self._state(name)
        state.vanished = True
        state.present = False
        try:
            self._nodes.delete(name)
        except NotFound:
            pass

    def reappear(self, name: str) -> None:
        """Undo :meth:`vanish`: the next pass registers the node again."""
        state = self._state(name)
        state.vanished = False
        state.last_heartbeat = None

    @property
    def node_names(self) -> list[str]:
        """Names of the nodes of the VMs known by the last pass."""
        with self._lock:
            return sorted(self._states)

    def registered(self, name: str) -> bool:
        """Whether the simulator has registered ``name`` (at least once)."""
        with self._lock:
            state = self._states.get(name)
            return state is not None and state.registered


def _timestamp(clock: Clock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")

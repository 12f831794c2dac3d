"""Record every API request the ``machine-controller-manager`` command makes, per cluster, in one run.

:func:`record` starts a control and a target emulator (each logging its requests), runs the
command's :func:`mcm.app.manager.runner.run` against them, and walks a scenario that reaches every
code path of the manager that talks to an API server: start-up and leader election; a
MachineDeployment created (its finalizer, a MachineSet with its finalizer, Machines, status
writes); a template field copied onto the machines in place; a roll-out to another class (node
taints, one taint write answered 409 and retried after a live read; autoscaler annotations put on
and taken off by merge patches; the old set deleted by the history limit); a scale-down (the
deleted machine marked Terminating by the manager, the set's status write answered 409 and retried
after a live read); an orphan Machine adopted and the surplus deleted; a Machine released; an
orphan MachineSet adopted by the deployment; a repeated Warning (its Event patched); the deployment
deleted with its sets and machines. The machine side (mcm's machine controller with the fake
driver, and the node simulator) runs in this process with the fixture's clients; the fixture's
requests carry the user agent suffix ``rbac-fixture`` and are left out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from mcm.app.manager.options import ManagerCommandOptions
from mcm.app.manager.runner import COMPONENT, run
from mcm.controller import Controller, ControllerOptions
from mcm.driver import FakeDriver
from mcm.emulator import Emulator
from mcm.emulator.cluster import default_crd_dir
from mcm.runtime import objects as o
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, NAMESPACES, NODES, SECRETS
from mcm.testing.nodesim import NodeSimulator
from tests.app.rbac_scenario import FIXTURE, Request, _free_port, eventually, requests_in
from tests.controller.fixtures import StubDrainer, machine_class, secret
from tests.manager.cluster import md

NS = "machines"


class ManagerScenario:
    """The two clusters, the machine side, the fixture's clients and the running command."""

    def __init__(self, directory: Path) -> None:
        self.logs = {"control": directory / "control.jsonl", "target": directory / "target.jsonl"}
        self.control_emulator = Emulator(name="control", log_file=self.logs["control"])
        self.target_emulator = Emulator(name="target", log_file=self.logs["target"])
        self.control_emulator.start()
        self.target_emulator.start()
        self.control_emulator.install_crds([default_crd_dir()])
        self.kubeconfigs = {
            "control": self.control_emulator.write_kubeconfig(directory / "control.kubeconfig", namespace=NS),
            "target": self.target_emulator.write_kubeconfig(directory / "target.kubeconfig"),
        }
        self.control = self._client("control")
        self.target = self._client("target")
        self.deployments = self.control.resource(MACHINE_DEPLOYMENTS)
        self.machine_sets = self.control.resource(MACHINE_SETS)
        self.machines = self.control.resource(MACHINES)
        self.driver = FakeDriver()
        self.stop = threading.Event()
        self.exit_code: int | None = None
        self._stoppers: list[Callable[[], None]] = []

    def _client(self, cluster: str) -> ClusterClient:
        return load_config(str(self.kubeconfigs[cluster]), qps=-1, burst=0, user_agent_suffix=FIXTURE)

    def options(self) -> ManagerCommandOptions:
        return ManagerCommandOptions.defaults(
            control_kubeconfig=str(self.kubeconfigs["control"]),
            target_kubeconfig=str(self.kubeconfigs["target"]),
            namespace=NS,
            address="127.0.0.1",
            port=_free_port(),
            machine_safety_overshooting_period=1.0,
            shutdown_grace_period=5.0,
        )

    def start(self) -> None:
        """The machine side (fixture clients), then the command in a thread."""
        controller = Controller(
            self.control, self.target, self.driver, ControllerOptions(namespace=NS), drainer=StubDrainer()
        )
        machine_stop = threading.Event()
        machine_side = threading.Thread(target=controller.run, args=(4, machine_stop), daemon=True)
        machine_side.start()
        sim = NodeSimulator(self.target, self.driver, heartbeat_interval=3600.0, poll_interval=0.05).start()
        self._stoppers += [sim.stop, lambda: (machine_stop.set(), machine_side.join(30))]
        options = self.options()

        def command() -> None:
            self.exit_code = run(options, stop=self.stop, really_crash=False)

        thread = threading.Thread(target=command, daemon=True)
        thread.start()
        self._stoppers.insert(0, lambda: (self.stop.set(), thread.join(30)))

    def close(self) -> None:
        for stopper in self._stoppers:
            stopper()
        self.control_emulator.close()
        self.target_emulator.close()

    def recorded(self) -> dict[str, set[Request]]:
        return {cluster: requests_in(path) for cluster, path in self.logs.items()}

    def eventually(self, predicate: Callable[[], Any], what: str) -> Any:
        """:func:`eventually`, failing at once when the command has exited."""

        def running_and() -> Any:
            if self.exit_code is not None:
                raise AssertionError(f"{what}: the command exited with {self.exit_code}")
            return predicate()

        return eventually(running_and, what)

    # --- reading and writing --------------------------------------------------------------------

    def all_machines(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.machines.list(namespace=NS)["items"]]

    def running(self, class_name: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.all_machines()
            if o.text(m, "status", "currentStatus", "phase") == c.PHASE_RUNNING
            and not o.deletion_timestamp(m)
            and o.text(m, "spec", "class", "name") == class_name
        ]

    def settled(self, replicas: int, class_name: str) -> bool:
        machines = self.all_machines()
        if len(machines) != replicas or len(self.running(class_name)) != replicas:
            return False
        status = o.sub(self.deployments.get("pool", namespace=NS), "status")
        return status.get("availableReplicas") == replicas == status.get("updatedReplicas")

    def update_deployment(self, change: Callable[[dict[str, Any]], None], name: str = "pool") -> None:
        for _ in range(20):
            body = dict(self.deployments.get(name, namespace=NS))
            change(body)
            try:
                self.deployments.update(body, namespace=NS)
                return
            except Exception as err:  # a conflict with the manager's own write: read again
                if "409" not in str(err) and "Conflict" not in type(err).__name__:
                    raise
        raise AssertionError("could not update the deployment")

    def sets(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self.machine_sets.list(namespace=NS)["items"]]


def _deployment(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    body = md(name, replicas, **spec)
    body["metadata"]["namespace"] = NS
    return body


def _setup(s: ManagerScenario) -> None:
    s.control.resource(NAMESPACES).create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    s.control.resource(SECRETS).create({**secret(), "metadata": {"name": "cloud-secret", "namespace": NS}})
    for name in ("class-a", "class-b"):
        body = machine_class(name)
        body["metadata"]["namespace"] = NS
        body["secretRef"]["namespace"] = NS
        s.control.resource(MACHINE_CLASSES).create(body, namespace=NS)


def _create_and_propagate(s: ManagerScenario) -> None:
    """A deployment of 2 Running machines; then a node template change copied onto them."""
    s.deployments.create(_deployment("pool", 2, revisionHistoryLimit=0), namespace=NS)
    s.eventually(lambda: s.settled(2, "class-a"), "2 Running machines")
    labels = {"pool": "blue"}
    s.update_deployment(
        lambda d: d["spec"]["template"]["spec"].update(nodeTemplate={"metadata": {"labels": labels}})
    )
    s.eventually(
        lambda: all(
            o.sub(m, "spec", "nodeTemplate", "metadata").get("labels") == labels for m in s.all_machines()
        ),
        "the node template on every machine",
    )


def _roll(s: ManagerScenario) -> None:
    """A roll-out to class-b: old nodes tainted (one taint write answered 409, so the manager
    reads the node again) and annotated (merge patches), the old set deleted once empty."""
    s.target_emulator.faults.add(code=409, verb="update", resource="nodes", user_agent=COMPONENT)
    s.update_deployment(lambda d: d["spec"]["template"]["spec"]["class"].update(name="class-b"))
    s.eventually(lambda: s.settled(2, "class-b") and len(s.sets()) == 1, "rolled to class-b, old set gone")

    def annotations_gone() -> bool:
        nodes = s.target.resource(NODES).list()["items"]
        return not any(
            "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm" in o.annotations_of(n)
            for n in nodes
        )

    s.eventually(annotations_gone, "the autoscaler annotations removed after the roll-out")


def _scale_down_with_a_conflict(s: ManagerScenario) -> None:
    """A scale-down: the manager marks the machine it deletes Terminating (the machine controller,
    whose status writes fail for the moment, has not yet), and its set's status write conflicts."""
    s.control_emulator.faults.add(
        code=409, verb="update", resource="machinesets", subresource="status", user_agent=COMPONENT
    )
    held = s.control_emulator.faults.add(
        code=500, times=None, verb="update", resource="machines", subresource="status", user_agent=FIXTURE
    )
    s.update_deployment(lambda d: d["spec"].update(replicas=1))
    s.eventually(
        lambda: any(o.text(m, "status", "currentStatus", "phase") == "Terminating" for m in s.all_machines()),
        "the deleted machine marked Terminating by the manager",
    )
    s.control_emulator.faults.remove(held)
    s.eventually(lambda: s.settled(1, "class-b"), "scaled down to 1")


def _adopt_and_release_machines(s: ManagerScenario) -> None:
    """An orphan Machine with the set's labels is adopted (the surplus then deleted); a machine
    whose labels stop matching is released (and replaced)."""
    (machine_set,) = s.sets()
    labels = o.labels_of(o.sub(machine_set, "spec", "template"))
    orphan = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "orphan", "namespace": NS, "labels": labels},
        "spec": {"class": {"kind": "MachineClass", "name": "class-b"}},
    }
    s.machines.create(orphan, namespace=NS)

    def adopted() -> bool:
        try:
            return bool(o.meta(s.machines.get("orphan", namespace=NS)).get("ownerReferences"))
        except NotFound:
            return True

    s.eventually(adopted, "the orphan adopted")
    s.eventually(lambda: s.settled(1, "class-b"), "the surplus machine deleted")
    (kept,) = s.all_machines()
    name = o.name_of(kept)
    s.machines.patch(name, {"metadata": {"labels": {"name": "elsewhere"}}}, namespace=NS)
    s.eventually(lambda: not o.meta(s.machines.get(name, namespace=NS)).get("ownerReferences"), "released")
    s.machines.delete(name, namespace=NS)
    s.eventually(lambda: s.settled(1, "class-b"), "the released machine replaced")


def _adopt_a_machine_set(s: ManagerScenario) -> None:
    """An orphan MachineSet matching the deployment's selector is adopted, labelled with its hash
    and, an old set without machines, deleted by the history limit."""
    stray = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineSet",
        "metadata": {"name": "stray", "namespace": NS, "labels": {"name": "pool"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"name": "pool", "stray": "yes"}},
            "template": {
                "metadata": {"labels": {"name": "pool", "stray": "yes"}},
                "spec": {"class": {"kind": "MachineClass", "name": "class-a"}},
            },
        },
    }
    s.machine_sets.create(stray, namespace=NS)

    def adopted_then_deleted() -> bool:
        try:
            return bool(o.meta(s.machine_sets.get("stray", namespace=NS)).get("deletionTimestamp"))
        except NotFound:
            return True

    s.eventually(adopted_then_deleted, "the orphan set adopted and deleted")
    s.eventually(lambda: len(s.sets()) == 1, "the orphan set gone")


def _repeated_warning(s: ManagerScenario) -> None:
    """An invalid deployment made invalid in another way, then in the first way again: the first
    Warning again, so its Event is patched."""

    def invalid() -> list[dict[str, Any]]:
        events = s.control.resource(EVENTS).list(namespace=NS)["items"]
        return [e for e in events if e.get("reason") == "InvalidSpec"]

    def invalid_messages() -> set[str]:
        return {str(e.get("message")) for e in invalid()}

    def counted(at_least: int) -> bool:
        return any((e.get("count") or 0) >= at_least for e in invalid())

    bad = _deployment("bad", 1)
    del bad["spec"]["strategy"]["rollingUpdate"]
    s.deployments.create(bad, namespace=NS)
    s.eventually(lambda: counted(1), "an InvalidSpec event")
    s.update_deployment(lambda d: d["spec"].update(replicas=-1), name="bad")  # another message
    s.eventually(lambda: len(invalid_messages()) == 2, "a second InvalidSpec event")
    s.update_deployment(lambda d: d["spec"].update(replicas=1), name="bad")  # the first message again
    s.eventually(lambda: counted(2), "the first InvalidSpec event counted twice")
    s.deployments.delete("bad", namespace=NS)


def _delete_the_deployment(s: ManagerScenario) -> None:
    s.deployments.delete("pool", namespace=NS)

    def gone() -> bool:
        try:
            s.deployments.get("pool", namespace=NS)
        except NotFound:
            return not s.sets() and not s.all_machines()
        return False

    s.eventually(gone, "the deployment, its sets and machines deleted")


def record(directory: Path) -> dict[str, set[Request]]:
    """Run the whole scenario; the requests made (read once everything stopped)."""
    s = ManagerScenario(directory)
    try:
        _setup(s)
        s.start()
        _create_and_propagate(s)
        _roll(s)
        _scale_down_with_a_conflict(s)
        _adopt_and_release_machines(s)
        _adopt_a_machine_set(s)
        _repeated_warning(s)
        _delete_the_deployment(s)
    finally:
        s.close()
    return s.recorded()

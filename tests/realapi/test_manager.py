"""The ``machine-controller-manager`` command on the real pair (kube-apiserver, etcd and
kube-controller-manager), beside the ``machine-controller`` command with the local provider, both
run as users run them, as processes: MachineDeployments created, scaled, rolled with maxUnavailable
0 and with maxSurge 0, recreated, healed (a Failed machine replaced; a Node deleted), rolled back,
scaled to 0, and a roll-out that survives the manager being SIGKILLed. A monitor on its own watch
of each deployment's Machines checks the roll-out bounds on every event.

One namespace, one controller and one manager serve every test of the module (each test has a
MachineDeployment of its own), so the tier's added time stays small.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from mcm.manager import constants as k
from mcm.runtime import objects as o
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import ApiError, NotFound, is_conflict
from mcm.runtime.client.resources import CONFIG_MAPS, NAMESPACES, NODES, SECRETS
from mcm.testing.envtest import ControlPlanePair
from tests.app.test_command import Controller
from tests.conftest import REALAPI_MARKS
from tests.manager.cluster import Monitor, md
from tests.manager.command import ManagerCommand
from tests.realapi.env import eventually, unique

pytestmark = list(REALAPI_MARKS)

# Short enough that a restarted manager takes over soon after a SIGKILL; a renew deadline of 4 s
# so a manager on a loaded machine does not lose its Lease (and exit) in the middle of the module.
ELECTION = (
    "--leader-elect-lease-duration=5s",
    "--leader-elect-renew-deadline=4s",
    "--leader-elect-retry-period=500ms",
)
TIMEOUT = 90.0


class Fleet:
    """The namespace, the two commands and the clients every test of the module shares."""

    def __init__(self, pair: ControlPlanePair, directory: Path) -> None:
        self.ns = unique("mcm")
        self.vm_ns = f"{self.ns}-vms"
        self.control: ClusterClient = load_config(str(pair.control_kubeconfig), qps=-1, burst=0)
        self.target: ClusterClient = load_config(str(pair.target_kubeconfig), qps=-1, burst=0)
        self.control.resource(NAMESPACES).create({"metadata": {"name": self.ns}})
        self._classes()
        self.deployments = self.control.resource(MACHINE_DEPLOYMENTS)
        self.machines = self.control.resource(MACHINES)
        self.controller = Controller(
            directory,
            pair,  # type: ignore[arg-type]
            "machine-controller",
            f"--namespace={self.ns}",
            "--driver=local",
            f"--local-vm-namespace={self.vm_ns}",
            *ELECTION,
        )
        self.manager = ManagerCommand(
            directory,
            pair.control_kubeconfig,
            pair.target_kubeconfig,
            f"--namespace={self.ns}",
            "--machine-safety-overshooting-period=2s",
            *ELECTION,
        )

    def _classes(self) -> None:
        secret = {"metadata": {"name": "userdata"}, "stringData": {"userData": "#!/bin/sh\n"}}
        self.control.resource(SECRETS).create(secret, namespace=self.ns)
        # class-b boots slower, so a roll-out to it takes a few seconds (the manager is killed
        # in the middle of one).
        for name, boot in (("class-a", 0.2), ("class-b", 1.0)):
            machine_class = {
                "apiVersion": "machine.sapcloud.io/v1alpha1",
                "kind": "MachineClass",
                "metadata": {"name": name},
                "provider": "local",
                "providerSpec": {"bootDelaySeconds": boot, "deleteDelaySeconds": 0.1},
                "secretRef": {"name": "userdata", "namespace": self.ns},
            }
            self.control.resource(MACHINE_CLASSES).create(machine_class, namespace=self.ns)

    def close(self) -> None:
        try:
            for deployment in self.deployments.list(namespace=self.ns)["items"]:
                self.deployments.delete(o.name_of(deployment), namespace=self.ns)
            eventually(lambda: not self.machines.list(namespace=self.ns)["items"], "every machine gone", 120)
        finally:
            assert self.manager.stop(signal.SIGTERM) == 0, self.manager.log_text()
            assert self.controller.stop(signal.SIGTERM) == 0
            for node in self.target.resource(NODES).list()["items"]:
                if str(o.sub(node, "spec").get("providerID", "")).startswith(f"local:///{self.vm_ns}/"):
                    try:
                        self.target.resource(NODES).delete(o.name_of(node))
                    except NotFound:
                        pass
            for namespace in (self.ns, self.vm_ns):
                try:
                    self.control.resource(NAMESPACES).delete(namespace)
                except NotFound:
                    pass
            self.control.close()
            self.target.close()


@pytest.fixture(scope="module")
def fleet(real_pair: ControlPlanePair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    environment = Fleet(real_pair, tmp_path_factory.mktemp("manager"))
    try:
        eventually(lambda: environment.manager.logged("became_leader"), "the manager to lead")
        yield environment
    finally:
        environment.close()


class Pool:
    """One test's MachineDeployment in the fleet, and a monitor of its Machines."""

    def __init__(
        self, fleet: Fleet, replicas: int, machine: dict[str, Any] | None = None, **spec: Any
    ) -> None:
        self.fleet = fleet
        self.name = unique("pool")
        body = md(self.name, replicas, **spec)
        body["metadata"]["namespace"] = fleet.ns
        body["spec"]["template"]["spec"].update(machine or {})
        fleet.deployments.create(body, namespace=fleet.ns)
        self.monitor = Monitor(
            machines=fleet.machines, namespace=fleet.ns, label_selector=f"name={self.name}"
        ).__enter__()

    def close(self) -> None:
        self.monitor.__exit__()

    def machines(self) -> list[dict[str, Any]]:
        listed = self.fleet.machines.list(namespace=self.fleet.ns, label_selector=f"name={self.name}")
        return [dict(m) for m in listed["items"]]

    def running(self, class_name: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.machines()
            if o.text(m, "status", "currentStatus", "phase") == c.PHASE_RUNNING
            and not o.deletion_timestamp(m)
            and o.text(m, "spec", "class", "name") == class_name
        ]

    def deployment(self) -> dict[str, Any]:
        return dict(self.fleet.deployments.get(self.name, namespace=self.fleet.ns))

    def settled(self, replicas: int, class_name: str = "class-a") -> bool:
        """Exactly ``replicas`` machines, all Running on ``class_name``, and the status says so."""
        if len(self.machines()) != replicas or len(self.running(class_name)) != replicas:
            return False
        status = o.sub(self.deployment(), "status")
        return (status.get("availableReplicas") or 0) == replicas == (status.get("updatedReplicas") or 0)

    def wait(self, what: str, check: Callable[[], bool]) -> None:
        def alive_and() -> bool:
            for name, process in (("manager", self.fleet.manager), ("controller", self.fleet.controller)):
                assert process.process.poll() is None, f"the {name} exited"
            return check()

        eventually(alive_and, what, TIMEOUT)

    def update(self, change: Callable[[dict[str, Any]], None]) -> None:
        for _ in range(20):
            body = self.deployment()
            change(body)
            try:
                self.fleet.deployments.update(body, namespace=self.fleet.ns)
                return
            except ApiError as err:
                if not is_conflict(err):
                    raise
        raise AssertionError("could not update the deployment")

    def scale(self, replicas: int) -> None:
        """As ``kubectl scale`` does: through the scale subresource."""
        scale = self.fleet.deployments.get(self.name, namespace=self.fleet.ns, subresource="scale")
        body = {**scale, "spec": {"replicas": replicas}}
        self.fleet.deployments.update(body, namespace=self.fleet.ns, subresource="scale")

    def vms(self) -> list[str]:
        """The local provider's VM records of this pool's machines (named ``<pool>-<hash>-…``)."""
        records = self.fleet.control.resource(CONFIG_MAPS).list(namespace=self.fleet.vm_ns)["items"]
        machines = [str((r.get("data") or {}).get("machineName", "")) for r in records]
        return [m for m in machines if m.startswith(f"{self.name}-")]


@pytest.fixture
def pool_of(fleet: Fleet) -> Iterator[Callable[..., Pool]]:
    made: list[Pool] = []

    def make(replicas: int, machine: dict[str, Any] | None = None, **spec: Any) -> Pool:
        made.append(Pool(fleet, replicas, machine, **spec))
        return made[-1]

    yield make
    for pool in made:
        pool.close()
        try:
            fleet.deployments.delete(pool.name, namespace=fleet.ns)
        except NotFound:
            pass


def _to_class(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["spec"]["template"]["spec"]["class"].update(name=name)


def test_create_scale_and_scale_to_zero(pool_of: Callable[..., Pool]) -> None:
    pool = pool_of(2)
    pool.wait("2 Running machines", lambda: pool.settled(2))
    pool.scale(3)
    pool.wait("scaled up to 3", lambda: pool.settled(3))
    pool.update(lambda d: d["spec"].update(replicas=0))
    pool.wait(
        "scaled to 0",
        lambda: pool.machines() == [] and (o.sub(pool.deployment(), "status").get("replicas") or 0) == 0,
    )
    assert pool.vms() == []
    sets = pool.fleet.control.resource(MACHINE_SETS).list(
        namespace=pool.fleet.ns, label_selector=f"name={pool.name}"
    )
    assert len(sets["items"]) == 1


@pytest.mark.parametrize(("surge", "unavailable"), [(1, 0), (0, 1)], ids=["max-unavailable-0", "max-surge-0"])
def test_rolling_update_stays_within_its_bounds(
    pool_of: Callable[..., Pool], surge: int, unavailable: int
) -> None:
    pool = pool_of(2, max_surge=surge, max_unavailable=unavailable)
    pool.wait("2 Running machines", lambda: pool.settled(2))
    pool.monitor.watch(max_machines=2 + surge, min_running=2 - unavailable)
    pool.update(_to_class("class-b"))
    pool.wait("rolled to class-b", lambda: pool.settled(2, "class-b"))
    assert pool.monitor.violations == []
    assert pool.monitor.max_seen == 2 + surge
    assert pool.monitor.min_running_seen == 2 - unavailable


def test_recreate_never_mixes_the_templates(pool_of: Callable[..., Pool]) -> None:
    pool = pool_of(2, strategy="Recreate")
    pool.wait("2 Running machines", lambda: pool.settled(2))
    pool.monitor.watch(max_machines=2, min_running=0)
    pool.update(_to_class("class-b"))
    pool.wait("recreated on class-b", lambda: pool.settled(2, "class-b"))
    assert pool.monitor.violations == []
    assert [classes for classes in pool.monitor.classes_seen if len(classes) > 1] == []


def test_a_failed_machine_is_replaced(fleet: Fleet, pool_of: Callable[..., Pool]) -> None:
    """A node problem (a condition of ``--node-conditions`` True, as node-problem-detector sets
    it) makes the machine Unknown, then Failed after its ``healthTimeout``; its set replaces it."""
    pool = pool_of(2, machine={"healthTimeout": "2s"})
    pool.wait("2 Running machines", lambda: pool.settled(2))
    victim = o.name_of(pool.machines()[0])
    deadlock = {"type": "KernelDeadlock", "status": "True", "reason": "Deadlock", "message": "simulated"}
    fleet.target.resource(NODES).patch(
        victim, {"status": {"conditions": [deadlock]}}, kind="strategic", subresource="status"
    )
    pool.wait("the failed machine gone", lambda: victim not in {o.name_of(m) for m in pool.machines()})
    pool.wait("healed to 2 Running machines", lambda: pool.settled(2))


def test_a_deleted_node_takes_its_machine_and_the_set_heals(
    fleet: Fleet, pool_of: Callable[..., Pool]
) -> None:
    pool = pool_of(2)
    pool.wait("2 Running machines", lambda: pool.settled(2))
    victim = pool.machines()[0]
    fleet.target.resource(NODES).delete(o.label(victim, c.LABEL_NODE) or o.name_of(victim))
    pool.wait("its machine gone", lambda: o.name_of(victim) not in {o.name_of(m) for m in pool.machines()})
    pool.wait("healed to 2 Running machines", lambda: pool.settled(2))


def test_rollback(pool_of: Callable[..., Pool]) -> None:
    pool = pool_of(2)
    pool.wait("2 Running machines", lambda: pool.settled(2))
    pool.update(_to_class("class-b"))
    pool.wait("on class-b", lambda: pool.settled(2, "class-b"))
    pool.update(lambda d: d["spec"].update(rollbackTo={"revision": 0}))
    pool.wait("rolled back to class-a", lambda: pool.settled(2, "class-a"))
    deployment = pool.deployment()
    assert "rollbackTo" not in deployment["spec"]
    assert o.annotation(deployment, k.ANNOTATION_REVISION) == "3"


def test_a_manager_killed_mid_roll_out_resumes_without_extra_machines(
    fleet: Fleet, pool_of: Callable[..., Pool]
) -> None:
    """SIGKILL, twice, while old and new machines coexist: whatever write was in flight is cut
    off; the restarted command takes over its own Lease and finishes within the bounds."""
    pool = pool_of(3, max_surge=1, max_unavailable=0)
    pool.wait("3 Running machines", lambda: pool.settled(3))
    pool.monitor.watch(max_machines=4, min_running=3)
    pool.update(_to_class("class-b"))
    for kill in range(2):
        pool.wait(
            "the restarted manager leading, the roll-out under way",
            lambda n=kill: (
                _leaderships(fleet.manager) > n
                and pool.running("class-a") != []
                and any(o.text(m, "spec", "class", "name") == "class-b" for m in pool.machines())
            ),
        )
        fleet.manager.kill()
        fleet.manager.restart()
    pool.wait("roll-out finished after the kills", lambda: pool.settled(3, "class-b"))
    assert pool.monitor.violations == [] and pool.monitor.max_seen <= 4
    assert len(pool.vms()) == 3
    assert _leaderships(fleet.manager) >= 3


def _leaderships(manager: ManagerCommand) -> int:
    return sum(entry.get("msg") == "became_leader" for entry in manager.log())

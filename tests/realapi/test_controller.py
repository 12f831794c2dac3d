"""The machine controller end to end on two real API servers (control + target), the node
simulator playing the kubelets: creation, health, deletion with a real drain, restarts, orphans."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import (
    EVENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    VOLUME_ATTACHMENTS,
    Resource,
)
from mcm.testing.envtest import ControlPlanePair
from tests.conftest import REALAPI_MARKS
from tests.realapi.conftest import make_env
from tests.realapi.env import RealEnv, eventually, unique

pytestmark = list(REALAPI_MARKS)

REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
CSI_DRIVER = "csi.example.com"


def test_create_goes_pending_then_running(env: RealEnv) -> None:
    env.setup_class()
    env.start()
    name = unique("create")
    env.create_machine(name)
    eventually(lambda: env.phase(name) == c.PHASE_RUNNING, "Running")
    stored = env.get_machine(name) or {}
    assert stored["spec"]["providerID"] == f"fake:///{name}"
    assert stored["metadata"]["labels"][c.LABEL_NODE] == name
    assert c.MCM_FINALIZER in stored["metadata"]["finalizers"]
    node = env.nodes.get(name)
    assert node["spec"]["providerID"] == f"fake:///{name}"
    assert len(env.driver.calls_to("create_machine")) == 1


def test_health_goes_unknown_then_failed(pair: ControlPlanePair) -> None:
    env = make_env(pair, machine_health_timeout=2.0)
    try:
        env.setup_class()
        env.start()
        name = unique("health")
        env.running(name)
        env.sim.set_ready(name, False)
        eventually(lambda: env.phase(name) == c.PHASE_UNKNOWN, "Unknown")
        eventually(lambda: env.phase(name) == c.PHASE_FAILED, "Failed")
        assert "health checks failing since last" in env.last_operation(name)
    finally:
        env.close()


# --- deletion with a real drain ----------------------------------------------------------------


class Workloads:
    """Plays the ReplicaSet controller, the scheduler and the attach/detach controller for the
    pods of one namespace: keeps ``web`` at two Ready pods and ``db`` at one (replacements go to
    ``spare``), detaches ``db``'s volume from a node once no ``db`` pod is left there, and
    attaches it to the node of the live ``db`` pod. Records the fewest Ready ``web`` pods seen.
    ``web`` replacements wait until the drain has reported a PDB refusal, so that the refusal
    (the PDB's status, computed by the real disruption controller) must happen."""

    def __init__(self, env: RealEnv, node: str, spare: str) -> None:
        self.env, self.node, self.spare = env, node, spare
        self.rs = env.target.resource(REPLICA_SETS).create(_replica_set(env.ns))
        self.attachments = env.target.resource(VOLUME_ATTACHMENTS)
        self.fewest_ready_web = 2
        self.refused = False
        self.created = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def seed(self) -> None:
        """Two web pods and the db pod (with its PV, PVC and attachment) on ``node``."""
        pvs = self.env.target.resource(PERSISTENT_VOLUMES)
        pv = {
            "metadata": {"name": self.env.ns},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": CSI_DRIVER, "volumeHandle": f"vol-{self.env.ns}"},
            },
        }
        pvs.create(pv)
        claim = {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": self.env.ns,
            },
        }
        self.env.target.resource(PERSISTENT_VOLUME_CLAIMS).create(claim, namespace=self.env.ns)
        for _ in range(2):
            self._create_pod("web", self.node)
        self._create_pod("db", self.node)
        self._attach(self.node)

    def _create_pod(self, app: str, node: str) -> None:
        self.created += 1
        spec: dict[str, Any] = {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        }
        if app == "db":
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": self.rs["metadata"]["uid"],
            "controller": True,
        }
        body = {
            "metadata": {"name": f"{app}-{self.created}", "labels": {"app": app}, "ownerReferences": [owner]},
            "spec": spec,
        }
        pod = self.env.pods.create(body, namespace=self.env.ns)
        ready = {"type": "Ready", "status": "True"}
        status = {"phase": "Running", "conditions": [ready, {**ready, "type": "ContainersReady"}]}
        self.env.pods.patch(
            pod["metadata"]["name"], {"status": status}, namespace=self.env.ns, subresource="status"
        )

    def _attach(self, node: str) -> None:
        name = f"{self.env.ns}-{node}"
        body = {
            "metadata": {"name": name},
            "spec": {
                "attacher": CSI_DRIVER,
                "nodeName": node,
                "source": {"persistentVolumeName": self.env.ns},
            },
        }
        self.attachments.create(body)
        self.attachments.patch(name, {"status": {"attached": True}}, subresource="status")
        entry = {"name": f"kubernetes.io/csi/{CSI_DRIVER}^vol-{self.env.ns}", "devicePath": ""}
        self.env.nodes.patch(node, {"status": {"volumesAttached": [entry]}}, subresource="status")

    def _detach(self, node: str) -> None:
        self.env.nodes.patch(node, {"status": {"volumesAttached": None}}, subresource="status")
        try:
            self.attachments.delete(f"{self.env.ns}-{node}")
        except NotFound:
            pass

    def _drain_refused(self) -> bool:
        events = self.env.control.resource(EVENTS).list(namespace=self.env.ns)["items"]
        return any(e.get("reason") == "DrainBlockedByPDB" for e in events)

    def _attached_to(self, node: str) -> bool:
        try:
            self.attachments.get(f"{self.env.ns}-{node}")
        except NotFound:
            return False
        return True

    def _loop(self) -> None:
        while not self.stop.wait(0.1):
            self._step()

    def _step(self) -> None:
        pods = self.env.pods.list(namespace=self.env.ns)["items"]
        live = {"web": 0, "db": 0}
        db_nodes = set()
        for pod in pods:
            app = pod["metadata"]["labels"]["app"]
            if app == "db":
                db_nodes.add(pod["spec"]["nodeName"])
            if not pod["metadata"].get("deletionTimestamp"):
                live[app] += 1
        self.fewest_ready_web = min(self.fewest_ready_web, live["web"])
        self.refused = self.refused or self._drain_refused()
        for app, want in (("web", 2 if self.refused else 0), ("db", 1)):
            for _ in range(want - live[app]):
                self._create_pod(app, self.spare)
        if self.node not in db_nodes and self._attached_to(self.node):
            self._detach(self.node)
        if (
            db_nodes == {self.spare}
            and not self._attached_to(self.node)
            and not self._attached_to(self.spare)
        ):
            self._attach(self.spare)

    def __enter__(self) -> Workloads:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def _replica_set(namespace: str) -> dict[str, Any]:
    labels = {"app": "web"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    return {
        "metadata": {"name": "rs", "namespace": namespace},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
    }


@pytest.fixture
def fast_pdb_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry PDB-refused evictions every second instead of upstream's 20 s."""
    monkeypatch.setattr("mcm.drain.drain.EVICTION_RETRY_INTERVAL", 1.0)


@pytest.mark.usefixtures("fast_pdb_retries")
def test_deletion_drains_under_a_real_pdb_and_waits_for_the_volume(pair: ControlPlanePair) -> None:
    env = make_env(pair, machine_pv_reattach_timeout=30.0)
    try:
        env.setup_class()
        env.start()
        node, spare = unique("drained"), unique("spare")
        env.running(node)
        env.running(spare)
        workloads = Workloads(env, node, spare)
        pdb = {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
        env.target.resource(POD_DISRUPTION_BUDGETS).create(pdb, namespace=env.ns)
        workloads.seed()
        pdbs = env.target.resource(POD_DISRUPTION_BUDGETS)
        eventually(
            lambda: (pdbs.get("web", namespace=env.ns).get("status") or {}).get("disruptionsAllowed") == 1,
            "the disruption controller's PDB status",
        )
        with workloads:
            env.machines.delete(node, namespace=env.ns)
            eventually(lambda: env.get_machine(node) is None, "the machine gone", timeout=120)
        assert workloads.fewest_ready_web >= 1, "the drain went below the PDB's minAvailable"
        placed = {
            p["metadata"]["name"]: p["spec"]["nodeName"] for p in env.pods.list(namespace=env.ns)["items"]
        }
        assert set(placed.values()) == {spare}, placed
        assert not env.node_exists(node)
        assert f"fake:///{node}" not in {vm.provider_id for vm in env.driver.vms.values()}
        assert workloads._attached_to(spare) and not workloads._attached_to(node)
        reasons = {e.get("reason") for e in env.control.resource(EVENTS).list(namespace=env.ns)["items"]}
        assert "DrainBlockedByPDB" in reasons, "the real PDB refused an eviction at least once"
    finally:
        env.close()


def test_a_restart_mid_deletion_resumes(pair: ControlPlanePair) -> None:
    from mcm.driver import Code, MachineError

    env = make_env(pair)
    try:
        env.setup_class()
        env.start()
        name = unique("restart")
        env.running(name)
        env.driver.always("delete_machine", MachineError(Code.Unavailable, "cloud busy"))  # type: ignore[arg-type]
        env.machines.delete(name, namespace=env.ns)
        eventually(
            lambda: env.last_operation(name).endswith(c.MARKER_INITIATE_VM_DELETION), "stuck at VM deletion"
        )
        env.stop_controller()
        env.driver.reset_scripts()
        env.start()
        eventually(lambda: env.get_machine(name) is None, "the machine gone after the restart")
        assert not env.node_exists(name)
        assert env.driver.vms == {}
    finally:
        env.close()


@pytest.fixture
def orphan_env(pair: ControlPlanePair) -> Iterator[RealEnv]:
    env = make_env(pair, machine_safety_orphan_vms_period=0.5)
    try:
        yield env
    finally:
        env.close()


def test_orphan_collection_never_deletes_a_live_machines_vm(orphan_env: RealEnv) -> None:
    env = orphan_env
    env.setup_class()
    orphan = unique("orphan")
    env.driver.add_vm(f"fake:///{orphan}", orphan)
    env.node_names.add(orphan)
    env.start()
    names = [unique("live") for _ in range(8)]
    for name in names:
        env.create_machine(name)
    for name in names:
        eventually(lambda name=name: env.phase(name) == c.PHASE_RUNNING, f"{name} Running")  # type: ignore[misc]
    eventually(lambda: f"fake:///{orphan}" not in env.driver.vms, "the orphan VM deleted")
    deleted = [call.machine for call in env.driver.calls_to("delete_machine")]
    assert set(deleted) == {orphan}, deleted
    assert {vm.node_name for vm in env.driver.vms.values()} == set(names)

"""The node simulator registers, heartbeats and breaks Nodes in an emulated target cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import NodeAddress
from mcm.driver import CallContext, CreateMachineRequest, FakeDriver
from mcm.emulator import Emulator
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.clock import FakeClock
from mcm.testing.driver_conformance import sample_machine, sample_machine_class
from mcm.testing.nodesim import NodeSimulator, SimulatedVM


@pytest.fixture
def target(kubeconfig: str) -> Iterator[ClusterClient]:
    client = load_config(kubeconfig, qps=-1)
    yield client
    client.close()


def _conditions(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in node["status"]["conditions"]}


def test_registers_a_node_per_vm_after_the_boot_delay(target: ClusterClient) -> None:
    clock = FakeClock()
    vm = SimulatedVM(
        "local:///vm-1",
        "node-1",
        (NodeAddress(type="InternalIP", address="10.0.0.1"),),
        {"cpu": "4", "memory": "8Gi"},
        {"node.kubernetes.io/instance-type": "m5.large"},
    )
    sim = NodeSimulator(target, lambda: [vm], clock=clock, boot_delay=30)
    sim.sync()
    with pytest.raises(NotFound):
        target.resource(NODES).get("node-1")
    clock.step(30)
    sim.sync()
    node = target.resource(NODES).get("node-1")
    assert node["spec"]["providerID"] == "local:///vm-1"
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.1"}]
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "8Gi"}
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
    assert _conditions(node)["Ready"]["status"] == "True"
    assert _conditions(node)["DiskPressure"]["status"] == "False"
    assert sim.registered("node-1")


def test_heartbeats_refresh_ready_without_touching_foreign_conditions(target: ClusterClient) -> None:
    clock = FakeClock()
    sim = NodeSimulator(target, lambda: [{"provider_id": "p:///a", "node_name": "a"}], clock=clock)
    sim.sync()
    nodes = target.resource(NODES)
    first = _conditions(nodes.get("a"))["Ready"]["lastHeartbeatTime"]
    foreign = {"type": "Terminating", "status": "True", "reason": "ByController", "message": "x"}
    nodes.patch("a", {"status": {"conditions": [foreign]}}, kind="strategic", subresource="status")
    clock.step(5)
    sim.sync()
    assert _conditions(nodes.get("a"))["Ready"]["lastHeartbeatTime"] == first, "not due yet"
    clock.step(5)
    sim.sync()
    conditions = _conditions(nodes.get("a"))
    assert conditions["Ready"]["lastHeartbeatTime"] > first
    assert conditions["Ready"]["lastTransitionTime"] == first
    assert conditions["Terminating"]["status"] == "True"


def test_not_ready_condition_and_stopped_heartbeats(target: ClusterClient) -> None:
    clock = FakeClock()
    sim = NodeSimulator(target, lambda: [SimulatedVM("p:///a", "a")], clock=clock)
    sim.sync()
    nodes = target.resource(NODES)
    clock.step(1)
    sim.set_ready("a", False)
    ready = _conditions(nodes.get("a"))["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
    assert ready["lastTransitionTime"] == "2024-01-01T00:00:01Z"
    sim.set_condition("a", "ReadonlyFilesystem", "True", "FilesystemIsReadOnly")
    assert _conditions(nodes.get("a"))["ReadonlyFilesystem"]["status"] == "True"
    sim.set_ready("a")
    assert _conditions(nodes.get("a"))["Ready"]["status"] == "True"

    sim.stop_heartbeats("a")
    beat = _conditions(nodes.get("a"))["Ready"]["lastHeartbeatTime"]
    clock.step(60)
    sim.sync()
    assert _conditions(nodes.get("a"))["Ready"]["lastHeartbeatTime"] == beat
    sim.resume_heartbeats("a")
    sim.sync()
    assert _conditions(nodes.get("a"))["Ready"]["lastHeartbeatTime"] > beat


def test_vanish_deleted_nodes_return_and_gone_vms_keep_their_node(target: ClusterClient) -> None:
    clock = FakeClock()
    vms = [SimulatedVM("p:///a", "a"), SimulatedVM("p:///b", "b")]
    sim = NodeSimulator(target, lambda: list(vms), clock=clock)
    sim.sync()
    nodes = target.resource(NODES)
    sim.vanish("a")
    sim.sync()
    with pytest.raises(NotFound):
        nodes.get("a")
    sim.reappear("a")
    sim.sync()
    assert nodes.get("a")

    nodes.delete("b")
    clock.step(10)
    sim.sync()  # the heartbeat finds it gone
    sim.sync()
    assert nodes.get("b"), "a kubelet registers its node again"

    vms.pop()
    sim.sync()
    assert sim.node_names == ["a"]
    beat = _conditions(nodes.get("b"))["Ready"]["lastHeartbeatTime"]
    clock.step(60)
    sim.sync()
    assert _conditions(nodes.get("b"))["Ready"]["lastHeartbeatTime"] == beat


def test_a_vm_that_never_boots_has_no_node(target: ClusterClient) -> None:
    sim = NodeSimulator(target, lambda: [SimulatedVM("p:///a", "a", boots=False)], clock=FakeClock())
    sim.sync()
    with pytest.raises(NotFound):
        target.resource(NODES).get("a")


def test_fake_driver_vms_become_nodes_in_the_background(target: ClusterClient) -> None:
    driver = FakeDriver()
    machine = sample_machine("m-1")
    driver.create_machine(CallContext.background(), CreateMachineRequest(machine, sample_machine_class(), {}))
    with NodeSimulator(target, driver, poll_interval=0.05):
        node = _wait_for_node(target, "m-1")
    assert node["spec"]["providerID"] == "fake:///m-1"


def _wait_for_node(target: ClusterClient, name: str) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            return target.resource(NODES).get(name)
        except NotFound:
            time.sleep(0.02)
    raise AssertionError(f"node {name} was never registered")


def test_any_driver_is_listed_per_class(target: ClusterClient) -> None:
    from mcm.driver.grpc import GrpcDriver, serve

    fake = FakeDriver()
    machine_class = sample_machine_class()
    fake.create_machine(
        CallContext.background(), CreateMachineRequest(sample_machine("m-2"), machine_class, {})
    )
    with serve(fake, "127.0.0.1:0") as server, GrpcDriver(server.endpoint, timeout=10.0) as client:
        sim = NodeSimulator(target, client, machine_classes=[(machine_class, {})], clock=FakeClock())
        sim.sync()
    node = target.resource(NODES).get("m-2")
    assert node["spec"]["providerID"] == "fake:///m-2"


def test_a_new_simulator_adopts_existing_nodes(target: ClusterClient) -> None:
    clock = FakeClock()
    vms = lambda: [SimulatedVM("p:///a", "a")]  # noqa: E731
    NodeSimulator(target, vms, clock=clock).sync()
    first = _conditions(target.resource(NODES).get("a"))["Ready"]["lastHeartbeatTime"]
    clock.step(5)
    second = NodeSimulator(target, vms, clock=clock)
    second.sync()
    assert second.registered("a")
    assert _conditions(target.resource(NODES).get("a"))["Ready"]["lastHeartbeatTime"] > first


def test_finishes_the_termination_of_pods_on_its_nodes_only(
    target: ClusterClient, emulator: Emulator
) -> None:
    """kube-apiserver leaves a gracefully deleted pod bound to a node Terminating until its kubelet
    deletes it with grace period 0; the simulator plays that kubelet for its own nodes."""
    emulator.controllers.kubelet.mode = "manual"  # the emulator's own kubelet stays out of it
    pods = target.resource(PODS)
    sim = NodeSimulator(target, lambda: [SimulatedVM("p:///a", "a")], clock=FakeClock(), finish_pods=True)
    sim.sync()
    for name, node in (("on-a", "a"), ("elsewhere", "other"), ("running", "a")):
        body = {
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        }
        pods.create(body, namespace="default")
    pods.delete("on-a", namespace="default", grace_period_seconds=30)
    pods.delete("elsewhere", namespace="default", grace_period_seconds=30)
    assert pods.get("on-a", namespace="default")["metadata"]["deletionTimestamp"]
    sim.sync()
    with pytest.raises(NotFound):
        pods.get("on-a", namespace="default")
    assert pods.get("elsewhere", namespace="default")["metadata"]["deletionTimestamp"], "not its node"
    assert "deletionTimestamp" not in pods.get("running", namespace="default")["metadata"]
    assert (
        NodeSimulator(target, lambda: [], clock=FakeClock(), finish_pods=True).finish_pod_terminations() == 0
    )


def test_simulated_kubelets_report_the_release_the_emulator_and_the_real_tier_run() -> None:
    """A kubelet more than the supported skew behind its API server is refused by a real cluster:
    simulated Nodes claim the same release the emulator reports (held to the real tier's go.mod)."""
    from mcm.driver.nodesim import KUBELET_VERSION
    from mcm.emulator import KUBERNETES_VERSION

    assert KUBELET_VERSION == KUBERNETES_VERSION

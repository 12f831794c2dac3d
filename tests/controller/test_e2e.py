"""End to end on a ClusterPair: create → Pending → Running, health, deletion with drain, restarts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from mcm.apis.machine import constants as c
from mcm.runtime.client.resources import PODS

from .fixtures import NS, Env, eventually, machine


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    try:
        yield environment
    finally:
        environment.close()


@pytest.fixture
def real_drain(tmp_path: Path) -> Iterator[Env]:
    """A controller whose deletions go through ``mcm.drain`` on the emulated target cluster."""
    environment = Env(tmp_path, real_drain=True)
    try:
        yield environment
    finally:
        environment.close()


def test_create_pending_running(env: Env) -> None:
    env.setup_class()
    env.start()
    env.machines.create(machine("machine-one"), namespace=NS)
    eventually(lambda: env.phase("machine-one") == c.PHASE_PENDING, what="Pending")
    stored = env.get_machine("machine-one")
    assert stored is not None
    assert stored["spec"]["providerID"] == "fake:///machine-one"
    assert stored["metadata"]["labels"][c.LABEL_NODE] == "machine-one"
    assert c.MCM_FINALIZER in stored["metadata"]["finalizers"]
    env.register_nodes()
    eventually(lambda: env.phase("machine-one") == c.PHASE_RUNNING, what="Running")
    assert len(env.driver.calls_to("create_machine")) == 1


def test_the_mutation_cache_lets_go_of_writes_the_informer_delivered(env: Env) -> None:
    """Issue 39: the answers to the controller's Machine writes stayed in the mutation cache
    until read again, a second copy of every machine the controller had written to."""
    env.setup_class()
    env.start()
    _running(env, "machine-one")
    controller = env.controller
    assert controller is not None
    eventually(lambda: len(controller.mutations) == 0, what="no recorded write left")
    # A write no reconcile reads back (a label: the Machine's generation stays, nothing is queued).
    controller.deps.writers.machines.patch("machine-one", {"metadata": {"labels": {"x": "y"}}}, namespace=NS)
    eventually(lambda: len(controller.mutations) == 0, what="the write's answer dropped")


def _running(env: Env, name: str) -> None:
    env.machines.create(machine(name), namespace=NS)
    eventually(lambda: env.phase(name) == c.PHASE_PENDING, what="Pending")
    env.register_nodes()
    eventually(lambda: env.phase(name) == c.PHASE_RUNNING, what="Running")


def _node_exists(env: Env, name: str) -> bool:
    try:
        env.nodes.get(name)
    except Exception:
        return False
    return True


def _wait_for_cached_pods(env: Env, count: int) -> None:
    """The drain lists pods from the controller's pod cache (as upstream's does from its
    lister): a deletion sent before the cache has the pods may find none to evict."""
    controller = env.controller
    assert controller is not None and controller.target_factory is not None
    lister = controller.target_factory.lister(PODS)
    eventually(lambda: len(lister.list()) >= count, what=f"{count} pods in the controller's cache")


def test_delete_drains_deletes_vm_node_and_finalizer(real_drain: Env) -> None:
    """Through the real drain: the pods are evicted, the VM, the Node and the Machine are gone."""
    env = real_drain
    env.setup_class()
    env.start()
    _running(env, "machine-two")
    eventually(lambda: c.NODE_FINALIZER in (env.nodes.get("machine-two")["metadata"].get("finalizers") or []))
    pods = env.target.resource(PODS)
    pods.create(_pod("app-two", "machine-two"), namespace=NS)
    other = _pod("elsewhere", "another-node")
    pods.create(other, namespace=NS)
    _wait_for_cached_pods(env, 2)
    env.machines.delete("machine-two", namespace=NS)
    eventually(lambda: env.get_machine("machine-two") is None, what="machine gone")
    assert [p["metadata"]["name"] for p in pods.list(namespace=NS)["items"]] == ["elsewhere"]
    assert env.driver.vms == {}
    assert not _node_exists(env, "machine-two")


def test_node_not_ready_goes_unknown_then_failed(tmp_path: Path) -> None:
    from mcm.controller import ControllerOptions

    environment = Env(tmp_path, options=ControllerOptions(namespace=NS, machine_health_timeout=0.5))
    try:
        environment.setup_class()
        environment.start()
        _running(environment, "machine-three")
        environment.sim.set_ready("machine-three", False)
        eventually(
            lambda: environment.phase("machine-three") in (c.PHASE_UNKNOWN, c.PHASE_FAILED), what="Unknown"
        )
        eventually(lambda: environment.phase("machine-three") == c.PHASE_FAILED, what="Failed")
        stored = environment.get_machine("machine-three") or {}
        assert "health checks failing since last" in stored["status"]["lastOperation"]["description"]
    finally:
        environment.close()


def _pod(name: str, node: str) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "ownerReferences": [owner]},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox:1"}],
        },
    }


def test_delete_with_pods_goes_through_the_real_drain(tmp_path: Path) -> None:
    """The issue's resolution criterion: a Machine with a Node and pods really goes through mcm.drain."""
    from mcm.runtime.client.resources import PODS

    environment = Env(tmp_path, real_drain=True)
    try:
        environment.setup_class()
        environment.start()
        _running(environment, "machine-four")
        pods = environment.target.resource(PODS)
        for index in range(3):
            pods.create(_pod(f"app-{index}", "machine-four"), namespace=NS)
        _wait_for_cached_pods(environment, 3)
        environment.machines.delete("machine-four", namespace=NS)
        eventually(lambda: environment.get_machine("machine-four") is None, what="machine gone")
        assert pods.list(namespace=NS)["items"] == []
        assert environment.driver.vms == {}
        assert not _node_exists(environment, "machine-four")
    finally:
        environment.close()


@pytest.mark.parametrize("stuck_at", ["get_machine_status", "drain", "delete_machine", "delete_node"])
def test_restart_in_the_middle_of_a_deletion_step_resumes_at_that_step(
    real_drain: Env, stuck_at: str
) -> None:
    """Through the real drain: whether the node's pod is still there tells where the deletion
    stood; after a restart the flow resumes there and ends with nothing left."""
    from mcm.driver import Code, MachineError

    env = real_drain
    env.setup_class()
    env.start()
    _running(env, "machine-five")
    pods = env.target.resource(PODS)
    pods.create(_pod("app-five", "machine-five"), namespace=NS)
    _wait_for_cached_pods(env, 1)
    markers = {
        "get_machine_status": c.MARKER_GET_VM_STATUS,
        "drain": c.MARKER_INITIATE_DRAIN,
        "delete_machine": c.MARKER_INITIATE_VM_DELETION,
        "delete_node": c.MARKER_INITIATE_NODE_DELETION,
    }
    if stuck_at == "drain":
        faults = env.pair.target.faults
        faults.add(code=500, verb="create", resource="pods", subresource="eviction", times=1000)
    elif stuck_at == "delete_node":
        env.pair.target.faults.add(code=500, verb="delete", resource="nodes", times=1000)
    else:
        env.driver.always(stuck_at, MachineError(Code.Unavailable, "cloud busy"))  # type: ignore[arg-type]
    env.machines.delete("machine-five", namespace=NS)

    def stuck() -> bool:
        m = env.get_machine("machine-five") or {}
        description = ((m.get("status") or {}).get("lastOperation") or {}).get("description", "")
        return str(description).endswith(markers[stuck_at])

    eventually(stuck, what=f"stuck at {stuck_at}")
    env.stop_controller()
    pod_left = [p["metadata"]["name"] for p in pods.list(namespace=NS)["items"]]
    assert pod_left == (["app-five"] if stuck_at in ("get_machine_status", "drain") else [])
    assert _node_exists(env, "machine-five")
    assert bool(env.driver.vms) == (stuck_at != "delete_node")
    env.driver.reset_scripts()
    env.pair.target.faults.clear()
    env.start()
    eventually(lambda: env.get_machine("machine-five") is None, what="machine gone after restart")
    assert pods.list(namespace=NS)["items"] == []
    assert env.driver.vms == {}
    assert not _node_exists(env, "machine-five")


def test_conflict_storm_watch_drops_and_410_do_not_create_a_second_vm(env: Env) -> None:
    """Concurrent writers on the same Machines, dropped/expired watches and a compaction (410)
    during creation: every machine still gets exactly one CreateMachine."""
    import threading

    from mcm.runtime.client.errors import ApiError

    env.setup_class()
    env.start(workers=4)
    names = [f"storm-{i}" for i in range(6)]
    stop = threading.Event()

    def writer() -> None:
        counter = 0
        while not stop.is_set():
            for name in names:
                try:
                    m = env.machines.get(name, namespace=NS)
                    m["metadata"].setdefault("annotations", {})["storm"] = str(counter)
                    env.machines.update(m)
                except ApiError:
                    pass
                counter += 1

    threads = [threading.Thread(target=writer, daemon=True) for _ in range(2)]
    for name in names:
        env.machines.create(machine(name), namespace=NS)
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):
            env.pair.control.watches.drop("expire")
            env.pair.control.compact()
            env.pair.control.watches.drop("reset")
        eventually(lambda: all(env.phase(n) == c.PHASE_PENDING for n in names), what="all Pending")
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    env.register_nodes()
    eventually(lambda: all(env.phase(n) == c.PHASE_RUNNING for n in names), what="all Running")
    for name in names:
        assert len(env.driver.calls_to("create_machine", machine=name)) == 1, name


def test_without_a_target_cluster_machines_become_available(env: Env) -> None:
    """HEAD --target-kubeconfig=none: no token, no node label, phase Available."""
    import threading

    from mcm.controller import Controller

    env.setup_class()
    controller = Controller(env.control, None, env.driver, env.options)
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(2, stop), daemon=True)
    runner.start()
    try:
        env.machines.create(machine("machine-six"), namespace=NS)
        eventually(lambda: env.phase("machine-six") == c.PHASE_AVAILABLE, what="Available")
        stored = env.get_machine("machine-six") or {}
        assert c.LABEL_NODE not in (stored["metadata"].get("labels") or {})
        assert stored["status"]["lastOperation"]["description"] == c.DESC_CREATED_NO_TARGET
        env.machines.delete("machine-six", namespace=NS)
        eventually(lambda: env.get_machine("machine-six") is None, what="machine gone")
        assert env.driver.vms == {}
    finally:
        stop.set()
        runner.join(30)


class _ResettingPool:
    """The control cluster's connection pool, with a connection reset on chosen writes."""

    def __init__(self, inner: Any, should_reset: Any) -> None:
        self.inner = inner
        self.should_reset = should_reset

    def urlopen(self, method: str, url: str, **kwargs: Any) -> Any:
        if self.should_reset(method, url):
            reset = ConnectionResetError(104, "Connection reset by peer")
            raise urllib3.exceptions.ProtocolError("Connection aborted.", reset)
        return self.inner.urlopen(method, url, **kwargs)

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        """The lean pool's entry point (plain requests when the connection has one)."""
        if self.should_reset(method, url):
            raise ConnectionResetError(104, "Connection reset by peer")
        return self.inner.request(method, url, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_connection_reset_on_a_status_write_never_ends_the_process(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's headline: with REALLY_CRASH on (as the command runs), a reset status PUT
    made the whole process exit 1 within a second. It is an error now: retried, the machine
    goes on to Pending."""
    import threading

    from mcm.runtime import errors

    fatal: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    resets: list[str] = []
    lock = threading.Lock()

    def should_reset(method: str, url: str) -> bool:
        with lock:
            if method == "PUT" and url.endswith("/machine-reset/status") and not resets:
                resets.append(url)
                return True
        return False

    transport = env.control.transport
    direct_pool = transport._direct_pool
    monkeypatch.setattr(transport, "_direct_pool", lambda: _ResettingPool(direct_pool(), should_reset))
    lean = transport.connection.http11
    if lean is not None:
        monkeypatch.setattr(transport.connection, "http11", _ResettingPool(lean, should_reset))
    env.setup_class()
    env.start()
    env.machines.create(machine("machine-reset"), namespace=NS)
    eventually(lambda: env.phase("machine-reset") == c.PHASE_PENDING, what="Pending after the reset")
    assert resets and fatal == []
    assert env.controller is not None and env.thread is not None and env.thread.is_alive()
    assert len(env.driver.calls_to("create_machine")) == 1


def test_the_node_cache_holds_no_image_lists(env: Env) -> None:
    """Issue 25: a Node's status.images (kilobytes per node, never read by the controller) is
    dropped by the informer transform before it is cached."""
    env.setup_class()
    env.nodes.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "big-node"}})
    env.nodes.patch(
        "big-node",
        {"status": {"images": [{"names": ["registry/app:1"], "sizeBytes": 5}]}},
        subresource="status",
    )
    controller = env.start()
    nodes = controller.deps.listers.nodes
    assert nodes is not None

    def cached() -> dict[str, Any] | None:
        try:
            return dict(nodes.get("big-node"))
        except Exception:
            return None

    eventually(lambda: cached() is not None, what="node cached")
    assert "images" not in ((cached() or {}).get("status") or {})
    assert env.nodes.get("big-node")["status"]["images"]

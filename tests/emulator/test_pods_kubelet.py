"""Pods without a kubelet: termination modes, the pod runner and pod GC."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from mcm.emulator.controllers import Controllers
from mcm.emulator.emulator import Emulator
from mcm.runtime.clock import FakeClock
from tests.emulator.ctl import api_client, create, node, pod

NS = "default"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(_dt.datetime.now(_dt.UTC))


@pytest.fixture
def emu(clock: FakeClock) -> Iterator[Emulator]:
    """An emulator whose controllers run on a fake clock (``emu.controllers``)."""
    with Emulator(controllers=False) as emulator:
        controllers = Controllers(emulator.storage, clock=clock)
        controllers.start()
        emulator.controllers = controllers
        create(emulator, "nodes", node("n1"))
        try:
            yield emulator
        finally:
            controllers.stop()


def ctl(emu: Emulator) -> Controllers:
    controllers = emu.controllers
    assert isinstance(controllers, Controllers)
    return controllers


def delete_pod(emu: Emulator, name: str, **options: Any) -> dict[str, Any]:
    body, _ = emu.storage.delete(emu.resource_type("pods"), NS, name, options)
    return body


def gone(emu: Emulator, name: str) -> bool:
    return emu.get("pods", NS, name) is None


def test_kubelet_mode_finishes_after_capped_grace(emu: Emulator, clock: FakeClock) -> None:
    create(emu, "pods", pod("p", "n1"), NS)
    marked = delete_pod(emu, "p")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert not gone(emu, "p")
    clock.step(1.5)
    assert not emu.wait_for(lambda: gone(emu, "p"), timeout=0.2)
    clock.step(0.5)  # max_grace = 2 s
    assert emu.wait_for(lambda: gone(emu, "p"), timeout=5)


def test_kubelet_mode_uses_shorter_grace_and_time_scale(emu: Emulator, clock: FakeClock) -> None:
    ctl(emu).kubelet.time_scale = 0.5
    create(emu, "pods", pod("p", "n1", grace=1), NS)
    delete_pod(emu, "p")
    clock.step(0.5)
    assert emu.wait_for(lambda: gone(emu, "p"), timeout=5)


def test_kubelet_down_node_keeps_pod_terminating(emu: Emulator, clock: FakeClock) -> None:
    create(emu, "nodes", node("down", {"emu.sim/kubelet-down": "true"}))
    create(emu, "pods", pod("p", "down"), NS)
    delete_pod(emu, "p")
    clock.step(60)
    assert not emu.wait_for(lambda: gone(emu, "p"), timeout=0.3)
    assert ctl(emu).kubelet.finish(NS, "p") is True
    assert gone(emu, "p")


def test_immediate_mode_removes_at_once(emu: Emulator) -> None:
    ctl(emu).kubelet.mode = "immediate"
    create(emu, "pods", pod("p", "n1"), NS)
    delete_pod(emu, "p")
    assert gone(emu, "p")


def test_manual_mode_waits_for_finish(emu: Emulator, clock: FakeClock) -> None:
    ctl(emu).kubelet.mode = "manual"
    create(emu, "nodes", node("n2"))
    for name, node_name in (("a", "n1"), ("b", "n1"), ("c", "n2")):
        create(emu, "pods", pod(name, node_name), NS)
        delete_pod(emu, name)
    clock.step(120)
    assert not emu.wait_for(lambda: gone(emu, "a"), timeout=0.2)
    assert ctl(emu).kubelet.finish_all(node="n1") == 2
    assert gone(emu, "a") and gone(emu, "b") and not gone(emu, "c")
    assert ctl(emu).kubelet.finish(NS, "c") is True
    assert gone(emu, "c")
    assert ctl(emu).kubelet.finish(NS, "c") is False


def test_finalizer_keeps_pod_after_kubelet_delete(emu: Emulator) -> None:
    ctl(emu).kubelet.mode = "manual"
    create(emu, "pods", pod("p", "n1", finalizers=["example.com/hold"]), NS)
    delete_pod(emu, "p")
    ctl(emu).kubelet.finish(NS, "p")
    held = emu.get("pods", NS, "p")
    assert held is not None
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0
    rt = emu.resource_type("pods")
    emu.storage.guaranteed_update(
        rt, NS, "p", lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}}
    )
    assert gone(emu, "p")


def test_set_terminal_phase_before_removal(emu: Emulator) -> None:
    ctl(emu).kubelet.mode = "manual"
    ctl(emu).kubelet.set_terminal_phase = True
    create(emu, "pods", pod("p", "n1"), NS)
    delete_pod(emu, "p")
    ctl(emu).kubelet.finish(NS, "p")
    changes = [c for c in emu.history("pods") if c.key == (NS, "p")]
    assert [c.type for c in changes][-2:] == ["MODIFIED", "DELETED"]
    assert changes[-2].new.obj["status"]["phase"] == "Succeeded"


def test_run_pods_makes_bound_pods_running_and_ready(emu: Emulator, tmp_path: Path) -> None:
    ctl(emu).kubelet.run_pods = True
    create(emu, "pods", pod("bound", "n1"), NS)
    create(emu, "pods", pod("unbound"), NS)
    bound = emu.get("pods", NS, "bound")
    assert bound is not None
    assert bound["status"]["phase"] == "Running"
    assert {c["type"]: c["status"] for c in bound["status"]["conditions"]}["Ready"] == "True"
    assert emu.get("pods", NS, "unbound")["status"]["phase"] == "Pending"  # type: ignore[index]
    api = api_client(emu, tmp_path)
    typed = client.CoreV1Api(api).read_namespaced_pod("bound", NS)
    assert typed.status.container_statuses[0].state.running is not None
    api.close()


def test_unscheduled_pod_delete_is_immediate(emu: Emulator) -> None:
    create(emu, "pods", pod("p"), NS)
    delete_pod(emu, "p")
    assert gone(emu, "p")


def test_pod_gc_deletes_pods_of_missing_nodes(emu: Emulator, clock: FakeClock) -> None:
    create(emu, "nodes", node("doomed"))
    create(emu, "pods", pod("p", "doomed"), NS)
    create(emu, "pods", pod("stays", "n1"), NS)
    emu.storage.delete(emu.resource_type("nodes"), "", "doomed", {})
    clock.step(1)
    assert not emu.wait_for(lambda: gone(emu, "p"), timeout=0.2)
    clock.step(1.5)
    assert emu.wait_for(lambda: gone(emu, "p"), timeout=5)
    assert not gone(emu, "stays")


def test_pod_gc_spares_pod_when_node_comes_back(emu: Emulator, clock: FakeClock) -> None:
    create(emu, "pods", pod("p", "late"), NS)
    create(emu, "nodes", node("late"))
    clock.step(5)
    assert not emu.wait_for(lambda: gone(emu, "p"), timeout=0.3)


def test_real_emulator_default_kubelet_mode_removes_pod(tmp_path: Path) -> None:
    with Emulator() as emu:
        emu.controllers.kubelet.time_scale = 0.05
        create(emu, "nodes", node("n1"))
        create(emu, "pods", pod("p", "n1"), NS)
        delete_pod(emu, "p")
        assert emu.wait_for(lambda: gone(emu, "p"), timeout=5)


def test_attach_detach_simulator(emu: Emulator, clock: FakeClock) -> None:
    from mcm.emulator.controllers.attachdetach import CsiVolume, attachment_name

    ctl(emu).attachdetach.enabled = True
    create(
        emu,
        "persistentvolumes",
        {
            "metadata": {"name": "pv1"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": "d.csi", "volumeHandle": "h1"},
            },
        },
    )
    create(
        emu,
        "persistentvolumeclaims",
        {"metadata": {"name": "c1"}, "spec": {"volumeName": "pv1", "accessModes": ["ReadWriteOnce"]}},
        NS,
    )
    body = pod("p", "n1")
    body["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "c1"}}]
    create(emu, "pods", body, NS)
    unique = "kubernetes.io/csi/d.csi^h1"
    node_status = emu.get("nodes", "", "n1")["status"]  # type: ignore[index]
    assert node_status["volumesAttached"] == [{"name": unique, "devicePath": ""}]
    assert node_status["volumesInUse"] == [unique]
    name = attachment_name(CsiVolume("pv1", "d.csi", "h1"), "n1")
    attachment = emu.get(("storage.k8s.io", "volumeattachments"), "", name)
    assert attachment is not None
    assert attachment["spec"] == {
        "attacher": "d.csi",
        "nodeName": "n1",
        "source": {"persistentVolumeName": "pv1"},
    }
    assert attachment["status"]["attached"] is True
    ctl(emu).kubelet.mode = "immediate"
    delete_pod(emu, "p")
    clock.step(1)
    assert emu.wait_for(lambda: emu.get(("storage.k8s.io", "volumeattachments"), "", name) is None, timeout=5)
    assert emu.get("nodes", "", "n1")["status"]["volumesAttached"] == []  # type: ignore[index]


def test_event_ttl_expires_events_after_last_write(emu: Emulator, clock: FakeClock) -> None:
    ctl(emu).eventttl.ttl = 60
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "R",
        "message": "m",
        "count": 1,
    }
    create(emu, "events", event, NS)
    clock.step(50)
    rt = emu.resource_type("events")
    emu.storage.guaranteed_update(rt, NS, "e", lambda o: {**o, "count": 2})
    clock.step(50)
    assert not emu.wait_for(lambda: emu.get("events", NS, "e") is None, timeout=0.2)
    clock.step(11)
    assert emu.wait_for(lambda: emu.get("events", NS, "e") is None, timeout=5)

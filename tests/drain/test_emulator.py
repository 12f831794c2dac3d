"""The drain against the emulator over real HTTP: a full node, a controller restart, a vanishing node."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mcm.drain import DrainMetrics, DrainOptions, cordon_node, run_drain
from mcm.driver import FakeDriver
from mcm.emulator import Emulator
from mcm.runtime.clock import REAL_CLOCK
from mcm.runtime.objects import Obj
from tests.drain.emulated import NS, Informers, held_pdb, pdb, pod, volume_objects
from tests.emulator.ctl import create, node

VAS = ("storage.k8s.io", "volumeattachments")
PDBS = ("policy", "poddisruptionbudgets")


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        emulator.controllers.kubelet.run_pods = True
        emulator.controllers.kubelet.mode = "immediate"
        emulator.controllers.attachdetach.enabled = True
        emulator.controllers.attachdetach.detach_delay = 0.1
        create(emulator, "nodes", node("n1"))
        create(emulator, "nodes", node("n2"))
        yield emulator


@pytest.fixture
def kubeconfig(emu: Emulator, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    emu.write_kubeconfig(path)
    return path


def seed_pods(
    emu: Emulator, *, plain: int, with_pv: int, labels: dict[int, dict[str, str]] | None = None
) -> None:
    for i in range(plain):
        create(emu, "pods", pod(f"app-{i}", "n1", labels=(labels or {}).get(i)), NS)
    for i in range(with_pv):
        for obj in volume_objects(f"data-{i}"):
            create(
                emu,
                "persistentvolumes" if obj["kind"] == "PersistentVolume" else "persistentvolumeclaims",
                obj,
                NS,
            )
        create(emu, "pods", pod(f"db-{i}", "n1", labels={"stateful": "yes"}, claim=f"data-{i}"), NS)
    assert emu.wait_for(lambda: len(attachments(emu, "n1")) == with_pv, timeout=10)


def attachments(emu: Emulator, node_name: str) -> list[Obj]:
    return [va for va in emu.list(VAS) if va["spec"]["nodeName"] == node_name]


def pods_on(emu: Emulator, node_name: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in emu.list("pods") if p["spec"].get("nodeName") == node_name)


def reschedule_to_n2(emu: Emulator, informers: Informers) -> None:
    """A StatefulSet controller and scheduler in one: a deleted PV pod comes back on n2."""

    def replace(old: Obj) -> None:
        if old["metadata"].get("labels", {}).get("stateful") != "yes" or old["spec"].get("nodeName") != "n1":
            return
        claim = old["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        create(emu, "pods", pod(f"{old['metadata']['name']}-r", "n2", claim=claim), NS)

    informers.on_pod_delete(replace)


def metric(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name)
    return 0.0 if value is None else value


@pytest.mark.slow
def test_full_node_with_a_blocking_pdb_ends_in_the_force_path(emu: Emulator, kubeconfig: Path) -> None:
    held = {100, 101, 102}
    labels = {i: {"app": "a"} for i in range(5)} | {i: {"app": "held"} for i in held}
    seed_pods(emu, plain=103, with_pv=10, labels=labels)  # 113 pods minus the 3 held = 110 drained
    emu.seed([pdb("a", {"app": "a"}, minAvailable=0)])
    emu.seed([held_pdb("held", {"app": "held"})], bypass_strategy=True)
    informers = Informers(kubeconfig)
    reschedule_to_n2(emu, informers)
    informers.start()
    registry = CollectorRegistry()
    metrics = DrainMetrics(registry)
    try:
        cordon_node(informers.client, "n1")
        options = DrainOptions(timeout=8, max_evict_retries=3, pv_detach_timeout=5, pv_reattach_timeout=5)
        result = run_drain(
            informers.client, informers.listers, FakeDriver(), "n1", options,
            clock=REAL_CLOCK, stop=threading.Event(), hub=informers.hub, metrics=metrics,
        )  # fmt: skip
        assert not result.ok and result.timed_out
        assert sorted(p.key for p in result.left_behind) == [f"{NS}/app-{i}" for i in sorted(held)]
        assert len(result.evicted) == 110
        assert pods_on(emu, "n1") == [f"app-{i}" for i in sorted(held)]
        assert sorted(p["metadata"]["name"] for p in emu.list("pods") if p["spec"]["nodeName"] == "n2") == [
            f"db-{i}-r" for i in range(10)
        ]
        assert emu.get("nodes", "", "n1")["spec"]["unschedulable"] is True  # type: ignore[index]

        forced_options = DrainOptions(timeout=60, max_evict_retries=1, force=True)
        forced = run_drain(
            informers.client, informers.listers, FakeDriver(), "n1", forced_options,
            clock=REAL_CLOCK, stop=threading.Event(), hub=informers.hub, metrics=metrics,
        )  # fmt: skip
        assert forced.ok, forced
        assert sorted(forced.deleted) == [f"{NS}/app-{i}" for i in sorted(held)]
        assert pods_on(emu, "n1") == []
        assert metric(registry, "mcm_machine_drain_evicted_pods_total") == 110
        assert metric(registry, "mcm_machine_drain_deleted_pods_total") == 3
        assert metric(registry, "mcm_machine_drain_duration_seconds_count") == 2
    finally:
        informers.close()


def test_drain_resumes_after_a_controller_restart(emu: Emulator, kubeconfig: Path) -> None:
    seed_pods(emu, plain=40, with_pv=3)
    first = Informers(kubeconfig)
    deleted: list[str] = []
    lock = threading.Lock()

    def count(old: Obj) -> None:
        with lock:
            deleted.append(old["metadata"]["name"])
            if len(deleted) == 10:
                first.stop.set()  # the controller shuts down mid-drain

    first.on_pod_delete(count)
    first.start()
    options = DrainOptions(timeout=60, max_evict_retries=3, pv_detach_timeout=5, pv_reattach_timeout=0.1,
                           max_parallel_evictions=2)  # fmt: skip
    try:
        interrupted = run_drain(
            first.client,
            first.listers,
            FakeDriver(),
            "n1",
            options,
            clock=REAL_CLOCK,
            stop=first.stop,
            hub=first.hub,
        )
    finally:
        first.close()
    assert not interrupted.ok
    assert {p.reason for p in interrupted.left_behind} <= {"drain stopped"}
    assert interrupted.left_behind

    second = Informers(kubeconfig).start()
    try:
        resumed = run_drain(
            second.client,
            second.listers,
            FakeDriver(),
            "n1",
            options,
            clock=REAL_CLOCK,
            stop=second.stop,
            hub=second.hub,
        )
    finally:
        second.close()
    assert resumed.ok, resumed
    assert pods_on(emu, "n1") == []
    first_done = set(interrupted.evicted) | set(interrupted.gone)
    second_done = set(resumed.evicted) | set(resumed.gone)
    assert not first_done & second_done  # nothing is drained twice
    assert second_done <= {p.key for p in interrupted.left_behind}  # the restart picks up the rest


def test_node_vanishing_mid_drain_ends_cleanly(emu: Emulator, kubeconfig: Path) -> None:
    emu.controllers.kubelet.mode = "manual"  # evicted pods stay terminating
    seed_pods(emu, plain=30, with_pv=2)
    informers = Informers(kubeconfig)
    gone = threading.Event()

    def delete_node(_old: Any, new: Any) -> None:
        if new["metadata"].get("deletionTimestamp") and not gone.is_set():
            gone.set()
            emu.storage.delete(emu.resource_type("nodes"), "", "n1", {})

    from mcm.runtime.cache import ResourceEventHandlerFuncs
    from mcm.runtime.client.resources import PODS

    informers.factory.informer_for(PODS).add_event_handler(ResourceEventHandlerFuncs(on_update=delete_node))
    informers.start()
    options = DrainOptions(timeout=60, max_evict_retries=3, pv_detach_timeout=30, pv_reattach_timeout=30)
    try:
        result = run_drain(
            informers.client, informers.listers, FakeDriver(), "n1", options,
            clock=REAL_CLOCK, stop=threading.Event(), hub=informers.hub,
        )  # fmt: skip
    finally:
        informers.close()
    assert result.error is None, result
    assert result.node_gone
    assert result.duration < 15
    outcomes = [*result.evicted, *result.deleted, *result.gone, *(p.key for p in result.left_behind)]
    assert len(outcomes) == len(set(outcomes)) == 32
    assert {p.reason for p in result.left_behind} <= {"node not found"}

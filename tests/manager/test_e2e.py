"""End to end on the emulator: the manager with mcm's machine controller, the fake driver and
the node simulator (``cluster.py``). Roll-out bounds are checked by a monitor on its own watch
of the Machines, not by the manager's bookkeeping."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.controller import ControllerOptions
from mcm.manager import constants as k
from mcm.runtime import objects as o

from .cluster import NS, ManagerEnv, Monitor, eventually, md
from .command import ManagerCommand


@pytest.fixture
def env(tmp_path: Path) -> Iterator[ManagerEnv]:
    environment = ManagerEnv(tmp_path)
    try:
        yield environment
    finally:
        environment.close()


def _to_class(name: str) -> Any:
    return lambda d: d["spec"]["template"]["spec"]["class"].update(name=name)


def _roll(env: ManagerEnv, replicas: int, surge: int, unavailable: int) -> Monitor:
    env.start()
    monitor = Monitor(env).__enter__()
    env.deployments.create(md(replicas=replicas, max_surge=surge, max_unavailable=unavailable), namespace=NS)
    eventually(lambda: env.settled(replicas), what=f"{replicas} Running machines")
    monitor.watch(max_machines=replicas + surge, min_running=replicas - unavailable)
    env.update_deployment(_to_class("class-b"))
    eventually(lambda: env.settled(replicas, "class-b"), what="rolled to class-b")
    monitor.__exit__()
    return monitor


def test_create_and_roll_with_max_unavailable_zero(env: ManagerEnv) -> None:
    monitor = _roll(env, 3, 1, 0)
    assert monitor.violations == [] and monitor.max_seen == 4


def test_roll_with_max_surge_zero(env: ManagerEnv) -> None:
    monitor = _roll(env, 3, 0, 1)
    assert monitor.violations == [] and monitor.max_seen == 3 and monitor.min_running_seen == 2


def test_recreate(env: ManagerEnv) -> None:
    env.start()
    env.deployments.create(md(replicas=2, strategy="Recreate"), namespace=NS)
    eventually(lambda: env.settled(2), what="2 Running machines")
    mixed: list[set[str]] = []
    with Monitor(env) as monitor:
        monitor.watch(max_machines=2, min_running=0)
        env.update_deployment(_to_class("class-b"))

        def done() -> bool:
            classes = {o.text(m, "spec", "class", "name") for m in env.all_machines()}
            if len(classes) > 1:
                mixed.append(classes)
            return env.settled(2, "class-b")

        eventually(done, what="recreated on class-b")
    assert mixed == [] and monitor.violations == []


def test_scale_up_down_and_to_zero(env: ManagerEnv) -> None:
    env.start()
    env.deployments.create(md(replicas=1), namespace=NS)
    eventually(lambda: env.settled(1), what="1 machine")
    scale = env.deployments.get("pool", namespace=NS, subresource="scale")  # as kubectl scale does
    env.deployments.update({**scale, "spec": {"replicas": 4}}, namespace=NS, subresource="scale")
    eventually(lambda: env.settled(4), what="scaled up to 4")
    env.update_deployment(lambda d: d["spec"].update(replicas=2))
    eventually(lambda: env.settled(2), what="scaled down to 2")
    env.update_deployment(lambda d: d["spec"].update(replicas=0))
    eventually(lambda: env.all_machines() == [] and env.driver.vms == {}, what="scaled to 0")
    eventually(lambda: (o.sub(env.deployment(), "status").get("replicas") or 0) == 0, what="status 0")
    assert len(env.all_sets()) == 1


def test_a_failed_machine_is_replaced(tmp_path: Path) -> None:
    env = ManagerEnv(tmp_path, controller_options=ControllerOptions(namespace=NS, machine_health_timeout=0.5))
    try:
        env.start()
        env.deployments.create(md(replicas=2), namespace=NS)
        eventually(lambda: env.settled(2), what="2 machines")
        victim = o.name_of(env.all_machines()[0])
        env.sim.set_ready(victim, False)
        eventually(
            lambda: all(o.name_of(m) != victim for m in env.all_machines()), what="failed machine gone"
        )
        eventually(lambda: env.settled(2), what="healed to 2 Running machines")
    finally:
        env.close()


def test_a_deleted_node_takes_its_machine_and_the_set_heals(env: ManagerEnv) -> None:
    env.start()
    env.deployments.create(md(replicas=2), namespace=NS)
    eventually(lambda: env.settled(2), what="2 machines")
    victim = env.all_machines()[0]
    env.sim.vanish(o.label(victim, c.LABEL_NODE) or o.name_of(victim))
    eventually(
        lambda: all(o.name_of(m) != o.name_of(victim) for m in env.all_machines()), what="machine gone"
    )
    eventually(lambda: env.settled(2), what="healed to 2 Running machines")


def test_rollback(env: ManagerEnv) -> None:
    env.start()
    env.deployments.create(md(replicas=2), namespace=NS)
    eventually(lambda: env.settled(2), what="2 machines")
    env.update_deployment(_to_class("class-b"))
    eventually(lambda: env.settled(2, "class-b"), what="on class-b")
    env.update_deployment(lambda d: d["spec"].update(rollbackTo={"revision": 0}))
    eventually(lambda: env.settled(2, "class-a"), what="rolled back to class-a")
    deployment = env.deployment()
    assert "rollbackTo" not in deployment["spec"]
    assert deployment["spec"]["template"]["spec"]["class"]["name"] == "class-a"
    assert o.annotation(deployment, k.ANNOTATION_REVISION) == "3"


def test_overshoot_freezes_and_unfreezes(env: ManagerEnv) -> None:
    env.start()
    env.deployments.create(md(replicas=2, max_surge=1, max_unavailable=0), namespace=NS)
    eventually(lambda: env.settled(2), what="2 machines")
    machine_set = env.all_sets()[0]
    labels = o.labels_of(o.sub(machine_set, "spec", "template"))
    env.stop_machine_side()  # deletions now stay pending: the surplus stays counted
    for i in range(4):
        env.machines.create(
            {
                "apiVersion": "machine.sapcloud.io/v1alpha1",
                "kind": "Machine",
                "metadata": {
                    "name": f"extra-{i}",
                    "namespace": NS,
                    "labels": labels,
                    "finalizers": [c.MCM_FINALIZER],
                },
                "spec": {"class": {"kind": "MachineClass", "name": "class-a"}},
            },
            namespace=NS,
        )
    name = o.name_of(machine_set)

    def frozen() -> bool:
        ms = env.machine_sets.get(name, namespace=NS)
        conditions = o.sub(ms, "status").get("machineSetCondition") or []
        return o.label(ms, "freeze") == "True" and any(cond["type"] == "Frozen" for cond in conditions)

    eventually(frozen, what="the set frozen")
    eventually(lambda: o.label(env.deployment(), "freeze") == "True", what="the deployment frozen")
    assert env.manager is not None
    from prometheus_client import generate_latest

    metrics = generate_latest(env.manager.registry).decode()
    assert (
        f'mcm_machine_set_status_condition{{condition="Frozen",name="{name}",namespace="{NS}"}} 1.0'
        in metrics
    )
    env.update_deployment(lambda d: d["spec"].update(replicas=3))
    env.start_machine_side()
    eventually(lambda: not frozen() and o.label(env.deployment(), "freeze") is None, what="unfrozen")
    eventually(lambda: env.settled(3), what="3 machines after the unfreeze")


def test_bad_input_leaves_valid_deployments_working(env: ManagerEnv) -> None:
    env.start()
    bad = md("bad", replicas=2)
    del bad["spec"]["strategy"]["rollingUpdate"]
    env.deployments.create(bad, namespace=NS)
    inplace = md("inplace", replicas=1)
    inplace["spec"]["strategy"] = {"type": "InPlaceUpdate"}
    env.deployments.create(inplace, namespace=NS)
    env.deployments.create(md("good", replicas=2), namespace=NS)

    def invalid(name: str) -> bool:
        conditions = o.sub(env.deployment(name), "status").get("conditions") or []
        return any(cond.get("reason") == "InvalidSpec" for cond in conditions)

    eventually(lambda: invalid("bad") and invalid("inplace"), what="InvalidSpec conditions")
    eventually(lambda: len(env.running()) == 2, what="the valid deployment's machines")
    assert {o.labels_of(m)["name"] for m in env.all_machines()} == {"good"}
    assert env.manager is not None and env.manager.has_synced()

    def reasons(name: str) -> set[str]:
        return {reason for kind, who, reason, _ in env.events() if who == name}

    eventually(lambda: "InvalidSpec" in reasons("bad") and "InvalidSpec" in reasons("inplace"), what="Events")
    eventually(lambda: "ScalingMachineSet" in reasons("good"), what="the valid deployment's Events")


def test_a_manager_restarted_mid_roll_out_resumes_without_extra_machines(env: ManagerEnv) -> None:
    env.start()
    with Monitor(env) as monitor:
        env.deployments.create(md(replicas=4, max_surge=1, max_unavailable=0), namespace=NS)
        eventually(lambda: env.settled(4), what="4 machines")
        monitor.watch(max_machines=5, min_running=4)
        env.update_deployment(_to_class("class-b"))
        eventually(lambda: len(env.running("class-b")) >= 1, what="the roll-out under way")
        env.stop_manager()
        assert 0 < len(env.running("class-b")) < 4
        env.start_manager()
        eventually(lambda: env.settled(4, "class-b"), what="roll-out finished after the restart")
    assert monitor.violations == [] and monitor.max_seen <= 5


def test_kubectl_get_shows_ready_updated_and_available(env: ManagerEnv) -> None:
    from tests.emulator.raw import Raw

    env.start()
    env.deployments.create(md(replicas=2), namespace=NS)
    eventually(lambda: env.settled(2), what="2 machines")
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    raw = Raw(env.pair.control.url)
    rows = {}
    for plural in ("machinedeployments", "machinesets"):
        code, _, table = raw.request(
            "GET", f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{NS}/{plural}", headers={"Accept": accept}
        )
        assert code == 200 and table["kind"] == "Table"
        names = [col["name"] for col in table["columnDefinitions"]]
        rows[plural] = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert {
        key: rows["machinedeployments"][key] for key in ("Ready", "Desired", "Up-to-date", "Available")
    } == {"Ready": 2, "Desired": 2, "Up-to-date": 2, "Available": 2}
    assert {key: rows["machinesets"][key] for key in ("Desired", "Current", "Ready")} == {
        "Desired": 2,
        "Current": 2,
        "Ready": 2,
    }


def test_a_manager_killed_again_and_again_mid_roll_out_resumes_without_extra_machines(
    env: ManagerEnv,
) -> None:
    """SIGKILL, not a clean stop: whatever write was in flight is cut off. The real
    ``machine-controller-manager`` command, with leader election: each new process takes over
    the Lease its killed predecessor held (the same identity)."""
    import random
    import time

    manager = ManagerCommand(
        env.directory,
        env.pair.control_kubeconfig,
        env.pair.target_kubeconfig,
        f"--namespace={NS}",
        "--machine-safety-overshooting-period=1s",
        "--concurrent-syncs=4",
    )
    env.start_machine_side()
    rng = random.Random(7)
    try:
        with Monitor(env) as monitor:
            env.deployments.create(md(replicas=4, max_surge=1, max_unavailable=1), namespace=NS)
            eventually(lambda: env.settled(4), what="4 machines")
            monitor.watch(max_machines=5, min_running=3)
            env.update_deployment(_to_class("class-b"))
            for _ in range(4):
                time.sleep(rng.uniform(0.3, 1.5))
                manager.kill()
                manager.restart()
            eventually(lambda: env.settled(4, "class-b"), what="roll-out finished after the kills")
        assert monitor.violations == [] and monitor.max_seen <= 5
        assert len(env.driver.vms) == 4
    finally:
        manager.stop(signal.SIGKILL)

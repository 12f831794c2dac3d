"""The chart's machine-controller-manager on the real pair: its ServiceAccount and RBAC applied for
real, and the ``machine-controller-manager`` command run with the chart's arguments and that
account's token under a real authorizer, through a MachineDeployment's creation, a roll-out, a
scale-down and its deletion: it is allowed every call it makes, and ``kubectl auth can-i --list``
for the account shows nothing it does not use but the calls of code paths this run does not
reach (``tests/app/test_chart_manager_rbac.py`` reaches them on the emulator)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINES
from mcm.runtime import objects as o
from mcm.runtime.client.errors import Conflict, NotFound
from mcm.runtime.client.resources import NAMESPACES, NODES, SECRETS
from mcm.testing.envtest import ControlPlanePair
from tests.app.test_command import Controller
from tests.manager.cluster import md
from tests.manager.command import ManagerCommand
from tests.realapi.env import eventually, unique
from tests.realapi.test_chart import (
    Call,
    RbacRun,
    _apply,
    audited_calls,
    granted_beyond_baseline,
    local_provider,
    render,
)
from tests.realapi.test_chart import pytestmark as chart_marks

pytestmark = chart_marks


def _manager_args(deployment: dict[str, Any]) -> list[str]:
    """The chart's arguments of the manager container but the kubeconfigs, address and port
    (``ManagerCommand`` adds the test's)."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    replaced = ("--control-kubeconfig", "--target-kubeconfig", "--address", "--port")
    return [arg for arg in container["args"] if arg.split("=", 1)[0] not in replaced]


@pytest.fixture(scope="module")
def manager_rbac_run(
    real_pair: ControlPlanePair, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RbacRun]:
    """The chart's manager account and RBAC installed into both clusters, then the manager run
    as that account (the controller beside it as the admin) through a MachineDeployment's life."""
    tmp_path = tmp_path_factory.mktemp("manager-rbac")
    release, namespace = unique("mgr"), unique("mgr-ns")
    values = {**local_provider(), "manager": {"logFormat": "json"}}
    templates = render(values, release, namespace)
    control, target = real_pair.control, real_pair.target
    (account,) = templates["manager-serviceaccount.yaml"]
    user = f"system:serviceaccount:{namespace}:{account['metadata']['name']}"
    for plane in (control, target):
        plane.client().resource(NAMESPACES).create({"metadata": {"name": namespace}})
        _apply(plane, [account], tmp_path)
    _apply(control, templates["manager-rbac-control.yaml"], tmp_path)
    _apply(target, templates["manager-rbac-target.yaml"], tmp_path)
    kubeconfigs = {
        plane.name: plane.write_kubeconfig(
            tmp_path / f"{plane.name}-manager.kubeconfig",
            token=plane.service_account_token(namespace, account["metadata"]["name"]),
        )
        for plane in (control, target)
    }
    (deployment,) = templates["manager-deployment.yaml"]
    args = _manager_args(deployment)
    admin = control.client()
    admin.resource(SECRETS).create(
        {"metadata": {"name": "userdata"}, "stringData": {"userData": "#!/bin/sh\n"}}, namespace=namespace
    )
    for name in ("class-a", "class-b"):
        machine_class = {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "MachineClass",
            "metadata": {"name": name},
            "provider": "local",
            "providerSpec": {"bootDelaySeconds": 0.2},
            "secretRef": {"name": "userdata", "namespace": namespace},
        }
        admin.resource(MACHINE_CLASSES).create(machine_class, namespace=namespace)
    controller = Controller(
        tmp_path,
        real_pair,  # type: ignore[arg-type]
        "controller",
        f"--namespace={namespace}",
        "--driver=local",
        f"--local-vm-namespace={namespace}-vms",
    )
    manager = ManagerCommand(tmp_path, kubeconfigs["control"], kubeconfigs["target"], *args)
    run = RbacRun(user, namespace)
    try:
        _a_deployments_life(admin, namespace)
        assert manager.stop() == 0, manager.log_text()
    finally:
        manager.stop(signal.SIGKILL)
        controller.stop()
        for node in target.client().resource(NODES).list()["items"]:
            if str(o.sub(node, "spec").get("providerID", "")).startswith(f"local:///{namespace}-vms/"):
                try:
                    target.client().resource(NODES).delete(o.name_of(node))
                except NotFound:
                    pass
    for plane in (control, target):
        calls, forbidden = audited_calls(plane, user)
        run.calls[plane.name] = calls
        run.forbidden += forbidden
        run.granted[plane.name] = granted_beyond_baseline(plane, user, (namespace,))
    yield run


def _a_deployments_life(admin: Any, namespace: str) -> None:
    deployments, machines = admin.resource(MACHINE_DEPLOYMENTS), admin.resource(MACHINES)
    body = md("pool", 2, revisionHistoryLimit=0)
    body["metadata"]["namespace"] = namespace
    deployments.create(body, namespace=namespace)

    def settled(replicas: int, class_name: str) -> bool:
        items = machines.list(namespace=namespace)["items"]
        running = [
            m
            for m in items
            if o.text(m, "status", "currentStatus", "phase") == "Running"
            and o.text(m, "spec", "class", "name") == class_name
            and not o.deletion_timestamp(m)
        ]
        status = o.sub(deployments.get("pool", namespace=namespace), "status")
        return (
            len(items)
            == len(running)
            == replicas
            == status.get("updatedReplicas")
            == status.get("availableReplicas")
        )

    eventually(lambda: settled(2, "class-a"), "2 Running machines under the manager's RBAC", 90)
    for change, replicas, class_name in (
        (lambda d: d["spec"]["template"]["spec"]["class"].update(name="class-b"), 2, "class-b"),
        (lambda d: d["spec"].update(replicas=1), 1, "class-b"),
    ):
        for _ in range(20):  # a conflict with the manager's own write: read again
            current = dict(deployments.get("pool", namespace=namespace))
            change(current)
            try:
                deployments.update(current, namespace=namespace)
                break
            except Conflict:
                continue
        eventually(lambda r=replicas, k=class_name: settled(r, k), f"{replicas} on {class_name}", 90)
    deployments.delete("pool", namespace=namespace)

    def gone() -> bool:
        try:
            deployments.get("pool", namespace=namespace)
        except NotFound:
            return not machines.list(namespace=namespace)["items"]
        return False

    eventually(gone, "the deployment and its machines deleted under the manager's RBAC", 90)


def test_every_call_the_manager_makes_under_the_charts_rbac_is_allowed(manager_rbac_run: RbacRun) -> None:
    assert manager_rbac_run.forbidden == []
    control, target = manager_rbac_run.calls["control"], manager_rbac_run.calls["target"]
    assert ("create", "machine.sapcloud.io", "machines") in control
    assert ("delete", "machine.sapcloud.io", "machinesets") in control, "the history limit deleted a set"
    assert ("update", "coordination.k8s.io", "leases") in control, "leader election ran"
    assert ("update", "", "nodes") in target, "the roll-out tainted and annotated nodes"


NOT_REACHED_HERE: dict[str, set[Call]] = {
    "control": {
        ("patch", "machine.sapcloud.io", "machines"),  # adoption and release of a Machine
        ("patch", "machine.sapcloud.io", "machinesets"),  # adoption and release of a MachineSet
        ("get", "machine.sapcloud.io", "machinedeployments"),  # the live read before adopting a set
        ("get", "machine.sapcloud.io", "machinesets"),  # a live read after a conflict, before adopting
        ("get", "machine.sapcloud.io", "machines"),  # before marking Terminating (the controller was first)
        ("update", "machine.sapcloud.io", "machines/status"),  # marking Terminating (idem)
        ("update", "machine.sapcloud.io", "machines"),  # template fields copied onto machines
        ("patch", "", "events"),  # a repeated Warning
    },
    "target": {("get", "", "nodes")},  # a live read after a conflicting node write
}
"""Grants of code paths this run may not reach; tests/app/test_chart_manager_rbac.py reaches
every one (on the emulator) and fails when any grant is unused there."""


def test_the_managers_account_may_do_nothing_the_manager_does_not_use(manager_rbac_run: RbacRun) -> None:
    for cluster, calls in NOT_REACHED_HERE.items():
        assert calls <= manager_rbac_run.granted[cluster], (
            f"{cluster}: an exemption the chart no longer grants"
        )
    unused = {
        cluster: sorted(
            " ".join(call) for call in granted - manager_rbac_run.calls[cluster] - NOT_REACHED_HERE[cluster]
        )
        for cluster, granted in manager_rbac_run.granted.items()
    }
    assert unused == {"control": [], "target": []}, "granted but never called:\n" + "\n".join(
        f"{cluster}: {call}" for cluster, calls in unused.items() for call in calls
    )

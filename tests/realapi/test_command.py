"""The ``machine-controller`` command on the real pair: leader election on a real Lease with two
replicas and a takeover, SIGTERM releasing the Lease, ``/metrics``, ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import LEASES, NAMESPACES, NODES, SECRETS
from mcm.testing.envtest import ControlPlanePair
from tests.app.test_command import Controller
from tests.conftest import REALAPI_MARKS
from tests.realapi.env import eventually, unique

pytestmark = list(REALAPI_MARKS)

ELECTION = (
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=500ms",
)


def local_objects(namespace: str, machines: list[str]) -> list[tuple[Any, dict[str, Any]]]:
    """A userData Secret, a local-provider MachineClass and ``machines`` in ``namespace``."""
    secret = {"metadata": {"name": "userdata"}, "stringData": {"userData": "#!/bin/sh\n"}}
    machine_class = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": "local"},
        "provider": "local",
        "providerSpec": {"bootDelaySeconds": 0.2},
        "secretRef": {"name": "userdata", "namespace": namespace},
    }
    spec = {"class": {"kind": "MachineClass", "name": "local"}}
    bodies = [
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": m},
            "spec": spec,
        }
        for m in machines
    ]
    return [(SECRETS, secret), (MACHINE_CLASSES, machine_class), *((MACHINES, b) for b in bodies)]


class Namespace:
    """A control-cluster namespace for one command test and the machines made in it."""

    def __init__(self, pair: ControlPlanePair) -> None:
        self.pair = pair
        self.name = unique("cmd")
        self.control: ClusterClient = load_config(str(pair.control_kubeconfig), qps=-1, burst=0)
        self.target: ClusterClient = load_config(str(pair.target_kubeconfig), qps=-1, burst=0)
        self.control.resource(NAMESPACES).create({"metadata": {"name": self.name}})
        self.machines: list[str] = []

    def create(self, count: int) -> list[str]:
        names = [unique("m") for _ in range(count)]
        objects = local_objects(self.name, names)
        if self.machines:
            objects = objects[2:]
        for resource, body in objects:
            self.control.resource(resource).create(body, namespace=self.name)
        self.machines += names
        return names

    def phases(self) -> dict[str, str]:
        items = self.control.resource(MACHINES).list(namespace=self.name).get("items") or []
        return {
            m["metadata"]["name"]: ((m.get("status") or {}).get("currentStatus") or {}).get("phase", "")
            for m in items
        }

    def all_running(self) -> bool:
        phases = self.phases()
        return bool(phases) and all(phases.get(m) == "Running" for m in self.machines)

    def lease_holder(self) -> str:
        try:
            lease = self.control.resource(LEASES).get("machine-controller", namespace=self.name)
        except NotFound:
            return ""
        return str(lease["spec"].get("holderIdentity") or "")

    def args(self) -> tuple[str, ...]:
        return (
            f"--namespace={self.name}",
            "--driver=local",
            f"--local-vm-namespace={self.name}-vms",
            *ELECTION,
        )

    def close(self) -> None:
        for name in self.machines:
            try:
                self.target.resource(NODES).delete(name)
            except NotFound:
                pass
        self.control.resource(NAMESPACES).delete(self.name)
        self.control.close()
        self.target.close()


@pytest.fixture
def ns(real_pair: ControlPlanePair) -> Iterator[Namespace]:
    namespace = Namespace(real_pair)
    try:
        yield namespace
    finally:
        namespace.close()


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def test_two_replicas_one_leads_the_other_takes_over_and_sigterm_releases_the_lease(
    tmp_path: Path, real_pair: ControlPlanePair, ns: Namespace
) -> None:
    first = Controller(tmp_path, real_pair, "first", *ns.args())  # type: ignore[arg-type]
    second: Controller | None = None
    try:
        eventually(lambda: first.logged("became leader"), "the first replica to lead")
        leader = eventually(ns.lease_holder, "a holder of the real Lease")
        second = Controller(tmp_path, real_pair, "second", *ns.args())  # type: ignore[arg-type]
        eventually(
            lambda: second is not None and second.logged("campaigning for leadership"),
            "the second to campaign",
        )
        ns.create(2)
        eventually(ns.all_running, "2 Running machines")
        assert not second.logged("starting the machine controller"), "only the leader reconciles"
        assert ns.lease_holder() == leader

        status, body = _get(first.port, "/metrics")
        assert status == 200
        assert "mcm_cloud_api_requests_total" in body and "workqueue_depth" in body, body[:2000]
        assert _get(first.port, "/healthz")[0] == 200
        assert _get(first.port, "/readyz")[0] == 200

        first.stop(signal.SIGKILL)
        eventually(lambda: second is not None and second.logged("became leader"), "the takeover")
        assert ns.lease_holder() not in ("", leader)
        ns.create(1)
        eventually(ns.all_running, "the new machine Running under the new leader")
        assert _get(second.port, "/readyz")[0] == 200
        for name in ns.machines:
            ns.control.resource(MACHINES).delete(name, namespace=ns.name)
        eventually(lambda: ns.phases() == {}, "every machine deleted through the command")
        assert second.stop(signal.SIGTERM) == 0
        assert ns.lease_holder() == "", "SIGTERM releases the Lease"
    finally:
        first.stop(signal.SIGKILL)
        if second is not None:
            second.stop(signal.SIGKILL)

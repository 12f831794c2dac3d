"""The sample controller (examples/sample_controller) on a real kube-apiserver: the Foo CRD, owned
Deployments, status from the Deployment, Events, and the real garbage collector."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from examples.sample_controller.__main__ import ARTIFACTS, run_controller
from examples.sample_controller.controller import DEPLOYMENTS, FOOS
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, NAMESPACES
from mcm.testing.envtest import ControlPlanePair
from tests.conftest import REALAPI_MARKS
from tests.realapi.env import eventually, unique

pytestmark = list(REALAPI_MARKS)


class Foos:
    def __init__(self, client: ClusterClient, namespace: str) -> None:
        self.client, self.ns = client, namespace

    def create(self, name: str, **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": FOOS.api_version, "kind": "Foo", "metadata": {"name": name}, "spec": spec}
        return self.client.resource(FOOS).create(body, namespace=self.ns)

    def deployment(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.client.resource(DEPLOYMENTS).get(name, namespace=self.ns))
        except NotFound:
            return None

    def available(self, name: str) -> int | None:
        foo = self.client.resource(FOOS).get(name, namespace=self.ns)
        return (foo.get("status") or {}).get("availableReplicas")

    def events(self, foo: str, reason: str) -> list[dict[str, Any]]:
        items = self.client.resource(EVENTS).list(namespace=self.ns)["items"]
        return [e for e in items if e["involvedObject"].get("name") == foo and e["reason"] == reason]


@pytest.fixture
def foos(real_pair: ControlPlanePair) -> Iterator[Foos]:
    real_pair.control.install_crds(ARTIFACTS / "crd.yaml")
    client = load_config(str(real_pair.control_kubeconfig), qps=-1, burst=0)
    namespace = unique("sample")
    client.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    stop = threading.Event()
    thread = threading.Thread(target=run_controller, args=(client, stop), daemon=True)
    thread.start()
    try:
        yield Foos(client, namespace)
    finally:
        stop.set()
        thread.join(10)
        client.resource(NAMESPACES).delete(namespace)
        client.close()
    assert not thread.is_alive(), "the controller did not stop"


def test_foo_owns_its_deployment_follows_its_status_and_is_garbage_collected(foos: Foos) -> None:
    foo = foos.create("example", deploymentName="example-dep", replicas=2)
    deployment = eventually(lambda: foos.deployment("example-dep"), "the owned Deployment")
    assert deployment["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "name": "example",
            "uid": foo["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert deployment["spec"]["replicas"] == 2
    eventually(lambda: foos.events("example", "Synced"), "the Synced event")
    # No deployment controller runs: play it, and watch the Foo's status follow.
    status = {"status": {"replicas": 2, "availableReplicas": 2, "readyReplicas": 2, "observedGeneration": 1}}
    foos.client.resource(DEPLOYMENTS).patch("example-dep", status, namespace=foos.ns, subresource="status")
    eventually(lambda: foos.available("example") == 2, "the Foo's status from the Deployment")
    foos.client.resource(FOOS).patch("example", {"spec": {"replicas": 4}}, namespace=foos.ns)
    eventually(
        lambda: (foos.deployment("example-dep") or {})["spec"]["replicas"] == 4, "the scaled Deployment"
    )
    foos.client.resource(FOOS).delete("example", namespace=foos.ns)
    eventually(lambda: foos.deployment("example-dep") is None, "the real garbage collector")


def test_a_foreign_deployment_is_left_alone_and_invalid_specs_get_warnings(foos: Foos) -> None:
    labels = {"app": "other"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    foreign = {
        "metadata": {"name": "taken"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
    }
    foos.client.resource(DEPLOYMENTS).create(foreign, namespace=foos.ns)
    foos.create("claimer", deploymentName="taken", replicas=4)
    foos.create("bad-name", deploymentName="Not_A_DNS_Name", replicas=1)
    event = eventually(lambda: foos.events("claimer", "ErrResourceExists"), "ErrResourceExists")[0]
    assert (event["type"], event["message"]) == (
        "Warning",
        'Resource "taken" already exists and is not managed by Foo',
    )
    assert (foos.deployment("taken") or {})["spec"]["replicas"] == 2
    invalid = eventually(lambda: foos.events("bad-name", "ErrInvalidSpec"), "ErrInvalidSpec")[0]
    assert 'Deployment.apps "Not_A_DNS_Name" is invalid' in invalid["message"], invalid["message"]

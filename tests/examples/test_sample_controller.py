"""The sample controller (examples/sample_controller) against the emulator, over real HTTP."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from examples.sample_controller.__main__ import ARTIFACTS, run_controller
from examples.sample_controller.controller import DEPLOYMENTS, FOOS, Controller, ResourceExistsError
from mcm.emulator import Emulator
from mcm.runtime.cache import DeletedFinalStateUnknown, SharedInformerFactory
from mcm.runtime.client import ClusterClient, load_config
from tests.conftest import REPO_ROOT

NS = "default"
KUBECTL = shutil.which("kubectl")


@dataclass
class Cluster:
    emulator: Emulator
    client: ClusterClient

    def wait(self, what: str, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        assert self.emulator.wait_for(predicate, timeout), f"timed out waiting for {what}"

    def deployment(self, name: str) -> dict[str, Any] | None:
        return self.emulator.get(("apps", "deployments"), NS, name)

    def foo(self, name: str) -> dict[str, Any] | None:
        return self.emulator.get(("samplecontroller.k8s.io", "foos"), NS, name)

    def create_foo(self, name: str, **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": FOOS.api_version, "kind": "Foo", "metadata": {"name": name}, "spec": spec}
        return self.client.resource(FOOS).create(body, namespace=NS)

    def events(self, foo: str, reason: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.emulator.list("events", NS)
            if e["involvedObject"].get("name") == foo and e["reason"] == reason
        ]

    def available(self, foo: str) -> int | None:
        obj = self.foo(foo)
        return None if obj is None else (obj.get("status") or {}).get("availableReplicas")


def start_controller(client: ClusterClient) -> Callable[[], None]:
    stop = threading.Event()
    thread = threading.Thread(target=run_controller, args=(client, stop), daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the controller did not stop"

    return halt


@pytest.fixture
def cluster(emulator: Emulator, kubeconfig: str) -> Iterator[Cluster]:
    emulator.install_crds(ARTIFACTS / "crd.yaml")
    client = load_config(kubeconfig)
    halt = start_controller(client)
    yield Cluster(emulator, client)
    halt()
    client.close()


def available_is(cluster: Cluster, foo: str, replicas: int) -> bool:
    return cluster.available(foo) == replicas


def deployment_body(name: str, replicas: int = 2) -> dict[str, Any]:
    labels = {"app": "other"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def test_a_foo_gets_an_owned_deployment_and_reports_its_available_replicas(cluster: Cluster) -> None:
    foo = cluster.create_foo("example-foo", deploymentName="example-dep", replicas=2)
    cluster.wait("the Foo's status", lambda: cluster.available("example-foo") == 2)
    deployment = cluster.deployment("example-dep")
    assert deployment is not None
    assert deployment["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "name": "example-foo",
            "uid": foo["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = {"app": "nginx", "controller": "example-foo"}
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"] == {"matchLabels": labels}
    assert deployment["spec"]["template"]["metadata"]["labels"] == labels
    assert [(c["name"], c["image"]) for c in deployment["spec"]["template"]["spec"]["containers"]] == [
        ("nginx", "nginx:latest")
    ]
    cluster.wait("the Synced event", lambda: bool(cluster.events("example-foo", "Synced")))
    event = cluster.events("example-foo", "Synced")[0]
    assert (event["type"], event["message"]) == ("Normal", "Foo synced successfully")
    assert event["source"]["component"] == "sample-controller"


def test_the_foo_status_follows_the_deployment(cluster: Cluster) -> None:
    cluster.emulator.controllers.deployments.hold()
    cluster.create_foo("held", deploymentName="held", replicas=3)
    cluster.wait("the Foo's status", lambda: cluster.available("held") == 0)
    cluster.emulator.controllers.deployments.release()
    cluster.wait("the Foo's status after the rollout", lambda: cluster.available("held") == 3)


def test_scaling_the_foo_scales_the_deployment(cluster: Cluster) -> None:
    cluster.create_foo("scaled", deploymentName="scaled", replicas=1)
    cluster.wait("the Foo's status", lambda: cluster.available("scaled") == 1)
    for replicas in (5, 2):
        cluster.client.resource(FOOS).patch("scaled", {"spec": {"replicas": replicas}}, namespace=NS)
        cluster.wait(f"{replicas} available", functools.partial(available_is, cluster, "scaled", replicas))
        deployment = cluster.deployment("scaled")
        assert deployment is not None and deployment["spec"]["replicas"] == replicas


def test_a_foreign_deployment_of_the_same_name_is_left_alone_with_a_warning(cluster: Cluster) -> None:
    cluster.client.resource(DEPLOYMENTS).create(deployment_body("taken", replicas=2), namespace=NS)
    cluster.create_foo("claimer", deploymentName="taken", replicas=4)
    cluster.wait("the ErrResourceExists event", lambda: bool(cluster.events("claimer", "ErrResourceExists")))
    event = cluster.events("claimer", "ErrResourceExists")[0]
    assert event["type"] == "Warning"
    assert event["message"] == 'Resource "taken" already exists and is not managed by Foo'
    deployment = cluster.deployment("taken")
    assert deployment is not None
    assert "ownerReferences" not in deployment["metadata"]
    assert deployment["spec"]["replicas"] == 2
    assert cluster.available("claimer") is None
    assert not cluster.events("claimer", "Synced")


def test_a_deployment_deleted_behind_the_controllers_back_is_recreated(cluster: Cluster) -> None:
    cluster.create_foo("phoenix", deploymentName="phoenix", replicas=1)
    cluster.wait("the Deployment", lambda: cluster.deployment("phoenix") is not None)
    first = cluster.deployment("phoenix")
    assert first is not None
    cluster.client.resource(DEPLOYMENTS).delete("phoenix", namespace=NS)

    def recreated() -> bool:
        current = cluster.deployment("phoenix")
        return current is not None and current["metadata"]["uid"] != first["metadata"]["uid"]

    cluster.wait("the recreated Deployment", recreated)


def test_deleting_the_foo_garbage_collects_its_deployment(cluster: Cluster) -> None:
    cluster.create_foo("doomed", deploymentName="doomed", replicas=1)
    cluster.wait("the Deployment", lambda: cluster.deployment("doomed") is not None)
    cluster.client.resource(FOOS).delete("doomed", namespace=NS)
    cluster.wait("the Deployment's collection", lambda: cluster.deployment("doomed") is None)


def test_invalid_specs_get_a_warning_event_and_the_controller_carries_on(cluster: Cluster) -> None:
    cluster.create_foo("nameless", replicas=1)
    cluster.create_foo("bad-name", deploymentName="Not_A_DNS_Name", replicas=1)
    cluster.wait("the nameless event", lambda: bool(cluster.events("nameless", "ErrInvalidSpec")))
    cluster.wait("the bad-name event", lambda: bool(cluster.events("bad-name", "ErrInvalidSpec")))
    nameless = cluster.events("nameless", "ErrInvalidSpec")[0]
    assert nameless["type"] == "Warning"
    assert nameless["message"] == "default/nameless: deployment name must be specified"
    assert (
        'Deployment.apps "Not_A_DNS_Name" is invalid'
        in cluster.events("bad-name", "ErrInvalidSpec")[0]["message"]
    )
    cluster.create_foo("fine", deploymentName="fine", replicas=1)
    cluster.wait("the valid Foo's status", lambda: cluster.available("fine") == 1)
    # not retried: one event each, no second attempt
    for name in ("nameless", "bad-name"):
        assert [e.get("count", 1) for e in cluster.events(name, "ErrInvalidSpec")] == [1]
    assert cluster.deployment("Not_A_DNS_Name") is None


def test_handlers_resolve_owners_through_tombstones_and_ignore_resyncs(
    emulator: Emulator, kubeconfig: str
) -> None:
    client = load_config(kubeconfig)
    informers = SharedInformerFactory(client)
    controller = Controller(client, informers)
    try:
        foo = {
            "apiVersion": FOOS.api_version,
            "kind": "Foo",
            "metadata": {"name": "f", "namespace": NS, "uid": "u1"},
        }
        informers.informer_for(FOOS).get_indexer().add(foo)
        owned = {
            "metadata": {
                "name": "d",
                "namespace": NS,
                "resourceVersion": "5",
                "ownerReferences": [
                    {
                        "apiVersion": FOOS.api_version,
                        "kind": "Foo",
                        "name": "f",
                        "uid": "u1",
                        "controller": True,
                    }
                ],
            }
        }
        controller.deployment_updated(owned, owned)
        assert controller.workqueue.len() == 0, "a resync (same resourceVersion) is not a change"
        controller.handle_object(DeletedFinalStateUnknown("default/d", owned))
        assert controller.workqueue.len() == 1
        assert controller.workqueue.get() == ("default/f", False)
        for ignored in (
            DeletedFinalStateUnknown("default/d", None),
            {"metadata": {"name": "plain", "namespace": NS}},
            {
                "metadata": {
                    "name": "x",
                    "namespace": NS,
                    "ownerReferences": [{**owned["metadata"]["ownerReferences"][0], "kind": "Bar"}],
                }
            },
            {
                "metadata": {
                    "name": "y",
                    "namespace": NS,
                    "ownerReferences": [{**owned["metadata"]["ownerReferences"][0], "name": "gone"}],
                }
            },
        ):
            controller.handle_object(ignored)
        assert controller.workqueue.len() == 0
    finally:
        controller.workqueue.shut_down()
        controller.broadcaster.shutdown()
        client.close()


def test_the_demo_runs_from_the_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.sample_controller", "--demo"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Deployment example-foo (controlled by Foo example-foo)" in result.stdout
    assert "spec.replicas=3, status.availableReplicas=3" in result.stdout
    assert "Foo example-foo: status.availableReplicas=3" in result.stdout
    output = result.stdout + result.stderr
    for noise in ("Conflict", "unhandled_error", "Traceback", "dropped event", "unable_to_record_event"):
        assert noise not in output, output


def test_the_status_write_does_not_conflict_with_a_stale_cache_copy(
    emulator: Emulator, kubeconfig: str
) -> None:
    """The cache lags behind the controller's own last write; upstream's UpdateStatus of the
    cached Foo then fails with a Conflict (and was retried with a logged traceback)."""
    emulator.install_crds(ARTIFACTS / "crd.yaml")
    client = load_config(kubeconfig)
    controller = Controller(client, SharedInformerFactory(client))
    try:
        body = {"apiVersion": FOOS.api_version, "kind": "Foo", "metadata": {"name": "f"}, "spec": {}}
        cached = client.resource(FOOS).create(body, namespace=NS)
        deployment = {"status": {"availableReplicas": 1}}
        controller.update_foo_status(cached, deployment)  # the controller's own write ...
        controller.update_foo_status(cached, {"status": {"availableReplicas": 2}})  # ... then the stale copy
        assert client.resource(FOOS).get("f", namespace=NS)["status"] == {"availableReplicas": 2}
    finally:
        controller.workqueue.shut_down()
        controller.broadcaster.shutdown()
        client.close()


def test_a_deployment_the_cache_has_not_seen_yet_is_read_not_created_twice(
    emulator: Emulator, kubeconfig: str
) -> None:
    """The lister lags behind the controller's own create: the next sync finds the Deployment
    missing in the cache; upstream's create then fails with AlreadyExists (a failed sync and a
    logged error). The live Deployment is used instead, ownership check included."""
    emulator.install_crds(ARTIFACTS / "crd.yaml")
    client = load_config(kubeconfig)
    controller = Controller(client, SharedInformerFactory(client))  # informers never started
    try:
        foos = client.resource(FOOS)
        for name, deployment in (("f", "web"), ("g", "taken")):
            body = {"apiVersion": FOOS.api_version, "kind": "Foo", "metadata": {"name": name}}
            foos.create({**body, "spec": {"deploymentName": deployment, "replicas": 1}}, namespace=NS)
        foo = foos.get("f", namespace=NS)
        first = controller.ensure_deployment(foo, "web")  # created; the cache stays empty
        again = controller.ensure_deployment(foo, "web")
        assert again["metadata"]["uid"] == first["metadata"]["uid"]
        client.resource(DEPLOYMENTS).create(deployment_body("taken"), namespace=NS)
        with pytest.raises(ResourceExistsError):  # the live object is not the Foo's
            controller.ensure_deployment(foos.get("g", namespace=NS), "taken")
    finally:
        controller.workqueue.shut_down()
        controller.broadcaster.shutdown()
        client.close()


def test_events_of_syncs_running_at_shutdown_are_still_recorded(
    emulator: Emulator, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers finish before the event broadcaster stops (it used to stop first, and their
    last events were dropped as "too many queued events")."""
    emulator.install_crds(ARTIFACTS / "crd.yaml")
    client = load_config(kubeconfig)
    informers = SharedInformerFactory(client)
    controller = Controller(client, informers)
    stop, syncing, shut = threading.Event(), threading.Event(), threading.Event()
    original_shutdown = controller.broadcaster.shutdown

    def shutdown() -> None:
        shut.set()
        original_shutdown()

    def slow_sync(key: str) -> None:
        syncing.set()
        stop.wait(10)
        shut.wait(1.0)  # lets a broadcaster that stops first (the bug) stop before the event
        foo = controller.foos.namespaced(NS).get("slow")
        controller.recorder.event(foo, "Normal", "Synced", "Foo synced successfully")

    monkeypatch.setattr(controller.broadcaster, "shutdown", shutdown)
    monkeypatch.setattr(controller, "sync_handler", slow_sync)
    informers.start(stop)
    thread = threading.Thread(target=controller.run, args=(1, stop), daemon=True)
    thread.start()
    body = {"apiVersion": FOOS.api_version, "kind": "Foo", "metadata": {"name": "slow"}, "spec": {}}
    client.resource(FOOS).create(body, namespace=NS)
    try:
        assert syncing.wait(10)
        with capture_logs() as logs:
            stop.set()
            thread.join(10)
        assert not [e for e in logs if e["event"] == "unable_to_record_event"], logs
        assert emulator.wait_for(
            lambda: any(e["reason"] == "Synced" for e in emulator.list("events", NS)), 10
        )
    finally:
        stop.set()
        informers.shutdown()
        client.close()


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_applies_the_examples_yaml(tmp_path: Path) -> None:
    with Emulator() as emulator:
        kubeconfig = str(emulator.write_kubeconfig(tmp_path / "kubeconfig"))
        client = load_config(kubeconfig)
        halt = start_controller(client)

        def kubectl(*args: str) -> str:
            base = [str(KUBECTL), "--kubeconfig", kubeconfig, "--cache-dir", str(tmp_path / "cache")]
            result = subprocess.run([*base, *args], capture_output=True, text=True, timeout=60, check=False)
            assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
            return result.stdout

        try:
            kubectl("apply", "-f", str(ARTIFACTS / "crd.yaml"))
            kubectl(
                "wait", "--for=condition=established", "crd/foos.samplecontroller.k8s.io", "--timeout=20s"
            )
            kubectl("apply", "-f", str(ARTIFACTS / "example-foo.yaml"))
            kubectl(
                "wait", "--for=jsonpath={.status.availableReplicas}=1", "foo/example-foo", "--timeout=20s"
            )
            owner = kubectl(
                "get", "deployment", "example-foo", "-o", "jsonpath={.metadata.ownerReferences[0].name}"
            )
            assert owner == "example-foo"
        finally:
            halt()
            client.close()


def test_raise_to_retry_is_an_error_not_a_crash_under_really_crash(
    emulator: Emulator, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: the sample controller's retries (a foreign Deployment, a failed status write)
    are TransientErrors: retried with back-off, never fatal with REALLY_CRASH on."""
    from examples.sample_controller.controller import ResourceExistsError
    from mcm.runtime import errors

    fatal: list[BaseException] = []
    handled: list[tuple[BaseException, dict[str, object]]] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    monkeypatch.setattr(errors, "ERROR_HANDLERS", [lambda err, ctx: handled.append((err, dict(ctx)))])
    emulator.install_crds(ARTIFACTS / "crd.yaml")
    client = load_config(kubeconfig)
    halt = start_controller(client)
    try:
        cluster = Cluster(emulator, client)
        client.resource(DEPLOYMENTS).create(deployment_body("taken"), namespace=NS)
        emulator.faults.add(code=500, verb="patch", resource="foos", subresource="status", times=1)
        cluster.create_foo("claimer", deploymentName="taken", replicas=1)
        cluster.create_foo("fine", deploymentName="fine-deploy", replicas=1)
        exists = ResourceExistsError
        cluster.wait("a retried ResourceExistsError", lambda: any(type(e) is exists for e, _ in handled))
        cluster.wait("the second Foo synced", lambda: bool(cluster.events("fine", "Synced")))
    finally:
        halt()
        client.close()
    assert fatal == []
    retried = [ctx for err, ctx in handled if isinstance(err, ResourceExistsError)]
    assert retried[0]["outcome"] == "requeued" and retried[0]["key"] == f"{NS}/claimer"
    assert any(type(e).__name__ == "InternalError" for e, _ in handled)  # the failed status write

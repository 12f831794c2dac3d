"""The Kubernetes sample-controller on ``mcm.runtime``: every Foo owns a Deployment of nginx pods.

A Foo (``samplecontroller.k8s.io/v1alpha1``, see ``artifacts/crd.yaml``) names a Deployment and
its replica count. The controller creates that Deployment (owned by the Foo, so deleting the Foo
garbage-collects it), keeps its replicas equal to the Foo's, and copies the Deployment's
``availableReplicas`` into the Foo's status. Same behaviour, names and Event strings as
``k8s.io/sample-controller``'s ``controller.go``, with one addition: a Foo whose spec cannot work
(no deployment name, or a Deployment the API server refuses) gets a Warning Event
``ErrInvalidSpec`` and is not retried until it changes, where upstream only logs or retries.

Retries follow ``mcm.runtime.worker``'s contract: :meth:`Controller.sync_handler` asks for a
retry by raising a :class:`~mcm.runtime.errors.TransientError`, as upstream returns an error: a
failed API call (every ``RequestError``, a reset connection included) or
:class:`ResourceExistsError`. The worker logs it with the key and re-adds the key rate-limited;
it never ends the process, even with ``REALLY_CRASH`` on. Anything else that escapes is a bug.

The status is written with a merge patch (upstream updates the cached Foo, which conflicts when
the cache has not yet seen the controller's previous write), and on shutdown the workers finish
the Foo in hand before the event broadcaster stops.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import structlog

from mcm.runtime.cache import (
    DeletedFinalStateUnknown,
    ResourceEventHandlerFuncs,
    SharedInformerFactory,
    meta_namespace_key_func,
    split_meta_namespace_key,
    wait_for_cache_sync,
)
from mcm.runtime.client import ClusterClient, Object, Resource
from mcm.runtime.client.errors import AlreadyExists, Invalid, NotFound
from mcm.runtime.errors import TransientError, handle_error
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventBroadcaster
from mcm.runtime.worker import start_workers
from mcm.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

__all__ = ["DEPLOYMENTS", "FOOS", "Controller", "new_deployment"]

log = structlog.get_logger(__name__)

CONTROLLER_AGENT_NAME = "sample-controller"
SUCCESS_SYNCED = "Synced"
"""Event reason when a Foo is synced."""
ERR_RESOURCE_EXISTS = "ErrResourceExists"
"""Event reason when a Deployment of the same name exists and is not owned by the Foo."""
ERR_INVALID_SPEC = "ErrInvalidSpec"
"""Event reason when the Foo's spec cannot be carried out (not in upstream)."""
MESSAGE_RESOURCE_EXISTS = "Resource %s already exists and is not managed by Foo"
MESSAGE_RESOURCE_SYNCED = "Foo synced successfully"

FOOS = Resource("samplecontroller.k8s.io", "v1alpha1", "foos", "Foo", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
MAX_RETRIES = sys.maxsize
"""sample-controller retries a failing Foo (with back-off) until it succeeds."""


class ResourceExistsError(TransientError):
    """The Foo's Deployment exists but belongs to someone else (retried until it is freed)."""


class Controller:
    """The controller for Foo resources (upstream ``NewController``)."""

    def __init__(self, client: ClusterClient, informers: SharedInformerFactory) -> None:
        self.client = client
        self.broadcaster = EventBroadcaster()
        self.broadcaster.start_structured_logging()
        self.broadcaster.start_recording_to_sink(client)
        self.recorder = self.broadcaster.new_recorder(CONTROLLER_AGENT_NAME)
        self.workqueue: RateLimitingQueue[str] = RateLimitingQueue(default_controller_rate_limiter(), "Foos")
        self.foos = informers.lister(FOOS)
        self.deployments = informers.lister(DEPLOYMENTS)
        self.synced = [informers.informer_for(r).has_synced for r in (FOOS, DEPLOYMENTS)]
        informers.informer_for(FOOS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self.enqueue_foo, on_update=lambda old, new: self.enqueue_foo(new)
            )
        )
        informers.informer_for(DEPLOYMENTS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self.handle_object, on_update=self.deployment_updated, on_delete=self.handle_object
            )
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        """Wait for the caches, start ``workers`` workers and block until ``stop`` is set; then
        let the workers finish their Foo before the event broadcaster stops (their last events
        are still recorded)."""
        log.info("starting_foo_controller")
        threads: list[threading.Thread] = []
        try:
            if not wait_for_cache_sync(stop, *self.synced):
                raise RuntimeError("failed to wait for caches to sync")
            threads = start_workers(self.workqueue, "Foos", workers, self.sync_handler, MAX_RETRIES, stop)
            log.info("started_workers", count=workers)
            stop.wait()
            log.info("shutting_down_workers")
        finally:
            self.workqueue.shut_down()
            for thread in threads:
                thread.join()
            self.broadcaster.shutdown()

    # -- event handlers --------------------------------------------------------------------------
    def enqueue_foo(self, foo: Object) -> None:
        self.workqueue.add(meta_namespace_key_func(foo))

    def deployment_updated(self, old: Object, new: Object) -> None:
        # A periodic resync sends every Deployment again, unchanged (same resourceVersion).
        if old["metadata"].get("resourceVersion") != new["metadata"].get("resourceVersion"):
            self.handle_object(new)

    def handle_object(self, obj: Object | DeletedFinalStateUnknown) -> None:
        """Enqueue the Foo that controls ``obj`` (a Deployment or a tombstone of one), if any."""
        if isinstance(obj, DeletedFinalStateUnknown):
            if not isinstance(obj.obj, dict):
                handle_error(TypeError("error decoding object tombstone, invalid type"))
                return
            obj = obj.obj
        owner = controller_of(obj)
        if owner is None or owner.get("kind") != "Foo":
            return
        try:
            foo = self.foos.namespaced(obj["metadata"].get("namespace", "")).get(owner.get("name", ""))
        except NotFound:
            log.debug("ignoring_orphaned_object", name=obj["metadata"].get("name"), foo=owner.get("name"))
            return
        self.enqueue_foo(foo)

    # -- reconcile -------------------------------------------------------------------------------
    def sync_handler(self, key: str) -> None:
        """Converge the Foo's Deployment with its spec, then write the Foo's status.

        Raises a ``TransientError`` (a failed request, :class:`ResourceExistsError`) to be
        retried with back-off; a spec that retrying cannot fix is reported and not raised.
        """
        namespace, name = split_meta_namespace_key(key)
        try:
            foo = self.foos.namespaced(namespace).get(name)
        except NotFound:
            handle_error(LookupError(f"foo '{key}' in work queue no longer exists"))
            return
        deployment_name = (foo.get("spec") or {}).get("deploymentName")
        if not deployment_name or not isinstance(deployment_name, str):
            self.invalid_spec(foo, f"{key}: deployment name must be specified")
            return
        try:
            deployment = self.ensure_deployment(foo, deployment_name)
        except Invalid as err:
            self.invalid_spec(foo, f"{key}: {err}")
            return
        self.update_foo_status(foo, deployment)
        self.recorder.event(foo, EVENT_TYPE_NORMAL, SUCCESS_SYNCED, MESSAGE_RESOURCE_SYNCED)

    def ensure_deployment(self, foo: Object, name: str) -> Object:
        """The Foo's Deployment, created or scaled as needed; raises if another owner has it."""
        namespace = foo["metadata"]["namespace"]
        deployments = self.client.resource(DEPLOYMENTS)
        try:
            deployment = self.deployments.namespaced(namespace).get(name)
        except NotFound:
            deployment = self.create_deployment(foo, name)
        if not is_controlled_by(deployment, foo):
            message = MESSAGE_RESOURCE_EXISTS % json.dumps(name)
            self.recorder.event(foo, EVENT_TYPE_WARNING, ERR_RESOURCE_EXISTS, message)
            raise ResourceExistsError(message)
        replicas = foo["spec"].get("replicas")
        if replicas is not None and replicas != deployment["spec"].get("replicas"):
            log.debug("scaling_deployment", foo=foo["metadata"]["name"], replicas=replicas)
            deployment = deployments.update(new_deployment(foo), namespace=namespace)
        return deployment

    def create_deployment(self, foo: Object, name: str) -> Object:
        """Create the Foo's Deployment; one that already exists is read from the API server.

        The lister lags behind this controller's own create (until the watch delivers it), so
        a sync right after the one that created the Deployment finds it missing in the cache;
        upstream's sample-controller then fails the sync with AlreadyExists and retries. Here
        the live object is used, and the ownership check that follows still applies to it.
        """
        namespace = foo["metadata"]["namespace"]
        deployments = self.client.resource(DEPLOYMENTS)
        try:
            return deployments.create(new_deployment(foo), namespace=namespace)
        except AlreadyExists:
            return deployments.get(name, namespace=namespace)

    def update_foo_status(self, foo: Object, deployment: Object) -> None:
        """Copy the Deployment's ``availableReplicas`` into the Foo's status.

        A merge patch of that one field, not an update of the cached Foo: right after this
        controller's own status write the cache still holds the older Foo (until the watch
        delivers the new one), and an update built from it would fail with a Conflict.
        """
        available = (deployment.get("status") or {}).get("availableReplicas", 0)
        self.client.resource(FOOS).patch(
            foo["metadata"]["name"],
            {"status": {"availableReplicas": available}},
            namespace=foo["metadata"]["namespace"],
            subresource="status",
        )

    def invalid_spec(self, foo: Object, message: str) -> None:
        """Report a spec that retrying cannot fix; the Foo is synced again when it changes."""
        handle_error(ValueError(message))
        self.recorder.event(foo, EVENT_TYPE_WARNING, ERR_INVALID_SPEC, message)


def controller_of(obj: Object) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true`` (``metav1.GetControllerOf``)."""
    refs = obj["metadata"].get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller") is True), None)


def is_controlled_by(obj: Object, owner: Object) -> bool:
    """Whether ``owner`` is ``obj``'s controller, compared by UID (``metav1.IsControlledBy``)."""
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == owner["metadata"].get("uid")


def new_deployment(foo: Object) -> Object:
    """The Deployment a Foo asks for, owned by the Foo so it is found (and collected) through it."""
    meta = foo["metadata"]
    labels = {"app": "nginx", "controller": meta["name"]}
    owner = {
        "apiVersion": FOOS.api_version,
        "kind": FOOS.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
        },
    }
    if foo["spec"].get("replicas") is not None:
        spec["replicas"] = foo["spec"]["replicas"]
    return {
        "apiVersion": DEPLOYMENTS.api_version,
        "kind": DEPLOYMENTS.kind,
        "metadata": {
            "name": foo["spec"]["deploymentName"],
            "namespace": meta["namespace"],
            "ownerReferences": [owner],
        },
        "spec": spec,
    }

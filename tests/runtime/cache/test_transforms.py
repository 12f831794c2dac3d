"""Informer transforms: managedFields (and a Node's images) never reach the cache."""

from __future__ import annotations

import copy
import threading

from mcm.runtime.cache import DeletedFinalStateUnknown, ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.cache.transforms import strip_managed_fields, strip_node_images
from mcm.runtime.client import load_config
from mcm.runtime.client.resources import NODES

MANAGED = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]


def _node() -> dict[str, object]:
    return {
        "metadata": {"name": "n1", "resourceVersion": "7", "managedFields": copy.deepcopy(MANAGED)},
        "spec": {"providerID": "fake:///n1"},
        "status": {"images": [{"names": ["registry/pause:3.9"], "sizeBytes": 1}], "conditions": []},
    }


def test_strip_managed_fields_removes_only_managed_fields() -> None:
    node = _node()
    stripped = strip_managed_fields(node)
    assert stripped is node
    assert "managedFields" not in node["metadata"]  # type: ignore[operator]
    assert node["metadata"] == {"name": "n1", "resourceVersion": "7"}
    assert node["status"]["images"]  # type: ignore[index]


def test_strip_node_images_removes_images_and_managed_fields() -> None:
    node = _node()
    strip_node_images(node)
    assert node["status"] == {"conditions": []}
    assert "managedFields" not in node["metadata"]  # type: ignore[operator]
    assert node["spec"] == {"providerID": "fake:///n1"}


def test_other_values_pass_through_unchanged() -> None:
    tombstone = DeletedFinalStateUnknown("n1", _node())
    assert strip_node_images(tombstone) is tombstone
    assert strip_managed_fields("text") == "text"
    assert strip_managed_fields({"metadata": None}) == {"metadata": None}


def test_an_informer_with_the_transform_caches_and_delivers_stripped_nodes(kubeconfig: str) -> None:
    cluster = load_config(kubeconfig, qps=-1)
    nodes = cluster.resource(NODES)
    nodes.create({"apiVersion": "v1", "kind": "Node", **_node(), "metadata": {"name": "n1"}})
    nodes.patch("n1", {"status": {"images": [{"names": ["a"], "sizeBytes": 2}]}}, subresource="status")
    factory = SharedInformerFactory(cluster, None)
    informer = factory.informer_for(NODES)
    informer.set_transform(strip_node_images)
    seen: list[dict[str, object]] = []
    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=seen.append))
    stop = threading.Event()
    try:
        factory.start(stop)
        assert factory.wait_for_cache_sync(stop, timeout=10)
        cached = factory.lister(NODES).get("n1")
        assert "images" not in cached["status"]
        assert nodes.get("n1")["status"]["images"]  # the server keeps them
    finally:
        stop.set()
    assert all("images" not in (obj.get("status") or {}) for obj in seen)  # type: ignore[operator]

"""SharedInformerFactory lifecycle with an in-memory client."""

from __future__ import annotations

import threading
from typing import Any

from mcm.runtime.cache import SharedInformerFactory
from mcm.runtime.client.resources import CONFIG_MAPS, NODES, Resource
from mcm.runtime.client.types import ListOptions, Object
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, FakeWatch, make_obj


class FakeRESTClient:
    """Just what ``list_watch`` calls, recording the namespace it was asked for."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.namespaces: list[str | None] = []

    def list(self, options: ListOptions, *, namespace: str | None = None) -> Object:
        self.namespaces.append(namespace)
        return self.server.list(options)

    def watch(self, options: ListOptions, *, namespace: str | None = None) -> FakeWatch:
        return self.server.watch(options)

    def with_cancel(self, cancel: threading.Event) -> FakeRESTClient:
        return self


class FakeCluster:
    def __init__(self) -> None:
        self.clients: dict[Resource, FakeRESTClient] = {}

    def resource(self, resource: Resource) -> Any:
        if resource not in self.clients:
            server = FakeServer()
            server.create(make_obj("x", "ns" if resource.namespaced else None))
            self.clients[resource] = FakeRESTClient(server)
        return self.clients[resource]


def test_one_informer_per_resource_started_once_and_synced() -> None:
    cluster = FakeCluster()
    seen: list[ListOptions] = []

    def tweak(options: ListOptions) -> ListOptions:
        seen.append(options)
        return options.with_changes(label_selector="app=x")

    # a fake clock drives resync and back-off; waiting for the caches still works (real-time poll)
    factory = SharedInformerFactory(
        cluster, namespace="ns", resync=60.0, tweak_list_options=tweak, clock=FakeClock()
    )
    configmaps = factory.informer_for(CONFIG_MAPS)
    assert factory.informer_for(CONFIG_MAPS) is configmaps
    lister = factory.lister(CONFIG_MAPS)
    stop = threading.Event()
    try:
        factory.start(stop)
        factory.start(stop)  # idempotent
        assert factory.wait_for_cache_sync(stop, timeout=5) == {CONFIG_MAPS: True}
        assert lister.namespaced("ns").get("x")["metadata"]["name"] == "x"
        assert cluster.clients[CONFIG_MAPS].namespaces == ["ns"]
        assert cluster.clients[CONFIG_MAPS].server.list_calls[0].label_selector == "app=x"
        assert seen  # the tweak saw the list options

        nodes = factory.informer_for(NODES)  # requested after start: started by the next start()
        assert factory.wait_for_cache_sync(stop, timeout=5) == {CONFIG_MAPS: True}
        factory.start(stop)
        assert factory.wait_for_cache_sync(stop, timeout=5) == {CONFIG_MAPS: True, NODES: True}
        assert cluster.clients[NODES].namespaces == [None]  # cluster-scoped: no namespace
        assert nodes.get_indexer().list_keys() == ["x"]
    finally:
        stop.set()
        factory.shutdown(5)
    factory.informer_for(Resource("", "v1", "secrets", "Secret", namespaced=True))
    factory.start(stop)  # after shutdown: nothing starts
    assert factory.wait_for_cache_sync(stop, timeout=0.2) == {CONFIG_MAPS: True, NODES: True}

"""Informers against the real API server emulator over HTTP, including every way a watch breaks."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from mcm.runtime.cache import (
    DeletedFinalStateUnknown,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
)
from mcm.runtime.client import ClusterClient, RESTClient, load_config
from mcm.runtime.client.errors import AlreadyExists, ApiError, ConnectionFailed, NotFound
from mcm.runtime.client.resources import CONFIG_MAPS
from mcm.runtime.clock import Clock
from mcm.runtime.wait import BackoffManager, ExponentialBackoffManager

from .recorder import Recorder

if TYPE_CHECKING:
    from mcm.emulator import Emulator

NS = "default"


def fast_backoff(clock: Clock) -> BackoffManager:
    """Same shape as the default back-off, scaled down so fault tests stay quick."""
    return ExponentialBackoffManager(0.05, 0.4, 120.0, 2.0, 1.0, clock=clock)


WRITE_ATTEMPTS = 30


def retried(write: Callable[[], object], landed: type[ApiError] | None = None) -> None:
    """``write`` as the controller makes it: a write whose connection failed (the emulator was
    restarting or refusing, or closed a keep-alive connection just as it was reused) is retried
    after a short pause. ``landed`` answering a retry says the failed attempt had been applied."""
    for attempt in range(WRITE_ATTEMPTS):
        try:
            write()
            return
        except ConnectionFailed:
            time.sleep(0.05)
        except ApiError as err:
            if attempt == 0 or landed is None or not isinstance(err, landed):
                raise
            return
    raise AssertionError(f"the write still failed to connect after {WRITE_ATTEMPTS} attempts")


class Cluster:
    def __init__(self, emulator: Emulator, kubeconfig: str, **factory_kwargs: Any) -> None:
        self.emulator = emulator
        self.client: ClusterClient = load_config(kubeconfig, qps=10_000, burst=10_000)
        self.configmaps: RESTClient = self.client.resource(CONFIG_MAPS)
        self.factory = SharedInformerFactory(
            self.client, namespace=NS, new_backoff_manager=fast_backoff, **factory_kwargs
        )
        self.informer: SharedIndexInformer = self.factory.informer_for(CONFIG_MAPS)
        self.lister = self.factory.lister(CONFIG_MAPS)
        self.stop = threading.Event()

    def start(self) -> None:
        self.factory.start(self.stop)
        assert self.factory.wait_for_cache_sync(self.stop, timeout=10) == {CONFIG_MAPS: True}

    def create(self, name: str, **data: str) -> None:
        body = {"metadata": {"name": name, "namespace": NS}, "data": data}
        retried(lambda: self.configmaps.create(body), landed=AlreadyExists)

    def update(self, name: str, **data: str) -> None:
        retried(lambda: self.configmaps.patch(name, {"data": data}, namespace=NS, kind="merge"))

    def delete(self, name: str) -> None:
        retried(lambda: self.configmaps.delete(name, namespace=NS), landed=NotFound)

    def server_state(self) -> dict[str, str]:
        return {
            f"{NS}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in self.emulator.list("configmaps", NS)
        }

    def cache_state(self) -> dict[str, str]:
        return {
            f"{NS}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in self.informer.get_indexer().list()
        }

    def wait_converged(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.cache_state() != self.server_state():
            if time.monotonic() > deadline:
                raise AssertionError(f"cache {self.cache_state()} != server {self.server_state()}")
            time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.factory.shutdown(10)


@pytest.fixture
def cluster(emulator: Emulator, kubeconfig: str) -> Iterator[Cluster]:
    c = Cluster(emulator, kubeconfig)
    yield c
    c.close()


def lists(emulator: Emulator) -> int:
    return emulator.stats.count(verb="list", resource="configmaps")


def test_handler_sequences_and_lister(cluster: Cluster) -> None:
    cluster.create("a", k="1")
    handler = Recorder()
    cluster.informer.add_event_handler(handler)
    cluster.start()
    cluster.update("a", k="2")
    cluster.create("b")
    cluster.delete("a")
    events = handler.wait_for(4)
    expected_a = [("add", "a", True), ("update", "a", "change"), ("delete", "a")]
    assert [e for e in events if e[1] == "a"] == expected_a
    assert [e for e in events if e[1] == "b"] == [("add", "b", False)]
    assert cluster.lister.namespaced(NS).get("b")["metadata"]["name"] == "b"
    with pytest.raises(NotFound, match='configmap "a" not found'):
        cluster.lister.namespaced(NS).get("a")
    late = Recorder()
    cluster.informer.add_event_handler(late)
    assert late.wait_for(1) == [("add", "b", True)]


def test_tweak_list_options_filters_lists_and_watches(emulator: Emulator, kubeconfig: str) -> None:
    cluster = Cluster(
        emulator, kubeconfig, tweak_list_options=lambda o: o.with_changes(label_selector="pick=yes")
    )
    try:
        cluster.configmaps.create({"metadata": {"name": "in", "namespace": NS, "labels": {"pick": "yes"}}})
        cluster.create("out")
        cluster.start()
        cluster.configmaps.create({"metadata": {"name": "in2", "namespace": NS, "labels": {"pick": "yes"}}})
        cluster.create("out2")
        deadline = time.monotonic() + 5
        while len(cluster.lister.list()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(o["metadata"]["name"] for o in cluster.lister.list()) == ["in", "in2"]
    finally:
        cluster.close()


@pytest.mark.parametrize("mode", ["close", "reset"])
def test_watch_dropped_mid_stream_loses_no_event_and_does_not_relist(cluster: Cluster, mode: str) -> None:
    handler = Recorder()
    cluster.informer.add_event_handler(handler)
    cluster.start()
    names = [f"cm{i}" for i in range(30)]
    for i, name in enumerate(names):
        cluster.create(name)
        if i in (9, 19):
            cluster.emulator.watches.drop(mode)
    adds = [e[1] for e in handler.wait_for(30)]
    assert adds == names  # each exactly once, in order
    cluster.wait_converged()
    assert lists(cluster.emulator) == 1


def test_expired_watch_relists_and_converges(cluster: Cluster) -> None:
    cluster.create("a")
    cluster.start()
    cluster.emulator.watches.drop("expire")
    cluster.create("b")
    cluster.wait_converged()
    deadline = time.monotonic() + 5
    while lists(cluster.emulator) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lists(cluster.emulator) >= 2


def test_deletions_missed_while_disconnected_and_compacted_arrive_as_tombstones(cluster: Cluster) -> None:
    cluster.create("gone", k="last")
    cluster.create("kept")
    handler = Recorder()
    cluster.informer.add_event_handler(handler)
    cluster.start()
    emu = cluster.emulator
    emu.stop()  # the informer is disconnected
    emu.storage.delete(emu.resource_type("configmaps"), NS, "gone")
    emu.compact()  # ...and the history it would resume from is gone
    emu.start()
    events = handler.wait_for(3)
    assert events[-1] == ("delete", "tombstone:default/gone")
    assert lists(emu) == 2  # the 410 led to exactly one relist
    cluster.wait_converged()
    assert cluster.cache_state().keys() == {"default/kept"}


def test_tombstone_carries_last_known_state(cluster: Cluster) -> None:
    cluster.create("gone", k="last")
    deleted: list[Any] = []
    cluster.informer.add_event_handler(ResourceEventHandlerFuncs(on_delete=deleted.append))
    cluster.start()
    emu = cluster.emulator
    emu.stop()
    emu.storage.delete(emu.resource_type("configmaps"), NS, "gone")
    emu.compact()
    emu.start()
    deadline = time.monotonic() + 10
    while not deleted and time.monotonic() < deadline:
        time.sleep(0.02)
    (tomb,) = deleted
    assert isinstance(tomb, DeletedFinalStateUnknown)
    assert tomb.key == "default/gone"
    assert tomb.obj is not None and tomb.obj["data"] == {"k": "last"}


@pytest.mark.parametrize("fault", ["restart", "refuse", "error", "hang"])
def test_informer_recovers_from_restart_and_pause(cluster: Cluster, fault: str) -> None:
    cluster.create("before")
    cluster.start()
    emu = cluster.emulator
    if fault == "restart":
        emu.restart(downtime=0.3)
    else:
        emu.pause(fault)
        time.sleep(0.3)  # the outage lasts a while (real time is what is being tested)
        emu.resume()
    cluster.create("after")
    cluster.update("before", k="v")
    cluster.wait_converged()
    assert cluster.cache_state().keys() == {"default/before", "default/after"}


def _fault(emu: Emulator, n: int) -> None:
    kind = n % 7
    if kind == 0:
        emu.watches.drop("close")
    elif kind == 1:
        emu.watches.drop("reset")
    elif kind == 2:
        emu.watches.drop("expire")
    elif kind == 3:
        emu.compact()
        emu.watches.drop("close")
    elif kind == 4:
        emu.restart(downtime=0.1)
    elif kind == 5:
        emu.pause("refuse")
        time.sleep(0.1)
        emu.resume()
    else:
        emu.restart(downtime=0.1, reset_history=True)


@pytest.mark.slow
def test_random_writes_interleaved_with_faults_end_with_cache_equal_to_server(cluster: Cluster) -> None:
    mirror: dict[str, str] = {}
    lock = threading.Lock()

    def key_rv(obj: Any) -> tuple[str, str]:
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key, ""
        return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", obj["metadata"]["resourceVersion"]

    def upsert(obj: Any) -> None:
        with lock:
            key, rv = key_rv(obj)
            mirror[key] = rv

    def remove(obj: Any) -> None:
        with lock:
            mirror.pop(key_rv(obj)[0], None)

    handler = ResourceEventHandlerFuncs(upsert, lambda old, new: upsert(new), remove)
    cluster.informer.add_event_handler(handler)
    cluster.start()
    rng = random.Random(1234)
    live: set[str] = set()
    for n in range(1000):
        name = f"cm{rng.randrange(60)}"
        if name not in live:
            cluster.create(name, v=str(n))
            live.add(name)
        elif rng.random() < 0.3:
            cluster.delete(name)
            live.discard(name)
        else:
            cluster.update(name, v=str(n))
        if n % 100 == 99:
            _fault(cluster.emulator, n // 100)
    cluster.wait_converged(timeout=20)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with lock:
            if mirror == cluster.server_state():
                break
        time.sleep(0.02)
    with lock:
        assert mirror == cluster.server_state()

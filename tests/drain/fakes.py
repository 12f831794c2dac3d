"""In-memory stand-ins for the drain's target cluster, and a driver for its fake clock.

:class:`FakeCluster` answers the calls the drain makes (pod get/evict/delete, node get/update,
VolumeAttachment delete, discovery) like client-go's fake clientset: a delete removes the pod
at once, an eviction only counts (the test's handlers decide what happens next). Handlers run on
their own thread after each successful evict/delete, like the upstream test's goroutines.

:class:`ClockDriver` moves a :class:`FakeClock` to its next deadline whenever everything is
parked on it, so code that waits 5 s or 20 s finishes in milliseconds of real time.
"""

from __future__ import annotations

import copy
import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, cast

from mcm.drain import DrainListers
from mcm.runtime.cache import (
    NAMESPACE_INDEX,
    Indexer,
    Lister,
    meta_namespace_index_func,
    new_not_found,
    object_key,
)
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import ApiError, error_from_status
from mcm.runtime.client.resources import NODES, PODS, VOLUME_ATTACHMENTS, Resource
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj

Handler = Callable[[Obj], None]


def too_many_requests() -> ApiError:
    return error_from_status(
        {
            "kind": "Status",
            "status": "Failure",
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "code": 429,
        },
        429,
    )


def server_error(message: str = "boom") -> ApiError:
    return error_from_status({"kind": "Status", "status": "Failure", "message": message, "code": 500}, 500)


class FakeCluster:
    """Pods, nodes and VolumeAttachments in memory, with call counters."""

    def __init__(self, *, eviction: bool = True) -> None:
        self.lock = threading.RLock()
        self.pods: dict[str, Obj] = {}
        self.nodes: dict[str, Obj] = {}
        self.attachments: dict[str, Obj] = {}
        self.eviction_supported = eviction
        self.calls: Counter[str] = Counter()
        self.handlers: list[Handler] = []
        self.evict_reactor: Callable[[Obj], None] | None = None
        """Called before an eviction; raise to refuse it."""
        self.delete_reactor: Callable[[Obj], None] | None = None
        self.node_get_reactor: Callable[[str], None] | None = None
        self.handler_threads: list[threading.Thread] = []

    # -- the client surface ---------------------------------------------------------------------
    def resource(self, resource: Resource) -> Any:
        if resource == PODS:
            return _Pods(self)
        if resource == NODES:
            return _Nodes(self)
        if resource == VOLUME_ATTACHMENTS:
            return _Attachments(self)
        raise AssertionError(f"unexpected resource {resource}")

    def discovery(self) -> Any:
        return _Discovery(self)

    def as_client(self) -> ClusterClient:
        return cast(ClusterClient, self)

    # -- helpers -----------------------------------------------------------------------------------
    def count(self, call: str) -> int:
        with self.lock:
            return self.calls[call]

    def add_pod(self, pod: Obj) -> None:
        with self.lock:
            self.pods[object_key(pod)] = pod

    def remove_pod(self, pod: Obj) -> None:
        with self.lock:
            self.pods.pop(object_key(pod), None)

    def run_handlers(self, pod: Obj) -> None:
        for handler in self.handlers:
            thread = threading.Thread(target=handler, args=(pod,), daemon=True)
            self.handler_threads.append(thread)
            thread.start()


class _Pods:
    def __init__(self, cluster: FakeCluster) -> None:
        self.c = cluster

    def _pod(self, name: str, namespace: str | None) -> Obj:
        pod = self.c.pods.get(f"{namespace}/{name}")
        if pod is None:
            raise new_not_found("", "pods", name)
        return pod

    def get(self, name: str, *, namespace: str | None = None, **_: Any) -> Obj:
        with self.c.lock:
            self.c.calls["pods.get"] += 1
            return copy.deepcopy(self._pod(name, namespace))

    def evict(self, name: str, namespace: str, delete_options: Obj | None = None) -> Obj:
        with self.c.lock:
            self.c.calls["pods.evict.attempt"] += 1
            pod = self._pod(name, namespace)
            if self.c.evict_reactor is not None:
                self.c.evict_reactor(pod)
            self.c.calls["pods.evict"] += 1
        self.c.run_handlers(pod)
        return {"kind": "Status", "status": "Success"}

    def delete(
        self, name: str, *, namespace: str | None = None, grace_period_seconds: int | None = None, **_: Any
    ) -> Obj:
        with self.c.lock:
            self.c.calls["pods.delete.attempt"] += 1
            pod = self._pod(name, namespace)
            if self.c.delete_reactor is not None:
                self.c.delete_reactor(pod)
            self.c.calls["pods.delete"] += 1
            if grace_period_seconds == 0:
                self.c.calls["pods.delete.grace0"] += 1
            self.c.pods.pop(f"{namespace}/{name}", None)
        self.c.run_handlers(pod)
        return {"kind": "Status", "status": "Success"}


class _Nodes:
    def __init__(self, cluster: FakeCluster) -> None:
        self.c = cluster

    def get(self, name: str, **_: Any) -> Obj:
        if self.c.node_get_reactor is not None:
            self.c.node_get_reactor(name)
        with self.c.lock:
            self.c.calls["nodes.get"] += 1
            node = self.c.nodes.get(name)
            if node is None:
                raise new_not_found("", "nodes", name)
            return copy.deepcopy(node)

    def update(self, body: Obj, **_: Any) -> Obj:
        with self.c.lock:
            self.c.calls["nodes.update"] += 1
            name = body["metadata"]["name"]
            if name not in self.c.nodes:
                raise new_not_found("", "nodes", name)
            self.c.nodes[name] = copy.deepcopy(body)
            return body


class _Attachments:
    def __init__(self, cluster: FakeCluster) -> None:
        self.c = cluster

    def delete(self, name: str, **_: Any) -> Obj:
        with self.c.lock:
            self.c.calls["volumeattachments.delete"] += 1
            if self.c.attachments.pop(name, None) is None:
                raise new_not_found("storage.k8s.io", "volumeattachments", name)
            return {"kind": "Status", "status": "Success"}


class _Discovery:
    def __init__(self, cluster: FakeCluster) -> None:
        self.c = cluster

    def preferred_version(self, group: str) -> str | None:
        self.c.calls["discovery"] += 1
        return "policy/v1" if group == "policy" and self.c.eviction_supported else None

    def has_resource(self, group_version: str, name: str, kind: str | None = None) -> bool:
        self.c.calls["discovery"] += 1
        return self.c.eviction_supported and (group_version, name, kind) == (
            "v1",
            "pods/eviction",
            "Eviction",
        )


def lister(objects: Iterable[Obj], resource: str, *, namespaced: bool, group: str = "") -> Lister:
    indexer = Indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func})
    for obj in objects:
        indexer.add(obj)
    return Lister(indexer, group=group, resource=resource, namespaced=namespaced)


def listers(
    pods: Iterable[Obj] = (),
    *,
    pdbs: Iterable[Obj] = (),
    pvs: Iterable[Obj] = (),
    pvcs: Iterable[Obj] = (),
) -> DrainListers:
    return DrainListers(
        pods=lister(pods, "pod", namespaced=True),
        pdbs=lister(pdbs, "poddisruptionbudget", namespaced=True, group="policy"),
        pvs=lister(pvs, "persistentvolume", namespaced=False),
        pvcs=lister(pvcs, "persistentvolumeclaim", namespaced=True),
    )


class ClockDriver:
    """Steps a FakeClock to its earliest deadline once nothing has changed for a few ms.

    Use as a context manager around the code under test. ``elapsed`` is the fake time moved.
    """

    QUIET_CHECKS = 4
    CHECK_EVERY = 0.001

    def __init__(self, clock: FakeClock, activity: Callable[[], object] = lambda: None) -> None:
        self.clock = clock
        self.activity = activity
        self.start = clock.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="clock-driver", daemon=True)

    @property
    def elapsed(self) -> float:
        return self.clock.monotonic() - self.start

    def __enter__(self) -> ClockDriver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _snapshot(self) -> tuple[object, ...]:
        clock = self.clock
        with clock._lock:
            armed = tuple(sorted(id(e) for _, _, e in clock._heap if e._state == "armed"))
        return (armed, self.activity())

    def _next_deadline(self) -> float | None:
        clock = self.clock
        with clock._lock:
            live = [d for d, _, e in clock._heap if e._state == "armed"]
            return heapq.nsmallest(1, live)[0] - clock._mono if live else None

    def _run(self) -> None:
        last: tuple[object, ...] | None = None
        quiet = 0
        while not self._stop.is_set():
            time.sleep(self.CHECK_EVERY)
            if self.clock.resuming_waiters():
                quiet = 0  # a woken thread has not reacted to the last step yet
                continue
            snapshot = self._snapshot()
            quiet = quiet + 1 if snapshot == last else 0
            last = snapshot
            if quiet < self.QUIET_CHECKS:
                continue
            delta = self._next_deadline()
            if delta is not None:
                self.clock.step(max(delta, 0.0))
                quiet = 0

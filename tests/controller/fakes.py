"""In-memory API for table tests: one store per resource serving as both REST client and lister.

Writes bump ``resourceVersion`` and check it (409 on a stale one; a merge patch is checked only
when it carries one, as the API server does); ``fail`` makes the next calls of a verb raise a
given error (an ``ApiError`` or a ``ConnectionFailed``); every write and patch body is recorded.
Deletion of an object with finalizers sets ``deletionTimestamp``, as the API server does.
"""

from __future__ import annotations

import copy
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from prometheus_client import CollectorRegistry

from mcm.controller import ControllerOptions
from mcm.controller.context import Deps, Listers, Writers
from mcm.controller.drivercalls import DriverCaller
from mcm.controller.metrics import ControllerMetrics
from mcm.controller.permits import PermitGiver
from mcm.driver import FakeDriver
from mcm.runtime.cache.listers import Lister, NamespaceLister, new_not_found
from mcm.runtime.client.errors import ApiError, Conflict
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import FakeClock

NS = "test-ns"
START = _dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=_dt.UTC)


def ts(clock: FakeClock, seconds_ago: float = 0.0) -> str:
    return (
        (clock.now() - _dt.timedelta(seconds=seconds_ago)).astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


class _Listing(list):  # type: ignore[type-arg]
    """A lister's result that also reads as a REST LIST's body (``.get("items")``)."""

    def get(self, key: str, default: Any = None) -> Any:
        return list(self) if key == "items" else default


@dataclass
class FakeResource:
    """A resource's objects keyed by name; REST-client and lister methods over them."""

    resource: str
    namespaced: bool = True
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: list[tuple[str, str]] = field(default_factory=list)
    failures: dict[str, list[Exception]] = field(default_factory=dict)
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    version: int = 0

    # setup
    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(dict(obj))
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    def fail(self, verb: str, error: Exception, times: int = 1000) -> None:
        self.failures[verb] = [error] * times

    def _check(self, verb: str, name: str) -> None:
        queued = self.failures.get(verb)
        if queued:
            raise queued.pop(0)
        self.writes.append((verb, name))

    def _missing(self, name: str) -> ApiError:
        return new_not_found("", self.resource, name)

    # lister (and REST LIST: the list also answers ``.get("items")``)
    def list(self, selector: Any = None) -> list[dict[str, Any]]:
        queued = self.failures.get("list")
        if queued:
            raise queued.pop(0)
        return _Listing(copy.deepcopy(o) for o in self.objects.values())

    # REST + lister get
    def get(self, name: str, **_: Any) -> dict[str, Any]:
        if name not in self.objects:
            raise self._missing(name)
        return copy.deepcopy(self.objects[name])

    def create(self, body: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        self._check("create", body["metadata"]["name"])
        return self.put(body)

    def _update(self, verb: str, body: Mapping[str, Any], status_only: bool) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._check(verb, name)
        current = self.objects.get(name)
        if current is None:
            raise self._missing(name)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict({"message": f"the object {name} has been modified", "code": 409})
        new = copy.deepcopy(current) if status_only else copy.deepcopy(dict(body))
        if status_only:
            new["status"] = copy.deepcopy(body.get("status"))
        else:
            new["status"] = copy.deepcopy(current.get("status"))
        if current["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[name]
            return new
        return self.put(new)

    def update(self, body: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        return self._update("update", body, status_only=False)

    def update_status(self, body: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        return self._update("update_status", body, status_only=True)

    def patch(self, name: str, body: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        self._check("patch", name)
        self.patches.append((name, copy.deepcopy(dict(body))))
        current = self.get(name)
        metadata = dict(body.get("metadata", {}))
        version = metadata.pop("resourceVersion", None)
        if version is not None and version != current["metadata"]["resourceVersion"]:
            raise Conflict({"message": f"the object {name} has been modified", "code": 409})
        uid = metadata.pop("uid", None)
        if uid is not None and uid != current["metadata"].get("uid"):
            raise Conflict({"message": f"Precondition failed: UID in precondition: {uid}", "code": 409})
        for key, value in metadata.items():
            if isinstance(value, Mapping) and isinstance(current["metadata"].get(key), Mapping):
                current["metadata"][key] = {**current["metadata"][key], **copy.deepcopy(dict(value))}
            else:
                current["metadata"][key] = copy.deepcopy(value)
        for key, value in body.items():
            if key != "metadata" and isinstance(value, Mapping):
                current[key] = {**(current.get(key) or {}), **copy.deepcopy(dict(value))}
        return self.put(current)

    def delete(self, name: str, **_: Any) -> dict[str, Any]:
        self._check("delete", name)
        current = self.objects.get(name)
        if current is None:
            raise self._missing(name)
        if current["metadata"].get("finalizers"):
            current["metadata"].setdefault("deletionTimestamp", "2026-01-01T12:00:00Z")
            return self.put(current)
        del self.objects[name]
        return {"kind": "Status", "status": "Success"}


@dataclass
class World:
    """Fake control and target clusters plus the Deps a reconciler runs with."""

    clock: FakeClock
    driver: FakeDriver
    machines: FakeResource
    classes: FakeResource
    secrets: FakeResource
    nodes: FakeResource
    target_secrets: FakeResource
    volume_attachments: FakeResource
    deps: Deps
    enqueued: list[tuple[str, str]]


def make_world(
    options: ControllerOptions | None = None, *, drainer: Any = None, driver: FakeDriver | None = None
) -> World:
    clock = FakeClock(START)
    fake_driver = driver or FakeDriver()
    machines, classes, secrets = (
        FakeResource("machines"),
        FakeResource("machineclasses"),
        FakeResource("secrets"),
    )
    nodes, target_secrets, vas = (
        FakeResource("nodes", False),
        FakeResource("secrets"),
        FakeResource("volumeattachments", False),
    )
    metrics = ControllerMetrics(CollectorRegistry(), "fake")
    enqueued: list[tuple[str, str]] = []
    deps = Deps(
        namespace=NS,
        listers=Listers(
            machines=cast(NamespaceLister, machines),
            classes=cast(NamespaceLister, classes),
            secrets=cast(NamespaceLister, secrets),
            nodes=cast(Lister, nodes),
            volume_attachments=cast(Lister, vas),
        ),
        writers=Writers(
            machines=cast(RESTClient, machines),
            classes=cast(RESTClient, classes),
            secrets=cast(RESTClient, secrets),
            nodes=cast(RESTClient, nodes),
            target_secrets=cast(RESTClient, target_secrets),
            volume_attachments=cast(RESTClient, vas),
        ),
        driver=fake_driver,
        calls=DriverCaller(clock, metrics, 300.0),
        options=options or ControllerOptions(namespace=NS, machine_drain_timeout=300.0),
        clock=clock,
        metrics=metrics,
        permits=PermitGiver(5.0, 1.0, clock=clock),
        drainer=drainer,
        enqueue_class=lambda name: enqueued.append(("machineclass", name)),
        enqueue_machine=lambda key, after: enqueued.append(("machine", key)),
        enqueue_termination=lambda key, after: enqueued.append(("machinetermination", key)),
    )
    return World(clock, fake_driver, machines, classes, secrets, nodes, target_secrets, vas, deps, enqueued)

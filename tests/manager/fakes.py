"""An in-memory API and caches for the manager's table tests, on a fake clock.

One :class:`Store` per resource serves as REST client (create, get, update, update_status,
merge patch, delete) and as the informer cache the reconciles read (``get(key)``, ``list()``,
``by_index``). Like the API server it keeps one global resourceVersion counter, checks the
resourceVersion of updates (409) and of merge patches that carry one, refuses a patch whose
``metadata.uid`` differs, fills ``generateName``, ``uid``, ``creationTimestamp`` and
``generation`` (bumped when ``spec`` changes), keeps ``status`` out of updates and everything
but ``status`` out of status updates, and turns the DELETE of an object with finalizers into a
``deletionTimestamp`` (the object goes when the last finalizer is removed). ``fail(verb, err)``
makes the next calls of a verb raise. ``World.lag()`` freezes what the caches show until
``World.catch_up()``, to play an informer that has not delivered the latest writes; as with the
manager's mutation cache, objects the manager itself wrote meanwhile show its last write (objects
it created do not show). ``requests`` lists the manager's own calls (``patches`` its patch
bodies); ``before(verbs, action)`` lets another writer act right before the manager's next call
of one of ``verbs``.

:class:`FakeMachineController` plays the machine controller: it moves new machines to Pending
and Running and lets deleted machines go.
"""

from __future__ import annotations

import copy
import datetime as _dt
import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from mcm.apis.machine import constants as c
from mcm.manager.context import CONTROLLER_UID_INDEX, ORPHAN, CachedObjects, Clients, Deps
from mcm.manager.deployment import reconcile_machine_deployment
from mcm.manager.expectations import Expectations
from mcm.manager.handlers import EventHandlers
from mcm.manager.machineset import reconcile_machine_set
from mcm.manager.options import ManagerOptions
from mcm.manager.owners import controller_uid
from mcm.runtime import objects as o
from mcm.runtime.cache.listers import new_not_found
from mcm.runtime.client.errors import AlreadyExists, ApiError, Conflict
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import FakeClock
from mcm.runtime.errors import TransientError
from mcm.runtime.record import EventRecorder

NS = "test-ns"
START = _dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=_dt.UTC)

Obj = dict[str, Any]


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


@dataclass
class Store:
    """One resource's objects keyed by name (see the module docstring)."""

    world: World
    resource: str
    namespaced: bool = True
    objects: dict[str, Obj] = field(default_factory=dict)
    failures: dict[str, list[Exception]] = field(default_factory=dict)
    writes: list[tuple[str, str]] = field(default_factory=list)
    snapshot: dict[str, Obj] | None = None
    recorded: dict[str, Obj] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    """Every call the manager made through its REST client, ``(verb, name)``, answered or not."""
    patches: list[Any] = field(default_factory=list)
    """The bodies of the manager's patches, as sent."""
    interposed: list[tuple[frozenset[str], Callable[[], None]]] = field(default_factory=list)

    # --- setup and inspection ---------------------------------------------------------------------

    def fail(self, verb: str, error: Exception, times: int = 1000) -> None:
        self.failures[verb] = [error] * times

    def before(self, verbs: str | tuple[str, ...], action: Callable[[], None]) -> None:
        """Run ``action`` once, right before the manager's next call of one of ``verbs`` (another
        writer acting between the manager's read and its write)."""
        self.interposed.append((frozenset([verbs] if isinstance(verbs, str) else verbs), action))

    def requested(self, verb: str, name: str) -> None:
        """The manager calls ``verb`` on ``name``: run what waits for it, then record it."""
        for entry in list(self.interposed):
            if verb in entry[0]:
                self.interposed.remove(entry)
                entry[1]()
        self.requests.append((verb, name))

    def __getitem__(self, name: str) -> Obj:
        return copy.deepcopy(self.objects[name])

    def names(self) -> list[str]:
        return sorted(self.objects)

    def _check(self, verb: str, name: str) -> None:
        queued = self.failures.get(verb)
        if queued:
            raise queued.pop(0)
        self.writes.append((verb, name))

    def _missing(self, name: str) -> ApiError:
        return new_not_found("machine.sapcloud.io", self.resource, name)

    def _store(self, obj: Obj) -> Obj:
        obj["metadata"]["resourceVersion"] = str(next(self.world.versions))
        name = obj["metadata"]["name"]
        old = self.objects.get(name)
        self.objects[name] = obj
        self.world.written(self, copy.deepcopy(old) if old is not None else None, copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def _remove(self, name: str) -> None:
        old = self.objects.pop(name)
        self.world.written(self, old, None)

    # --- the cache (ObjectSource) ----------------------------------------------------------------

    def _view(self) -> dict[str, Obj]:
        """What the manager's cache shows: everything, or while lagging the snapshot, each
        object replaced by the manager's own later write of it (its mutation cache)."""
        if self.snapshot is None:
            return self.objects
        view = {}
        for name, obj in self.snapshot.items():
            mine = self.recorded.get(name)
            newer = mine is not None and int(mine["metadata"]["resourceVersion"]) > int(
                obj["metadata"]["resourceVersion"]
            )
            view[name] = mine if newer else obj
        return view

    def get(self, key: str) -> Any:
        return copy.deepcopy(self._view().get(key.rpartition("/")[2]))

    def list(self) -> list[Mapping[str, Any]]:
        return [copy.deepcopy(obj) for obj in self._view().values()]

    def by_index(self, index: str, value: str) -> list[Mapping[str, Any]]:
        assert index == CONTROLLER_UID_INDEX
        return [
            copy.deepcopy(obj) for obj in self._view().values() if (controller_uid(obj) or ORPHAN) == value
        ]

    # --- the REST client -----------------------------------------------------------------------------

    def read(self, name: str) -> Obj:
        queued = self.failures.get("get")
        if queued:
            raise queued.pop(0)
        if name not in self.objects:
            raise self._missing(name)
        return copy.deepcopy(self.objects[name])

    def create(self, body: Mapping[str, Any], **_: Any) -> Obj:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', '')}{next(self.world.names):05d}"
        self._check("create", meta["name"])
        if meta["name"] in self.objects:
            raise AlreadyExists({"message": f'{self.resource} "{meta["name"]}" already exists', "code": 409})
        if self.namespaced:
            meta.setdefault("namespace", NS)
        meta["uid"] = f"uid-{meta['name']}-{next(self.world.versions)}"
        meta["creationTimestamp"] = o.format_time(self.world.clock.now())
        meta["generation"] = 1
        obj.pop("status", None)
        return self._store(obj)

    def _current(self, body: Mapping[str, Any]) -> Obj:
        name = body["metadata"]["name"]
        current = self.objects.get(name)
        if current is None:
            raise self._missing(name)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict({"message": f"the object {name} has been modified", "code": 409})
        return current

    def update(self, body: Mapping[str, Any], **_: Any) -> Obj:
        self._check("update", body["metadata"]["name"])
        current = self._current(body)
        new = copy.deepcopy(dict(body))
        new["status"] = copy.deepcopy(current.get("status"))
        if new["status"] is None:
            new.pop("status")
        for immutable in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if immutable in current["metadata"]:
                new["metadata"][immutable] = current["metadata"][immutable]
        if new.get("spec") != current.get("spec"):
            new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if current["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            self._remove(new["metadata"]["name"])
            return new
        return self._store(new)

    def update_status(self, body: Mapping[str, Any], **_: Any) -> Obj:
        self._check("update_status", body["metadata"]["name"])
        new = copy.deepcopy(self._current(body))
        new["status"] = copy.deepcopy(body.get("status"))
        return self._store(new)

    def patch(self, name: str, body: Mapping[str, Any], *, kind: str = "merge", **_: Any) -> Obj:
        assert kind == "merge", f"the fake API applies merge patches only, not {kind!r}"
        self._check("patch", name)
        current = self.read(name)
        meta = dict(body.get("metadata") or {})
        version, uid = meta.pop("resourceVersion", None), meta.pop("uid", None)
        if version and version != current["metadata"]["resourceVersion"]:
            raise Conflict({"message": f"the object {name} has been modified", "code": 409})
        if uid and uid != current["metadata"].get("uid"):
            raise Conflict({"message": f"Precondition failed: UID in precondition: {uid}", "code": 409})
        merged = _merge(current, {**body, "metadata": meta})
        return self._store(merged)

    def delete(self, name: str, **_: Any) -> Obj:
        self._check("delete", name)
        current = self.objects.get(name)
        if current is None:
            raise self._missing(name)
        if current["metadata"].get("finalizers"):
            current["metadata"].setdefault("deletionTimestamp", o.format_time(self.world.clock.now()))
            return self._store(current)
        self._remove(name)
        return {"kind": "Status", "status": "Success"}


class NodeStore(Store):
    """Nodes: cluster-scoped, looked up by name."""

    def lookup(self, name: str) -> Mapping[str, Any] | None:
        return copy.deepcopy(self._view().get(name))


@dataclass
class Events:
    """Records Events as ``(kind, name, type, reason, message)``."""

    recorded: list[tuple[str, str, str, str, str]] = field(default_factory=list)

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        self.recorded.append((str(obj.get("kind")), o.name_of(obj), event_type, reason, message))

    def reasons(self) -> list[str]:
        return [r[3] for r in self.recorded]


class World:
    """Fake stores, a fake clock, events and the Deps a reconcile runs with."""

    def __init__(self, options: ManagerOptions | None = None, *, target: bool = True) -> None:
        self.clock = FakeClock(START)
        self.versions = itertools.count(1)
        self.names = itertools.count(1)
        self.listeners: list[Callable[[World], None]] = []
        self.machines = Store(self, "machines")
        self.machine_sets = Store(self, "machinesets")
        self.machine_deployments = Store(self, "machinedeployments")
        self.nodes = NodeStore(self, "nodes", namespaced=False)
        self.events = Events()
        self.enqueued: list[tuple[str, str, float]] = []
        self.deps = Deps(
            options=options or ManagerOptions(namespace=NS),
            clock=self.clock,
            machines=CachedObjects(self.machines, NS),
            machine_sets=CachedObjects(self.machine_sets, NS),
            machine_deployments=CachedObjects(self.machine_deployments, NS),
            nodes=self.nodes.lookup if target else None,
            clients=Clients(
                machines=cast(RESTClient, _Client(self.machines)),
                machine_sets=cast(RESTClient, _Client(self.machine_sets)),
                machine_deployments=cast(RESTClient, _Client(self.machine_deployments)),
                nodes=cast(RESTClient, _Client(self.nodes)) if target else None,
            ),
            recorder=cast(EventRecorder, self.events),
            expectations=Expectations(self.clock),
            enqueue=lambda queue, key, after: self.enqueued.append((queue, key, after)),
        )
        self.errors: list[Exception] = []
        self.pending_events: list[tuple[Store, Obj | None, Obj | None]] = []
        self.handlers = EventHandlers(
            self.deps, lambda queue, key, after: self.enqueued.append((queue, key, after))
        )

    def add(self, store: Store, obj: Mapping[str, Any]) -> Obj:
        """Create ``obj`` (and write its ``status`` and finalizers, which a create drops or keeps)."""
        created = store.create(obj)
        if obj.get("status"):
            created = store.update_status({**created, "status": copy.deepcopy(obj["status"])})
        return created

    def stores(self) -> list[Store]:
        return [self.machines, self.machine_sets, self.machine_deployments, self.nodes]

    def written(self, store: Store, old: Obj | None, new: Obj | None) -> None:
        """A write happened: the listeners look at the world, the handlers get the event
        (held back while the caches lag)."""
        for listener in self.listeners:
            listener(self)
        self.pending_events.append((store, old, new))
        if store.snapshot is None:
            self._deliver()

    def _deliver(self) -> None:
        while self.pending_events:
            store, old, new = self.pending_events.pop(0)
            h = self.handlers
            table = {
                "machines": (h.machine_added, h.machine_updated, h.machine_deleted),
                "machinesets": (h.machine_set_added, h.machine_set_updated, h.machine_set_deleted),
                "machinedeployments": (
                    h.machine_deployment_added_or_deleted,
                    h.machine_deployment_updated,
                    h.machine_deployment_added_or_deleted,
                ),
            }
            if store.resource not in table:
                continue
            added, updated, deleted = table[store.resource]
            if old is None:
                added(new)
            elif new is None:
                deleted(old)
            else:
                updated(old, new)

    @contextmanager
    def lag(self) -> Iterator[None]:
        """The caches show what they show now until the block ends."""
        for store in self.stores():
            store.snapshot = copy.deepcopy(store.objects)
        try:
            yield
        finally:
            self.catch_up()

    def catch_up(self) -> None:
        for store in self.stores():
            store.snapshot = None
            store.recorded.clear()
        self._deliver()

    # --- reconciling ------------------------------------------------------------------------------

    def reconcile_set(self, name: str) -> Any:
        return reconcile_machine_set(self.deps, f"{NS}/{name}")

    def reconcile_deployment(self, name: str) -> Any:
        return reconcile_machine_deployment(self.deps, f"{NS}/{name}")

    def write_count(self) -> int:
        return sum(len(s.writes) for s in self.stores())

    def settle(self, controller: FakeMachineController | None = None, rounds: int = 200) -> int:
        """Reconcile every deployment and set (and step ``controller``) until nothing is
        written; the rounds it took. Errors a reconcile raises are kept in ``errors``."""
        for round_number in range(rounds):
            before = self.write_count()
            for name in self.machine_deployments.names():
                self._run(self.reconcile_deployment, name)
            for name in self.machine_sets.names():
                self._run(self.reconcile_set, name)
            if controller is not None:
                controller.step()
            if self.write_count() == before:
                return round_number
        raise AssertionError(f"no steady state after {rounds} rounds")

    def _run(self, reconcile: Callable[[str], Any], name: str) -> None:
        try:
            reconcile(name)
        except TransientError as err:
            self.errors.append(err)


class _Client:
    """The REST-client face of a store (``get`` reads the store, not the cache); what its writes
    return is recorded, as the manager's RecordingRESTClient feeds its mutation cache."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, name: str, **_: Any) -> Obj:
        self._store.requested("get", name)
        return self._store.read(name)

    def _recorded(self, obj: Obj) -> Obj:
        if isinstance(obj.get("metadata"), dict) and obj["metadata"].get("resourceVersion"):
            self._store.recorded[obj["metadata"]["name"]] = copy.deepcopy(obj)
        return obj

    def create(self, body: Mapping[str, Any], **kwargs: Any) -> Obj:
        self._store.requested("create", (body.get("metadata") or {}).get("name", ""))
        return self._recorded(self._store.create(body, **kwargs))

    def update(self, body: Mapping[str, Any], **kwargs: Any) -> Obj:
        self._store.requested("update", body["metadata"]["name"])
        return self._recorded(self._store.update(body, **kwargs))

    def update_status(self, body: Mapping[str, Any], **kwargs: Any) -> Obj:
        self._store.requested("update_status", body["metadata"]["name"])
        return self._recorded(self._store.update_status(body, **kwargs))

    def patch(self, name: str, body: Mapping[str, Any], **kwargs: Any) -> Obj:
        self._store.requested("patch", name)
        self._store.patches.append(copy.deepcopy(body))
        return self._recorded(self._store.patch(name, body, **kwargs))

    def delete(self, name: str, **kwargs: Any) -> Obj:
        self._store.requested("delete", name)
        return self._store.delete(name, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@dataclass
class FakeMachineController:
    """Plays the machine controller on a :class:`World` (see the module docstring)."""

    world: World
    hold: set[str] = field(default_factory=set)
    """Machines left as they are (neither advanced nor finished)."""
    with_nodes: bool = True
    paused: bool = False
    """Do nothing at all (machines stay as they are)."""

    def step(self) -> None:
        if self.paused:
            return
        store = self.world.machines
        for name in list(store.objects):
            if name in self.hold or name not in store.objects:
                continue
            machine = store.read(name)
            if o.deletion_timestamp(machine):
                self._finish(machine)
                continue
            phase = o.text(machine, "status", "currentStatus", "phase")
            if phase == "":
                if c.MCM_FINALIZER not in o.finalizers(machine):
                    machine = store.update(o.with_finalizer(machine, c.MCM_FINALIZER))
                self._set_phase(machine, c.PHASE_PENDING)
            elif phase == c.PHASE_PENDING:
                self._join(machine)

    def _set_phase(self, machine: Obj, phase: str) -> Obj:
        status = dict(machine.get("status") or {})
        status["currentStatus"] = {"phase": phase, "lastUpdateTime": o.format_time(self.world.clock.now())}
        return self.world.machines.update_status({**machine, "status": status})

    def _join(self, machine: Obj) -> None:
        name = o.name_of(machine)
        if self.with_nodes and name not in self.world.nodes.objects:
            self.world.nodes.create(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}
            )
            labels = {**o.labels_of(machine), c.LABEL_NODE: name}
            machine = self.world.machines.update(
                {**machine, "metadata": {**machine["metadata"], "labels": labels}}
            )
        self._set_phase(machine, c.PHASE_RUNNING)

    def _finish(self, machine: Obj) -> None:
        node = o.label(machine, c.LABEL_NODE)
        if node and node in self.world.nodes.objects:
            self.world.nodes.delete(node)
        machine["metadata"]["finalizers"] = []
        self.world.machines.update(machine)

    def fail(self, name: str) -> None:
        """Mark a machine Failed (as a health-check timeout does)."""
        machine = self.world.machines.read(name)
        status = dict(machine.get("status") or {})
        status["currentStatus"] = {"phase": c.PHASE_FAILED}
        status["lastOperation"] = {
            "state": c.STATE_FAILED,
            "type": c.OPERATION_HEALTH_CHECK,
            "description": "health checks failing",
        }
        self.world.machines.update_status({**machine, "status": status})

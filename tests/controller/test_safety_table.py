"""Upstream v0.47.0 ``machine_safety_test.go`` and ``machine_safety_util_test.go`` (orphan VMs,
unmanaged nodes, safety handlers) as table tests, plus regressions for three upstream bugs (a
Secret cache error panics ``getSecretData``, a tombstone panics ``deleteMachineToSafety``, one bad
class stops ``checkMachineClasses``) and mcm's no-false-deletion guards.

Adapted where HEAD or mcm's fixes (docs/controller.md, "Safety loops") change the outcome:

- AnnotateNodes: HEAD entries added (finalizer removed before annotating, annotation removed
  when a machine claims the node); HEAD's age rule (exactly the creation timeout is old enough).
- updateNodeWithAnnotation: same NotFound and the same merged annotations in the request,
  but the caller's object is not mutated (cache objects are immutable in mcm).
- The orphan entries keep upstream's outcomes; mcm additionally confirms an orphan with a live
  GET and keeps VMs of machines in the creation flow (own entries below).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest

from mcm.apis.machine import constants as c
from mcm.controller.handlers import ORPHAN_SCAN_COALESCE_PERIOD, EventHandlers
from mcm.controller.safety import (
    REASON_MACHINE_NOT_FOUND,
    REASON_PROVIDER_ID_MISMATCH,
    OrphanCollector,
    orphan_reason,
    update_node_annotations,
)
from mcm.driver import (
    Code,
    DeleteMachineRequest,
    DeleteMachineResponse,
    ListMachinesRequest,
    ListMachinesResponse,
    MachineError,
)
from mcm.runtime.cache.keys import DeletedFinalStateUnknown
from mcm.runtime.cache.listers import NamespaceLister
from mcm.runtime.client.errors import ApiError, ConnectionFailed, InternalError
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import Result

from .builders import mk_class, mk_machine, mk_node, mk_secret
from .fakes import NS, FakeResource, World, make_world, ts

MIN = 60.0


# --- fixtures ---------------------------------------------------------------------------------


def recording(world: World) -> list[dict[str, Any]]:
    """Attach an event recorder to the world; the recorded events."""
    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    return events


def world_with_class(*, secret: bool = True) -> World:
    world = make_world()
    world.classes.put(mk_class("class-0"))
    if secret:
        world.secrets.put(mk_secret("secret-0", userData="x", key="from-secret"))
    return world


def deleted_ids(world: World) -> set[str]:
    return {
        cast(DeleteMachineRequest, call.request).machine.spec.provider_id or ""
        for call in world.driver.calls_to("delete_machine")
    }


class Raising:
    """A lister or REST client whose ``get`` raises ``error`` (everything else delegated)."""

    def __init__(self, inner: Any, error: Exception) -> None:
        self.inner = inner
        self.error = error

    def get(self, name: str, **_: Any) -> Any:
        raise self.error

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


def internal(message: str = "etcd timed out") -> InternalError:
    return InternalError({"message": message, "code": 500})


def reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


# --- Event handling: deleteMachineToSafety / updateMachineToSafety --------------------------------


def handlers(world: World) -> tuple[EventHandlers, list[tuple[str, str]]]:
    queued: list[tuple[str, str]] = []
    return EventHandlers(world.deps, lambda q, k, _after: queued.append((q, k))), queued


def orphan_adds(queued: list[tuple[str, str]]) -> int:
    return sum(1 for queue, key in queued if queue == "machinesafetyorphanvms" and key == "")


def test_delete_machine_to_safety_enqueues() -> None:
    """ "should enqueue the machine key": an empty Machine → orphan queue length 1."""
    h, queued = handlers(make_world())
    h.machine_deleted({})
    assert orphan_adds(queued) == 1


def test_triggered_orphan_scans_coalesce() -> None:
    """mcm differs: deletions enqueue the scan after ORPHAN_SCAN_COALESCE_PERIOD, so a burst of
    deletions in one period is one scan (upstream scans once per deletion). That the delaying
    queue keeps one pending key is client-go's earliest-time dedup (tests/runtime)."""
    delays: list[float] = []
    h = EventHandlers(
        make_world().deps,
        lambda q, _k, after: delays.append(after) if q == "machinesafetyorphanvms" else None,
    )
    for _ in range(3):
        h.machine_deleted({})
    h.machine_updated(_op("Creating"), _op("Cloud provider message - OutOfRange"))
    assert delays == [ORPHAN_SCAN_COALESCE_PERIOD] * 4 and ORPHAN_SCAN_COALESCE_PERIOD > 0


@pytest.mark.parametrize(
    "obj", [DeletedFinalStateUnknown("test-ns/m", {}), DeletedFinalStateUnknown("k", None), None]
)
def test_delete_machine_to_safety_tombstone(obj: Any) -> None:
    """A tombstone (or junk) delete event (upstream's ``deleteMachineToSafety`` panics) enqueues
    the scan and never crashes."""
    h, queued = handlers(make_world())
    h.machine_deleted(obj)
    assert orphan_adds(queued) == 1


def _op(description: str) -> dict[str, Any]:
    return {"status": {"lastOperation": {"description": description}}}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param({}, {}, 0, id="no OutOfRange in old or new"),
        pytest.param(
            {},
            _op("Machine abc: code = [NotFound] multiple VMs backing machine obj found"),
            0,
            id="no OutOfRange error (NotFound code)",
        ),
        pytest.param({}, _op("Failed: code = [OutOfRange] multiple VMs found"), 1, id="OutOfRange appears"),
        pytest.param(
            _op("code = [OutOfRange] multiple VMs"),
            _op("Machine abc successfully joined the cluster"),
            0,
            id="OutOfRange disappears",
        ),
    ],
)
def test_update_machine_to_safety(old: dict[str, Any], new: dict[str, Any], expected: int) -> None:
    h, queued = handlers(make_world())
    h.machine_updated(old, new)
    assert orphan_adds(queued) == expected


# --- Orphan VM collection (checkMachineClass) -----------------------------------------------------


@dataclasses.dataclass
class OrphanCase:
    machine: Callable[[World], dict[str, Any]] | None
    deleted: bool


ORPHAN_CASES = {
    "machine object not found": OrphanCase(None, True),
    "machine in CrashLoopBackOff, no providerID: kept": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", phase=c.PHASE_CRASH_LOOP_BACK_OFF, provider_id=""),
        False,
    ),
    "machine Running but does not refer to the VM: deleted": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", phase=c.PHASE_RUNNING, provider_id=""), True
    ),
    # extra entries completing upstream's classification of listed VMs (``checkMachineClass``)
    "machine with the VM's providerID: kept": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", phase=c.PHASE_RUNNING, provider_id="testmachine-ip1"),
        False,
    ),
    "machine with an empty phase: kept (still being created)": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", provider_id="other"), False
    ),
    "machine Failed with another VM: deleted": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", phase=c.PHASE_FAILED, provider_id="other"), True
    ),
    "machine Unknown with another VM: deleted": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", phase=c.PHASE_UNKNOWN, provider_id="other"), True
    ),
    "machine Pending with another VM: deleted": OrphanCase(
        lambda w: mk_machine(w.clock, "testmachine_1", phase=c.PHASE_PENDING, provider_id="other"), True
    ),
}


@pytest.mark.parametrize("name", list(ORPHAN_CASES))
def test_check_machine_class(name: str) -> None:
    case = ORPHAN_CASES[name]
    world = world_with_class()
    if case.machine is not None:
        world.machines.put(case.machine(world))
    world.driver.add_vm("testmachine-ip1", "testmachine_1")
    deleted = OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0"))
    assert ("testmachine-ip1" not in world.driver.vms) is case.deleted
    assert deleted == (["testmachine-ip1"] if case.deleted else [])


def test_orphan_delete_request_and_bookkeeping() -> None:
    """Synthetic machine (name, class namespace (HEAD), providerID), merged secret data, log/metric/Event."""
    world = world_with_class()
    world.classes.put({**mk_class("class-0"), "credentialsSecretRef": {"name": "creds", "namespace": NS}})
    world.secrets.put(mk_secret("creds", key="from-credentials"))
    events = recording(world)
    world.driver.add_vm("vm-1", "gone")
    OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0"))
    (call,) = world.driver.calls_to("delete_machine")
    request = cast(DeleteMachineRequest, call.request)
    assert request.machine.metadata.name == "gone"
    assert request.machine.metadata.namespace == NS
    assert request.machine.spec.provider_id == "vm-1"
    assert request.machine.metadata.labels in ({}, None)
    assert request.secret_data == {"userData": b"x", "key": b"from-credentials"}
    listed = cast(ListMachinesRequest, world.driver.calls_to("list_machines")[0].request)
    assert listed.secret_data == request.secret_data
    value = world.deps.metrics.registry.get_sample_value(
        "mcm_machine_orphan_vms_deleted_total",
        {"machine_class": "class-0", "reason": REASON_MACHINE_NOT_FOUND},
    )
    assert value == 1.0
    assert reasons(events) == ["OrphanVMDeleted"]
    assert events[0]["involvedObject"]["kind"] == "MachineClass"
    assert "vm-1" in events[0]["message"]


def test_malformed_listing_entries_are_kept() -> None:
    world = world_with_class()
    world.driver.script("list_machines", ListMachinesResponse({"": "m", "vm-2": "", "vm-3": "gone"}))
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == ["vm-3"]
    assert deleted_ids(world) == {"vm-3"}


def test_orphan_reason_rule() -> None:
    assert orphan_reason(None, "a") == REASON_MACHINE_NOT_FOUND
    running = {"spec": {"providerID": "b"}, "status": {"currentStatus": {"phase": "Running"}}}
    assert orphan_reason(running, "a") == REASON_PROVIDER_ID_MISMATCH
    assert orphan_reason(running, "b") is None


def test_the_vm_of_a_machine_deleted_before_it_got_a_provider_id_is_left_to_its_deletion() -> None:
    """Found by the chaos suite (long profile, mixed): a CreateMachine whose metadata write
    failed, the Machine deleted meanwhile; the orphan collector deleted the VM (provider ID
    mismatch, as upstream), the deletion flow then could not find the VM's Node by its provider
    ID, and the Node was left for ever. The deletion deletes that VM itself."""
    deleting = {
        "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": {"currentStatus": {"phase": "Terminating"}},
    }
    assert orphan_reason(deleting, "a") is None
    other = {**deleting, "spec": {"providerID": "b"}}
    assert orphan_reason(other, "a") == REASON_PROVIDER_ID_MISMATCH
    not_deleting = {"metadata": {}, "spec": {}, "status": {"currentStatus": {"phase": "Running"}}}
    assert orphan_reason(not_deleting, "a") == REASON_PROVIDER_ID_MISMATCH


def test_missing_secret_is_not_an_error() -> None:
    """``checkMachineClass``: a missing Secret adds nothing; the class is still listed and collected."""
    world = world_with_class(secret=False)
    world.driver.add_vm("vm-1", "gone")
    OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0"))
    listed = cast(ListMachinesRequest, world.driver.calls_to("list_machines")[0].request)
    assert listed.secret_data == {}
    assert deleted_ids(world) == {"vm-1"}


def test_delete_failure_is_logged_recorded_and_retried_next_run() -> None:
    world = world_with_class()
    events = recording(world)
    world.driver.add_vm("vm-1", "gone-1")
    world.driver.add_vm("vm-2", "gone-2")
    world.driver.script("delete_machine", MachineError(Code.Internal, "cloud says no"))
    collector = OrphanCollector(world.deps)
    assert collector.check_machine_class(world.classes.get("class-0")) == ["vm-2"]
    assert set(world.driver.vms) == {"vm-1"}
    assert reasons(events) == ["OrphanVMDeleteFailed", "OrphanVMDeleted"]
    assert collector.check_machine_class(world.classes.get("class-0")) == ["vm-1"]


# --- mcm guards: never delete a VM whose machine the caches have not seen ----------------------


def with_cache(world: World, machines: FakeResource) -> None:
    """Give the reconciler a machine cache that differs from the API."""
    world.deps.listers = dataclasses.replace(world.deps.listers, machines=cast(NamespaceLister, machines))


def test_stale_empty_cache_live_machine_keeps_vm() -> None:
    """The MCM #657 shape: the cache says "no machine", the API has it → kept."""
    world = world_with_class()
    world.machines.put(mk_machine(world.clock, "m1", phase=c.PHASE_RUNNING, provider_id="vm-1"))
    with_cache(world, FakeResource("machines"))
    world.driver.add_vm("vm-1", "m1")
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == []
    assert world.driver.calls_to("delete_machine") == []


def test_stale_cache_machine_still_creating_live_keeps_vm() -> None:
    """Cache: Running without the VM's ID; API: the creation flow already wrote it → kept."""
    world = world_with_class()
    world.machines.put(mk_machine(world.clock, "m1", phase=c.PHASE_PENDING, provider_id="vm-1"))
    stale = FakeResource("machines")
    stale.put(mk_machine(world.clock, "m1", phase=c.PHASE_FAILED, provider_id=""))
    with_cache(world, stale)
    world.driver.add_vm("vm-1", "m1")
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == []


@pytest.mark.parametrize(
    "error", [internal(), ConnectionFailed("connection refused", refused=True)], ids=["500", "refused"]
)
def test_live_lookup_failure_keeps_vm(error: Exception) -> None:
    world = world_with_class()
    world.deps.writers = dataclasses.replace(
        world.deps.writers, machines=cast(RESTClient, Raising(world.machines, error))
    )
    world.driver.add_vm("vm-1", "gone")
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == []


def test_cache_lookup_error_keeps_vm() -> None:
    """``checkMachineClass``: a lister error other than NotFound → VM kept, scan goes on."""
    world = world_with_class()
    with_cache(world, cast(FakeResource, Raising(world.machines, internal())))
    world.driver.add_vm("vm-1", "gone")
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == []


def test_a_vm_whose_machine_the_cache_cannot_read_is_kept_without_holding_off_its_creation() -> None:
    """The cheap cache look decides alone: an unreadable cache keeps the VM before the creation
    hold-off is taken, so a creation pass of that machine is never deferred for it."""
    world = world_with_class()
    with_cache(world, cast(FakeResource, Raising(world.machines, internal())))
    world.driver.add_vm("vm-1", "m1")
    held: list[str] = []
    hold_off = world.deps.creation.hold_off

    def spied(key: str) -> Any:
        held.append(key)
        return hold_off(key)

    world.deps.creation.hold_off = spied  # type: ignore[method-assign]
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == []
    assert held == []


def test_vm_in_creation_is_never_collected() -> None:
    """A VM whose machine is inside the creation flow is kept even if nothing knows it yet."""
    world = world_with_class()
    world.driver.add_vm("vm-1", "new-machine")
    collector = OrphanCollector(world.deps)
    with world.deps.creation.creating(f"{NS}/new-machine"):
        assert collector.check_machine_class(world.classes.get("class-0")) == []
    assert collector.check_machine_class(world.classes.get("class-0")) == ["vm-1"]


def test_no_creation_flow_starts_while_an_orphan_is_deleted() -> None:
    """The creation flow is refused (not kept waiting) while the orphan check holds the Machine."""
    world = world_with_class()
    world.driver.add_vm("vm-1", "m")
    taken_during_delete: list[bool] = []

    def delete(ctx: Any, request: Any) -> DeleteMachineResponse:
        with world.deps.creation.creating(f"{NS}/m") as taken:
            taken_during_delete.append(taken)
        return DeleteMachineResponse()

    world.driver.script("delete_machine", delete)
    assert OrphanCollector(world.deps).check_machine_class(world.classes.get("class-0")) == ["vm-1"]
    assert taken_during_delete == [False]
    with world.deps.creation.creating(f"{NS}/m") as taken:
        assert taken


def test_nothing_listed_before_the_machine_cache_synced() -> None:
    world = world_with_class()
    world.driver.add_vm("vm-1", "gone")
    synced = False
    collector = OrphanCollector(world.deps, lambda: synced)
    assert collector.reconcile("") == Result.after(c.SHORT_RETRY)
    assert world.driver.calls == []
    synced = True
    assert collector.reconcile("") == Result.after(world.deps.options.machine_safety_orphan_vms_period)
    assert deleted_ids(world) == {"vm-1"}


# --- one bad class never blocks the others (upstream: a panic, or the rest skipped) ---------------


def two_classes() -> World:
    world = make_world()
    world.secrets.put(mk_secret("secret-0", userData="x"))
    world.secrets.put(mk_secret("secret-1", userData="y"))
    world.classes.put(mk_class("class-a", secret="secret-0"))
    world.classes.put(mk_class("class-b", secret="secret-1"))
    world.driver.add_vm("vm-a", "gone-a", class_name="class-a")
    world.driver.add_vm("vm-b", "gone-b", class_name="class-b")
    return world


def _fail_list_for(world: World, class_name: str, error: Exception) -> None:
    real = world.driver

    def listing(ctx: Any, request: Any) -> Any:
        if request.machine_class.metadata.name == class_name:
            raise error
        return real._list(request.machine_class)

    world.driver.always("list_machines", listing)


def test_bug5_failing_list_skips_only_that_class() -> None:
    world = two_classes()
    events = recording(world)
    _fail_list_for(world, "class-a", MachineError(Code.Unauthenticated, "bad credentials"))
    result = OrphanCollector(world.deps).reconcile("")
    assert deleted_ids(world) == {"vm-b"}
    assert set(world.driver.vms) == {"vm-a"}
    assert result == Result.after(c.LONG_RETRY)
    (event,) = [e for e in events if e["reason"] == "OrphanCollectionFailed"]
    assert event["involvedObject"]["name"] == "class-a"
    assert event["type"] == "Warning"


def test_bug3_secret_lookup_error_skips_class_without_crash() -> None:
    world = two_classes()
    events = recording(world)
    secrets = world.secrets

    class FailingSecrets:
        def get(self, name: str) -> Any:
            if name == "secret-0":
                raise internal("secret cache broken")
            return secrets.get(name)

    world.deps.listers = dataclasses.replace(
        world.deps.listers, secrets=cast(NamespaceLister, FailingSecrets())
    )
    OrphanCollector(world.deps).reconcile("")
    assert deleted_ids(world) == {"vm-b"}
    assert [e["involvedObject"]["name"] for e in events if e["reason"] == "OrphanCollectionFailed"] == [
        "class-a"
    ]
    assert all("secret cache broken" not in str(call.request) for call in world.driver.calls)


def test_class_that_does_not_decode_is_skipped() -> None:
    world = two_classes()
    world.classes.put({**mk_class("class-a"), "providerSpec": "not-an-object", "secretRef": 7})
    OrphanCollector(world.deps).reconcile("")
    assert deleted_ids(world) == {"vm-b"}


def test_class_list_error_is_retried_long() -> None:
    world = two_classes()

    class NoList:
        def list(self) -> Any:
            raise internal()

    world.deps.listers = dataclasses.replace(world.deps.listers, classes=cast(NamespaceLister, NoList()))
    assert OrphanCollector(world.deps).reconcile("") == Result.after(c.LONG_RETRY)
    assert world.driver.calls == []


def test_driver_list_that_hangs_is_cut_off() -> None:
    """The driver call deadline bounds ListMachines: the class is skipped, not the worker held."""
    world = two_classes()
    world.deps.calls = type(world.deps.calls)(world.clock, world.deps.metrics, 0.0)

    def hang(ctx: Any, request: Any) -> Any:
        ctx.cancelled.wait(5)
        raise MachineError(Code.DeadlineExceeded, "late")

    world.driver.always("list_machines", hang)
    assert OrphanCollector(world.deps).reconcile("") == Result.after(c.LONG_RETRY)
    assert deleted_ids(world) == set()


# --- AnnotateNodesUnmanagedByMCM (with HEAD's entries) --------------------------------------------


def node_world() -> World:
    world = make_world()
    world.machines.put(mk_machine(world.clock, "testmachine_1", node="test-node-1"))
    world.machines.put(mk_machine(world.clock, "testmachine_2", node="test-node-2"))
    world.machines.put(mk_machine(world.clock, "testmachine_3", node="test-node-2"))
    for name in ("test-node-1", "test-node-2"):
        world.nodes.put(mk_node(name, metadata={"annotations": {"anno1": "value1"}}))
    return world


def _node0(world: World, age: float | None, annotations: dict[str, str], finalizers: list[str]) -> None:
    metadata: dict[str, Any] = {"annotations": dict(annotations), "finalizers": list(finalizers)}
    if age is not None:
        metadata["creationTimestamp"] = ts(world.clock, age)
    world.nodes.put(mk_node("test-node-0", metadata=metadata))


NOT_MANAGED = {c.ANNOTATION_NOT_MANAGED_BY_MCM: "1"}


@pytest.mark.parametrize(
    ("age", "annotations", "finalizers", "expected_annotations", "expected_finalizers"),
    [
        pytest.param(
            21 * MIN,
            {"anno1": "value1"},
            [],
            {"anno1": "value1", **NOT_MANAGED},
            [],
            id="21 min old: annotated",
        ),
        pytest.param(19 * MIN, {"anno1": "value1"}, [], {"anno1": "value1"}, [], id="19 min old: too young"),
        pytest.param(None, NOT_MANAGED, [], NOT_MANAGED, [], id="already annotated (zero creation time)"),
        pytest.param(
            21 * MIN,
            {"anno1": "value1"},
            [c.NODE_FINALIZER],
            {"anno1": "value1", **NOT_MANAGED},
            [],
            id="HEAD: annotate orphan node and remove its MCM finalizer",
        ),
        pytest.param(
            None,
            NOT_MANAGED,
            [c.NODE_FINALIZER, "other"],
            NOT_MANAGED,
            ["other"],
            id="HEAD: annotated, finalizer left",
        ),
        pytest.param(
            20 * MIN, {}, [], NOT_MANAGED, [], id="HEAD: exactly the creation timeout is old enough"
        ),
    ],
)
def test_annotate_nodes_unmanaged(
    age: float | None,
    annotations: dict[str, str],
    finalizers: list[str],
    expected_annotations: dict[str, str],
    expected_finalizers: list[str],
) -> None:
    world = node_world()
    _node0(world, age, annotations, finalizers)
    before = {n: world.nodes.get(n) for n in ("test-node-1", "test-node-2")}
    assert OrphanCollector(world.deps).annotate_unmanaged_nodes() is None
    node0 = world.nodes.get("test-node-0")
    assert node0["metadata"].get("annotations") == expected_annotations
    assert node0["metadata"].get("finalizers") == expected_finalizers
    assert {n: world.nodes.get(n) for n in before} == before


def test_finalizer_is_removed_before_annotating() -> None:
    world = node_world()
    _node0(world, 21 * MIN, {}, [c.NODE_FINALIZER])
    world.nodes.writes.clear()
    OrphanCollector(world.deps).annotate_unmanaged_nodes()
    assert world.nodes.writes == [("patch", "test-node-0"), ("update", "test-node-0")]


def test_head_annotation_removed_when_a_machine_claims_the_node() -> None:
    """HEAD "Node incorrectly assigned NotManagedByMCM annotation"."""
    world = node_world()
    world.machines.put(mk_machine(world.clock, "testmachine_0", node="test-node-0"))
    _node0(world, 30 * MIN, {"anno1": "value1", **NOT_MANAGED}, [])
    assert OrphanCollector(world.deps).annotate_unmanaged_nodes() is None
    assert world.nodes.get("test-node-0")["metadata"]["annotations"] == {"anno1": "value1"}


@pytest.mark.parametrize("verb", ["patch", "update"])
def test_failed_node_write_returns_medium_retry_and_stops(verb: str) -> None:
    world = node_world()
    _node0(world, 30 * MIN, {}, [c.NODE_FINALIZER])
    world.nodes.put(mk_node("test-node-9", metadata={"creationTimestamp": ts(world.clock, 30 * MIN)}))
    world.nodes.fail(verb, internal())
    collector = OrphanCollector(world.deps)
    assert collector.annotate_unmanaged_nodes() == c.MEDIUM_RETRY
    assert c.ANNOTATION_NOT_MANAGED_BY_MCM not in world.nodes.get("test-node-9")["metadata"].get(
        "annotations", {}
    )
    result = collector.reconcile("")
    assert result == Result.after(c.MEDIUM_RETRY)


def test_no_target_cluster_skips_node_tagging() -> None:
    world = node_world()
    _node0(world, 30 * MIN, {}, [])
    world.deps.listers = dataclasses.replace(world.deps.listers, nodes=None)
    world.deps.writers = dataclasses.replace(world.deps.writers, nodes=None)
    assert OrphanCollector(world.deps).annotate_unmanaged_nodes() is None
    assert world.nodes.writes == []


# --- updateNodeWithAnnotation ---------------------------------------------------------------------


class Capturing:
    def __init__(self, inner: FakeResource) -> None:
        self.inner = inner
        self.bodies: list[Mapping[str, Any]] = []

    def update(self, body: Mapping[str, Any], **kwargs: Any) -> Any:
        self.bodies.append(body)
        return self.inner.update(body, **kwargs)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(
            {"anno1": "value1"}, {"anno1": "value1", **NOT_MANAGED}, id="annotations already present"
        ),
        pytest.param(None, NOT_MANAGED, id="no annotations present"),
    ],
)
def test_update_node_with_annotations(annotations: dict[str, str] | None, expected: dict[str, str]) -> None:
    """The node does not exist → NotFound(nodes "test-node-0") comes back unchanged. Adapted: the
    caller's object is not mutated (cache objects are immutable here); the body sent has the merge."""
    writer = Capturing(FakeResource("nodes", False))
    node = mk_node("test-node-0")
    if annotations is not None:
        node["metadata"]["annotations"] = dict(annotations)
    snapshot = dict(node["metadata"])
    error = update_node_annotations(writer, node, add=NOT_MANAGED)
    assert isinstance(error, ApiError) and error.code == 404
    assert 'nodes "test-node-0"' in error.message
    assert writer.bodies[0]["metadata"]["annotations"] == expected
    assert node["metadata"] == snapshot


def test_update_node_with_annotations_remove() -> None:
    world = make_world()
    world.nodes.put(mk_node("n", metadata={"annotations": {"a": "1", **NOT_MANAGED}}))
    stored = update_node_annotations(
        world.nodes, world.nodes.get("n"), remove=(c.ANNOTATION_NOT_MANAGED_BY_MCM,)
    )
    assert isinstance(stored, Mapping)
    assert stored["metadata"]["annotations"] == {"a": "1"}


# --- the class's Secret data (machine controller mutation run, after the second sample) ---------


def _secret_data(world: World, klass: dict[str, Any]) -> dict[str, bytes]:
    from mcm.apis.machine.v1alpha1 import MachineClass
    from mcm.controller.safety import class_secret_data

    return class_secret_data(world.deps, MachineClass.from_dict(klass))


def _raw_secret(name: str, data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": data}


@pytest.mark.parametrize(
    ("refs", "secrets", "merged"),
    [
        # secretRef first, credentialsSecretRef merged over it
        (
            {"secretRef": "a", "credentialsSecretRef": "b"},
            [mk_secret("a", userData="u", key="from-a"), mk_secret("b", key="from-b")],
            {"userData": b"u", "key": b"from-b"},
        ),
        ({"credentialsSecretRef": "b"}, [mk_secret("b", key="from-b")], {"key": b"from-b"}),
        ({"secretRef": "a"}, [], {}),  # a missing Secret adds nothing
        ({"secretRef": ""}, [mk_secret("", key="nameless")], {}),  # a reference without a name
        ({"secretRef": "a"}, [_raw_secret("a", "not a map")], {}),
        ({"secretRef": "a"}, [_raw_secret("a", {"empty": None})], {"empty": b""}),
    ],
)
def test_class_secret_data(
    refs: dict[str, str], secrets: list[dict[str, Any]], merged: dict[str, bytes]
) -> None:
    world = make_world()
    for secret in secrets:
        world.secrets.objects[secret["metadata"]["name"]] = secret
    klass = mk_class("class-0")
    del klass["secretRef"]
    for field_name, name in refs.items():
        klass[field_name] = {"name": name, "namespace": NS}
    assert _secret_data(world, klass) == merged


def test_a_secret_reference_into_another_namespace_adds_nothing() -> None:
    world = make_world()
    world.secrets.put(mk_secret("a", key="here"))
    klass = mk_class("class-0")
    klass["secretRef"] = {"name": "a", "namespace": "elsewhere"}
    assert _secret_data(world, klass) == {}
    klass["secretRef"] = {"name": "a"}  # no namespace: the controller's
    assert _secret_data(world, klass) == {"key": b"here"}


@pytest.mark.parametrize("value", ["@@@@", "YWJj!"], ids=["not-base64", "trailing-junk"])
def test_secret_data_that_is_not_base64_skips_the_class_with_an_event(value: str) -> None:
    world = world_with_class(secret=False)
    world.secrets.objects["secret-0"] = _raw_secret("secret-0", {"userData": value})
    events: list[dict[str, Any]] = []
    world.deps.recorder = EventRecorder(
        lambda e: events.append(e) or True, "machine-controller", clock=world.clock
    )
    world.driver.add_vm("vm-1", "gone")
    assert OrphanCollector(world.deps).check_machine_classes() == c.LONG_RETRY
    assert deleted_ids(world) == set()
    assert [(e["reason"], e["message"]) for e in events] == [
        ("OrphanCollectionFailed", "Secret 'secret-0' holds data that is not valid base64")
    ]

"""Issue 23's defects, one regression table each: no fault of the network, the API servers or a
driver ends the process, makes a second VM or loses anyone's data."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import MachineClass
from mcm.controller.classes import reconcile_machine_class_key, reconcile_secret_key
from mcm.controller.creation import trigger_creation_flow
from mcm.controller.deletion import dispatch, trigger_deletion_flow
from mcm.controller.drivercalls import DriverCaller, LeaseNotHeld
from mcm.controller.machine import MachineReconciler
from mcm.controller.node import reconcile_node_key
from mcm.driver import (
    Code,
    CreateMachineResponse,
    GetMachineStatusResponse,
    MachineError,
)
from mcm.driver.grpc import GrpcDriver, serve
from mcm.runtime.client.errors import ConnectionFailed
from mcm.runtime.worker import DONE, Result, join_workers, start_workers
from mcm.runtime.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue

from .builders import HEALTHY, mk_class, mk_machine, mk_node, mk_secret
from .fakes import NS, World, make_world
from .fixtures import StubDrainer
from .test_deletion_table import inputs, op, terminating
from .test_safety_table import Raising

KEY = f"{NS}/machine-0"


def reset() -> ConnectionFailed:
    return ConnectionFailed("PUT https://control/...: ProtocolError: Connection reset by peer")


def klass() -> MachineClass:
    return MachineClass.from_dict(mk_class())


def creation_world(**machine: Any) -> tuple[World, dict[str, Any]]:
    world = make_world(drainer=StubDrainer())
    world.classes.put(mk_class())
    world.secrets.put(mk_secret(userData="#!/bin/sh"))
    world.machines.put(mk_machine(world.clock, **machine))
    return world, world.machines.get("machine-0")


def create(world: World, machine: dict[str, Any]) -> Result:
    return trigger_creation_flow(world.deps, machine, klass(), {"userData": b"#!/bin/sh"})


def deletion_world(description: str, **kw: Any) -> tuple[World, dict[str, Any]]:
    world = make_world(drainer=StubDrainer())
    world.machines.put(terminating(world, description, **kw))
    world.driver.add_vm("fakeID-0", "machine-0", node_name="fakeNode-0")
    return world, world.machines.get("machine-0")


# --- defect 1: transport errors are errors, everywhere the controller calls the API -----------


def test_a_reset_on_the_creation_status_write_is_a_short_retry() -> None:
    world, machine = creation_world(provider_id="fakeID-0", node="fakeNode-0")
    world.driver.always("get_machine_status", GetMachineStatusResponse("fakeID-0", "fakeNode-0"))
    world.machines.fail("update_status", reset(), 1)
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert create(world, world.machines.get("machine-0")) == Result.after(c.SHORT_RETRY)
    assert world.machines.get("machine-0")["status"]["currentStatus"]["phase"] == c.PHASE_PENDING


def test_a_reset_on_the_creation_metadata_write_is_a_short_retry() -> None:
    world, machine = creation_world()
    world.machines.fail("update", reset(), 1)
    assert create(world, machine) == Result.after(c.SHORT_RETRY)


def test_a_reset_on_the_bootstrap_token_read_is_a_short_retry_without_a_vm() -> None:
    world, machine = creation_world()
    world.deps.writers = replace(world.deps.writers, target_secrets=Raising(world.target_secrets, reset()))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    assert world.driver.calls_to("create_machine") == []


def test_a_reset_on_the_bootstrap_token_create_is_a_short_retry() -> None:
    world, machine = creation_world()
    world.target_secrets.fail("create", reset(), 1)
    assert create(world, machine) == Result.after(c.SHORT_RETRY)


def test_a_reset_on_the_finalizer_write_is_a_short_retry() -> None:
    world, _ = creation_world(finalizer=False)
    world.machines.fail("update", reset(), 1)
    assert MachineReconciler(world.deps).reconcile_machine_key(KEY) == Result.after(c.SHORT_RETRY)


@pytest.mark.parametrize(
    ("description", "resource", "verb", "setup"),
    [
        pytest.param(c.MARKER_GET_VM_STATUS, "machines", "update_status", None, id="status write"),
        pytest.param(c.DESC_VM_FOUND, "nodes", "live get", "node", id="node condition read"),
        pytest.param(c.DESC_VM_FOUND, "nodes", "update_status", "node", id="node condition write"),
        pytest.param(c.DESC_FORCE_DRAIN_SUCCESSFUL, "volume_attachments", "delete", "va", id="VA delete"),
        pytest.param(c.DESC_VM_DELETED, "nodes", "patch", "node", id="node finalizer patch"),
        pytest.param(c.DESC_VM_DELETED, "nodes", "delete", "node", id="node delete"),
        pytest.param(
            c.DESC_NODE_DELETED.format(node="fakeNode-0"), "machines", "update", None, id="finalizer"
        ),
    ],
)
def test_a_reset_in_any_deletion_step_is_retried_never_raised(
    description: str, resource: str, verb: str, setup: str | None
) -> None:
    world, machine = deletion_world(description)
    node: dict[str, Any] = {"metadata": {"finalizers": [c.NODE_FINALIZER]}}
    if setup == "va":
        node["status"] = {"volumesAttached": [{"name": "vol-1", "devicePath": ""}]}
        world.volume_attachments.put({"metadata": {"name": "va-1"}, "spec": {"nodeName": "fakeNode-0"}})
    if setup is not None:
        world.nodes.put(mk_node("fakeNode-0", **node))
    if verb == "live get":
        world.deps.writers = replace(world.deps.writers, nodes=Raising(world.nodes, reset()))
    else:
        getattr(world, resource).fail(verb, reset())
    result = trigger_deletion_flow(world.deps, machine, klass(), {})
    assert result is not None and result.requeue_after is not None
    assert "machine-0" in world.machines.objects


@pytest.mark.parametrize("verb", ["live get", "update"])
def test_a_reset_in_the_class_and_secret_finalizer_loops_is_a_short_retry(verb: str) -> None:
    world = make_world()
    world.classes.put(mk_class(finalizer=False))
    world.secrets.put(mk_secret())
    world.machines.put(mk_machine(world.clock))
    if verb == "live get":
        classes, secrets = Raising(world.classes, reset()), Raising(world.secrets, reset())
        world.deps.writers = replace(world.deps.writers, classes=classes, secrets=secrets)
    world.classes.fail("update", reset())
    world.secrets.fail("update", reset())
    assert reconcile_machine_class_key(world.deps, f"{NS}/class-0") == Result.after(c.SHORT_RETRY)
    assert reconcile_secret_key(world.deps, f"{NS}/secret-0") == Result.after(c.SHORT_RETRY)


def test_a_reset_in_the_node_loop_is_a_short_retry() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0"))
    world.machines.put(mk_machine(world.clock, node="node-0"))
    world.nodes.fail("patch", reset(), 1)
    assert reconcile_node_key(world.deps, "node-0") == Result.after(c.SHORT_RETRY)
    world.nodes.put({**mk_node("node-0"), "metadata": {"name": "node-0", "deletionTimestamp": "x"}})
    world.machines.fail("delete", reset(), 1)
    assert reconcile_node_key(world.deps, "node-0") == Result.after(c.SHORT_RETRY)


def test_a_reset_deleting_the_bootstrap_token_does_not_stop_the_machine_going_running() -> None:
    world, _ = creation_world(phase=c.PHASE_PENDING, node="node-0", provider_id="fakeID-0")
    world.nodes.put(mk_node("node-0", HEALTHY))
    world.target_secrets.fail("delete", reset())
    MachineReconciler(world.deps).reconcile_machine_key(KEY)
    assert world.machines.get("machine-0")["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING


def test_every_request_failure_and_driver_error_is_a_transient_error() -> None:
    from mcm.runtime.errors import TransientError

    assert issubclass(ConnectionFailed, TransientError)
    assert isinstance(MachineError(Code.Internal, "x"), TransientError)


# --- defect 2: creation and deletion of one Machine never overlap ------------------------------


def test_a_creation_pass_with_a_stale_copy_never_creates_a_vm_for_a_deleting_machine() -> None:
    """A worker that read the cache just before the deletionTimestamp arrived holds a copy
    without it; the creation flow re-reads the cache once it holds the Machine."""
    world, stale = creation_world()
    deleting = world.machines.get("machine-0")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    world.machines.put(deleting)
    assert create(world, stale) == DONE
    assert world.driver.calls == []
    assert ("machinetermination", KEY) in world.enqueued


def test_creation_is_refused_while_a_deletion_pass_runs_and_the_other_way_round() -> None:
    drainer = BlockingDrainer()
    world = make_world(drainer=drainer)
    world.machines.put(terminating(world, c.DESC_VM_FOUND, provider_id=None))
    world.nodes.put(mk_node("fakeNode-0"))
    machine = world.machines.get("machine-0")
    deleting = threading.Thread(target=trigger_deletion_flow, args=(world.deps, machine, klass(), {}))
    deleting.start()
    assert drainer.entered.wait(5)
    try:
        stale = dict(machine)
        stale["metadata"] = {k: v for k, v in machine["metadata"].items() if k != "deletionTimestamp"}
        assert create(world, stale) == Result.after(c.SHORT_RETRY)
        assert world.driver.calls_to("create_machine") == []
    finally:
        drainer.release.set()
        deleting.join(5)
    world2, machine2 = deletion_world(c.MARKER_GET_VM_STATUS)
    with world2.deps.creation.creating(KEY) as taken:
        assert taken
        assert trigger_deletion_flow(world2.deps, machine2, klass(), {}) == Result.after(c.MEDIUM_RETRY)
    assert world2.machines.writes == []


class BlockingDrainer(StubDrainer):
    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def drain(self, node_name: str, options: Any, *, machine_ref: Any = None) -> Any:
        self.entered.set()
        self.release.wait(5)
        return super().drain(node_name, options, machine_ref=machine_ref)


# --- defect 3: a CreateMachine past its deadline keeps the Machine in creation -----------------


def test_a_create_machine_past_its_deadline_keeps_the_machine_in_creation_until_it_returns() -> None:
    world, machine = creation_world()
    world.deps.calls = DriverCaller(world.clock, world.deps.metrics, 10.0)
    booting = threading.Event()
    release = threading.Event()

    def slow_create(ctx: Any, request: Any) -> CreateMachineResponse:
        booting.set()
        release.wait(10)
        world.driver.add_vm("fakeID-0", "machine-0")
        return CreateMachineResponse("fakeID-0", "machine-0")

    world.driver.script("create_machine", slow_create)
    first: list[Result] = []
    runner = threading.Thread(target=lambda: first.append(create(world, machine)))
    runner.start()
    assert booting.wait(5)
    world.clock.step(10.0)  # abandoned; the driver (ignoring the cancellation) still runs
    assert runner.is_alive() and first == []
    assert KEY in world.deps.creation
    again = world.machines.get("machine-0")
    assert create(world, again) == Result.after(c.SHORT_RETRY)
    assert len(world.driver.calls_to("create_machine")) == 1
    deleting = dict(again, metadata={**again["metadata"], "deletionTimestamp": "2026-01-01T12:00:00Z"})
    assert trigger_deletion_flow(world.deps, deleting, klass(), {}) == Result.after(c.MEDIUM_RETRY)
    release.set()
    runner.join(5)
    assert first == [Result.after(c.CONFLICT_RETRY)]  # DeadlineExceeded, written after the late answer
    assert KEY not in world.deps.creation
    assert create(world, world.machines.get("machine-0")) == Result.after(c.SHORT_RETRY)
    assert len(world.driver.calls_to("create_machine")) == 1
    assert world.machines.get("machine-0")["spec"]["providerID"] == "fakeID-0"


def phase_of_machine(world: World, name: str) -> str | None:
    return world.machines.get(name).get("status", {}).get("currentStatus", {}).get("phase")


def test_a_worker_stuck_in_a_create_machine_is_replaced_and_no_second_vm_is_made() -> None:
    """Issue 39: driver calls run on the workers. A CreateMachine past --driver-call-timeout
    that ignores the cancellation: at the deadline the worker's place goes to a new thread
    (the queue of one worker goes on with the next machine), the Machine stays in creation,
    its key is not reconciled again while the call runs, and there is never a second
    CreateMachine for it."""
    world, _ = creation_world()
    world.machines.put(mk_machine(world.clock, "machine-1"))
    world.deps.calls = DriverCaller(world.clock, world.deps.metrics, 10.0)
    booting, release = threading.Event(), threading.Event()

    def slow_create(ctx: Any, request: Any) -> CreateMachineResponse:
        booting.set()
        release.wait(10)
        world.driver.add_vm("fakeID-0", "machine-0")
        return CreateMachineResponse("fakeID-0", "machine-0")

    world.driver.script("create_machine", slow_create, machine="machine-0")
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(0.0, 0.0), clock=world.clock
    )
    stop = threading.Event()
    reconciler = MachineReconciler(world.deps)
    threads = start_workers(
        queue, "machine", 1, reconciler.reconcile_machine_key, 15, stop, clock=world.clock
    )
    try:
        queue.add(KEY)
        assert booting.wait(5)
        stuck = threads[0]
        queue.add(f"{NS}/machine-1")
        assert queue.len() == 1  # the only worker is stuck in the driver
        world.clock.step(10.0)  # the deadline: abandoned, the worker replaced
        wait_for(lambda: world.machines.get("machine-1")["spec"].get("providerID") == "fake:///machine-1")
        assert stuck not in threads and len(threads) == 1
        assert KEY in world.deps.creation
        queue.add(KEY)  # an update event meanwhile: kept back while the stuck worker holds it
        assert queue.len() == 0
        assert len(world.driver.calls_to("create_machine")) == 2  # machine-0 once, machine-1 once
        release.set()
        stuck.join(5)
        assert not stuck.is_alive()  # the replaced worker ended once its call returned
        world.clock.step(1.0)  # its DeadlineExceeded asked for a retry soon
        wait_for(lambda: phase_of_machine(world, "machine-0") == c.PHASE_PENDING)
    finally:
        release.set()
        stop.set()
        queue.shut_down()
        join_workers(threads, 5)
    creates = [call.machine for call in world.driver.calls_to("create_machine")]
    assert sorted(creates) == ["machine-0", "machine-1"]
    assert sorted(world.driver.vms) == ["fake:///machine-1", "fakeID-0"]  # one VM per Machine
    assert world.machines.get("machine-0")["spec"]["providerID"] == "fakeID-0"


@contextmanager
def behind_a_sidecar(world: World) -> Iterator[None]:
    """The world's FakeDriver served by a gRPC sidecar; the controller talks to it over gRPC."""
    with serve(world.driver, "127.0.0.1:0") as server, GrpcDriver(server.endpoint, timeout=30.0) as client:
        world.deps.driver = client
        yield


def abandon_a_slow_sidecar_create(world: World) -> threading.Event:
    """A CreateMachine past --driver-call-timeout whose cloud request ignores cancellation and
    makes its VM once the returned event is set."""
    world.deps.calls = DriverCaller(world.clock, world.deps.metrics, 10.0)
    booting, release = threading.Event(), threading.Event()

    def slow_create(ctx: Any, request: Any) -> CreateMachineResponse:
        booting.set()
        release.wait(10)
        world.driver.add_vm("fakeID-first", "machine-0")
        return CreateMachineResponse("fakeID-first", "machine-0")

    world.driver.script("create_machine", slow_create)
    first: list[Result] = []
    runner = threading.Thread(target=lambda: first.append(create(world, world.machines.get("machine-0"))))
    runner.start()
    assert booting.wait(5)
    world.clock.block_until_waiters()
    world.clock.step(10.0)
    runner.join(5)
    assert first == [Result.after(c.SHORT_RETRY)]
    # The gRPC call returned at once when it was cancelled: the controller let go of the Machine.
    wait_for(lambda: KEY not in world.deps.creation)
    return release


def test_a_create_machine_abandoned_behind_a_sidecar_never_gives_a_second_vm() -> None:
    """Found by the chaos suite's long run (machine m0429-2a51): the retry's CreateMachine ran
    beside the abandoned one in the same sidecar and made a second VM."""
    world, _ = creation_world()
    with behind_a_sidecar(world):
        release = abandon_a_slow_sidecar_create(world)
        assert create(world, world.machines.get("machine-0")) == Result.after(c.SHORT_RETRY)
        refused = world.machines.get("machine-0")
        assert len(world.driver.calls_to("create_machine")) == 1
        assert world.driver.vms == {}
        assert refused["status"]["lastOperation"]["errorCode"] == "Aborted"
        assert "still running" in refused["status"]["lastOperation"]["description"]
        assert refused["status"]["currentStatus"]["phase"] == c.PHASE_CRASH_LOOP_BACK_OFF
        release.set()
        wait_for(lambda: bool(world.driver.vms))
        create(world, world.machines.get("machine-0"))
    assert len(world.driver.calls_to("create_machine")) == 1
    assert list(world.driver.vms) == ["fakeID-first"]
    adopted = world.machines.get("machine-0")
    assert adopted["spec"]["providerID"] == "fakeID-first"
    assert adopted["status"]["currentStatus"]["phase"] == c.PHASE_PENDING


def test_a_deletion_during_a_create_machine_abandoned_behind_a_sidecar_leaves_no_vm() -> None:
    """The deletion's DeleteMachine is refused (Aborted, retried soon) until the abandoned
    CreateMachine has made its VM; then it deletes that VM."""
    world, _ = creation_world(finalizer=True)
    with behind_a_sidecar(world):
        release = abandon_a_slow_sidecar_create(world)
        world.machines.delete("machine-0")
        deleting = world.machines.get("machine-0")
        assert trigger_deletion_flow(world.deps, deleting, klass(), {}) == Result.after(c.SHORT_RETRY)
        waiting = world.machines.get("machine-0")
        assert c.MCM_FINALIZER in waiting["metadata"]["finalizers"]
        assert "still running" in waiting["status"]["lastOperation"]["description"]
        assert world.driver.calls_to("delete_machine") == []
        release.set()
        wait_for(lambda: bool(world.driver.vms))
        for _ in range(5):
            current = world.machines.objects.get("machine-0")
            if current is None:
                break
            trigger_deletion_flow(world.deps, current, klass(), {})
    assert world.driver.vms == {}
    assert "machine-0" not in world.machines.objects


def test_a_driver_call_that_returns_in_time_is_never_counted_as_abandoned() -> None:
    world = make_world()
    abandoned: list[str] = []
    caller = DriverCaller(world.clock, world.deps.metrics, 10.0)

    def on_abandon() -> Callable[[], None]:
        abandoned.append("x")
        return lambda: None

    assert caller.call("create_machine", lambda ctx: 1, on_abandon=on_abandon) == 1
    assert abandoned == []


def wait_for(predicate: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(500):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")


# --- defect 4: finalizer writes keep what other writers put there ------------------------------


def test_the_class_finalizer_is_added_to_the_live_object_keeping_a_newer_finalizer() -> None:
    world = make_world()
    world.classes.put(mk_class(finalizer=False))
    world.machines.put(mk_machine(world.clock))
    cached = world.classes.get("class-0")
    live = world.classes.get("class-0")
    live["metadata"]["finalizers"] = ["bystander.example.com/keep"]
    world.classes.put(live)  # another controller wrote after the cache was filled
    world.deps.listers = replace(world.deps.listers, classes=StaticLister(cached, world.deps.listers.classes))
    assert reconcile_machine_class_key(world.deps, f"{NS}/class-0") == Result.after(c.LONG_RETRY)
    assert world.classes.get("class-0")["metadata"]["finalizers"] == [
        "bystander.example.com/keep",
        c.MCM_FINALIZER,
    ]


def test_the_secret_finalizer_removal_keeps_a_newer_finalizer() -> None:
    world = make_world()
    world.secrets.put(mk_secret(finalizers=[c.MC_FINALIZER]))
    cached = world.secrets.get("secret-0")
    live = world.secrets.get("secret-0")
    live["metadata"]["finalizers"] = [c.MC_FINALIZER, "bystander.example.com/keep"]
    world.secrets.put(live)
    world.deps.listers = replace(world.deps.listers, secrets=StaticLister(cached, world.deps.listers.secrets))
    assert reconcile_secret_key(world.deps, f"{NS}/secret-0") == Result.after(600.0)
    assert world.secrets.get("secret-0")["metadata"]["finalizers"] == ["bystander.example.com/keep"]


class StaticLister:
    """A cache that still holds ``obj`` (an older copy) for its name; others from ``rest``."""

    def __init__(self, obj: dict[str, Any], rest: Any) -> None:
        self.obj, self.rest = obj, rest

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.obj) if name == self.obj["metadata"]["name"] else dict(self.rest.get(name))

    def list(self, selector: Any = None) -> list[dict[str, Any]]:
        return [dict(self.obj)] + [
            o for o in self.rest.list() if o["metadata"]["name"] != self.obj["metadata"]["name"]
        ]


def test_node_finalizer_patches_carry_the_resource_version() -> None:
    world = make_world()
    world.nodes.put(mk_node("node-0"))
    world.machines.put(mk_machine(world.clock, node="node-0"))
    version = world.nodes.get("node-0")["metadata"]["resourceVersion"]
    assert reconcile_node_key(world.deps, "node-0") == DONE
    assert world.nodes.patches[-1][1]["metadata"]["resourceVersion"] == version
    world2, machine = deletion_world(c.DESC_VM_DELETED)
    world2.nodes.put(mk_node("fakeNode-0", metadata={"finalizers": [c.NODE_FINALIZER, "other/keep"]}))
    version2 = world2.nodes.get("fakeNode-0")["metadata"]["resourceVersion"]
    dispatch(machine)(world2.deps, machine, inputs())
    assert world2.nodes.patches[0][1]["metadata"] == {
        "finalizers": ["other/keep"],
        "resourceVersion": version2,
    }


# --- defect 5: a VolumeAttachment already being deleted does not block the deletion ------------


def test_a_deleting_volume_attachment_does_not_hold_the_vm_deletion() -> None:
    world, machine = deletion_world(c.DESC_FORCE_DRAIN_SUCCESSFUL)
    world.nodes.put(mk_node("fakeNode-0", status={"volumesAttached": [{"name": "vol-1", "devicePath": ""}]}))
    held = {"name": "va-1", "deletionTimestamp": "2026-01-01T11:00:00Z", "finalizers": ["external-attacher"]}
    world.volume_attachments.put({"metadata": held, "spec": {"nodeName": "fakeNode-0"}})
    outcome = dispatch(machine)(world.deps, machine, inputs())
    assert outcome.result is None
    assert op(world.machines.get("machine-0"))[0] == c.DESC_VA_NONE_LIVE.format(node="fakeNode-0")
    assert world.volume_attachments.writes == []


# --- defect 6: lastKnownState from CreateMachine is kept -------------------------------------


def test_last_known_state_survives_a_failed_initialize_machine() -> None:
    world, machine = creation_world()
    world.driver.script(
        "create_machine", CreateMachineResponse("fakeID-0", "machine-0", last_known_state="s1")
    )
    world.driver.script("initialize_machine", MachineError(Code.Internal, "init failed"))
    assert create(world, machine) == Result.after(c.SHORT_RETRY)
    stored = world.machines.get("machine-0")
    assert stored["status"]["lastKnownState"] == "s1"
    assert stored["status"]["lastOperation"]["errorCode"] == "Internal"


def test_last_known_state_is_written_when_no_pending_write_is_due() -> None:
    """A Running machine that lost its providerID gets a VM; the phase stays, the state is kept."""
    world, machine = creation_world(phase=c.PHASE_RUNNING, description="x", op_type=c.OPERATION_HEALTH_CHECK)
    world.driver.script(
        "create_machine", CreateMachineResponse("fakeID-0", "machine-0", last_known_state="s2")
    )
    assert create(world, machine) == Result.after(c.LONG_RETRY)
    stored = world.machines.get("machine-0")
    assert stored["status"]["lastKnownState"] == "s2"
    assert stored["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING


# --- defect 7: node-template sync runs for Pending and Unknown machines -----------------------


@pytest.mark.parametrize("phase", [c.PHASE_PENDING, c.PHASE_UNKNOWN])
def test_node_templates_are_synced_while_a_timeout_is_pending(phase: str) -> None:
    not_ready = [{"type": "Ready", "status": "False"}]
    world, _ = creation_world(phase=phase, node="node-0", provider_id="fakeID-0", conditions=not_ready)
    machine = world.machines.get("machine-0")
    machine["spec"]["nodeTemplate"] = {"metadata": {"labels": {"pool": "blue"}}}
    world.machines.put(machine)
    world.nodes.put(mk_node("node-0", not_ready))
    world.driver.always("get_machine_status", GetMachineStatusResponse("fakeID-0", "node-0"))
    result = MachineReconciler(world.deps).reconcile_machine_key(KEY)
    labels = world.nodes.get("node-0")["metadata"]["labels"]
    assert labels["pool"] == "blue"
    assert labels[c.LABEL_NODE_MACHINE_NAME] == "machine-0"
    assert result.requeue_after is not None and result.requeue_after <= 61


# --- a leader paused past its renew deadline -----------------------------------------------------


def test_a_leader_that_no_longer_surely_holds_the_lease_creates_no_vm_and_writes_nothing() -> None:
    """Found by the chaos suite's leader failover: a leader SIGSTOPped past its renew deadline
    woke and called CreateMachine for Machines its successor had already deleted."""
    world, machine = creation_world()
    held = [False]
    world.deps.calls = DriverCaller(world.clock, world.deps.metrics, 300.0, holds_lease=lambda: held[0])
    before = world.machines.get("machine-0")
    with pytest.raises(LeaseNotHeld):  # to the worker: logged once, the key retried with back-off
        create(world, machine)
    assert world.driver.calls_to("create_machine") == []
    assert world.machines.get("machine-0") == before  # no failure recorded on the Machine
    held[0] = True
    create(world, world.machines.get("machine-0"))
    assert len(world.driver.calls_to("create_machine")) == 1


def test_a_leader_that_no_longer_surely_holds_the_lease_deletes_no_vm() -> None:
    world, machine = deletion_world(c.MARKER_INITIATE_VM_DELETION)
    world.deps.calls = DriverCaller(world.clock, world.deps.metrics, 300.0, holds_lease=lambda: False)
    with pytest.raises(LeaseNotHeld):
        dispatch(machine)(world.deps, machine, inputs())
    assert world.driver.calls_to("delete_machine") == []
    assert "fakeID-0" in world.driver.vms

"""Upstream v0.47.0 ``machine_safety_test.go``, ``##reconcileClusterMachineSafetyAPIServer`` (24
entries), plus regressions for the three upstream freeze bugs mcm fixes (the outage start is never
cleared, a failed unfreeze ends the loop, unfreezing wipes the status), a hanging probe, and what
the frozen flag blocks (``reconcileClusterMachine``).

The 24 entries keep upstream's frozen outcomes; adapted: every entry with both servers up also
asserts that the outage start is cleared (bug 1), and the unfreeze keeps every status field but
phase, ``timeoutActive`` and ``lastUpdateTime`` (bug 6).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any, cast

import pytest

from mcm.apis.machine import constants as c
from mcm.controller.freeze import UNFREEZE_REQUEUE_DELAY, APIServerSafety
from mcm.controller.machine import MachineReconciler
from mcm.runtime.client.errors import ApiError, ConnectionFailed, InternalError, ServiceUnavailable
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.record import EventRecorder
from mcm.runtime.worker import DONE, Result

from .builders import mk_class, mk_machine, mk_secret
from .fakes import NS, FakeResource, World, make_world

MIN = 60.0
T = 30.0
P = 60.0


class Switchable:
    """A REST client whose ``get`` fails while ``down`` (everything else delegated)."""

    def __init__(self, inner: FakeResource) -> None:
        self.inner = inner
        self.down: Exception | None = None
        self.hang: threading.Event | None = None
        self.gets = 0

    def get(self, name: str, **kwargs: Any) -> Any:
        self.gets += 1
        if self.hang is not None:
            self.hang.wait(10)
        if self.down is not None:
            raise self.down
        return self.inner.get(name, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


@dataclasses.dataclass
class Rig:
    world: World
    safety: APIServerSafety
    control: Switchable
    target: Switchable
    state: dict[str, bool]
    events: list[dict[str, Any]]

    def is_frozen(self) -> bool:
        return self.state["frozen"]


def rig(*, frozen: bool = False, machines: list[dict[str, Any]] | None = None) -> Rig:
    world = make_world()
    state = {"frozen": frozen}
    world.deps.frozen = lambda: state["frozen"]
    control, target = Switchable(world.machines), Switchable(world.nodes)
    world.deps.writers = dataclasses.replace(
        world.deps.writers, machines=cast(RESTClient, control), nodes=cast(RESTClient, target)
    )
    events: list[dict[str, Any]] = []

    def submit(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    world.deps.recorder = EventRecorder(submit, "machine-controller", clock=world.clock)
    for machine in machines if machines is not None else [unknown_machine(world)]:
        world.machines.put(machine)
    safety = APIServerSafety(world.deps, lambda value: state.update(frozen=value))
    return Rig(world, safety, control, target, state, events)


def unknown_machine(world: World, name: str = "testmachine1") -> dict[str, Any]:
    return mk_machine(world.clock, name, phase=c.PHASE_UNKNOWN, provider_id="fake-id", node="node-1")


def unreachable() -> ApiError:
    return ServiceUnavailable(
        {"message": "the server is currently unable to handle the request", "code": 503}
    )


INACTIVE = {"Inactive": None, "Started": 5.0, "Elapsed": 5 * MIN}


def _entries() -> list[Any]:
    expected: dict[tuple[bool, bool], Callable[[str, bool], bool]] = {
        (True, True): lambda inactive, pre: False,
        (True, False): lambda inactive, pre: pre or inactive == "Elapsed",
        (False, True): lambda inactive, pre: pre or inactive == "Elapsed",
        (False, False): lambda inactive, pre: pre or inactive == "Elapsed",
    }
    entries = []
    for (control_up, target_up), rule in expected.items():
        for pre in (False, True):
            for inactive in INACTIVE:
                name = (
                    f"control {'up' if control_up else 'down'}, target {'up' if target_up else 'down'}, "
                    f"{inactive}, pre-frozen {pre}"
                )
                entries.append(
                    pytest.param(control_up, target_up, inactive, pre, rule(inactive, pre), id=name)
                )
    return entries


@pytest.mark.parametrize(("control_up", "target_up", "inactive", "pre_frozen", "post_frozen"), _entries())
def test_reconcile_api_server(
    control_up: bool, target_up: bool, inactive: str, pre_frozen: bool, post_frozen: bool
) -> None:
    r = rig(frozen=pre_frozen)
    ago = INACTIVE[inactive]
    if ago is not None:
        r.safety.inactive_since = r.world.clock.now() - dt.timedelta(seconds=ago)
    r.control.down = None if control_up else unreachable()
    r.target.down = None if target_up else unreachable()
    result = r.safety.reconcile("")
    assert r.is_frozen() is post_frozen
    up = control_up and target_up
    if pre_frozen or up:
        assert result == Result.after(P)
    else:
        assert result == Result.after(T / 5)
    if up:
        assert r.safety.inactive_since is None  # bug 1: cleared on every successful probe
    if not control_up:
        assert r.target.gets == 0  # the target is not probed when the control cluster is down


# --- unfreeze (upstream's procedure, the other status fields kept) --------------------------------


def test_unfreeze_resets_unknown_machines_and_keeps_other_status() -> None:
    world_probe = make_world()
    machine = unknown_machine(world_probe)
    machine["status"]["currentStatus"]["timeoutActive"] = True
    machine["status"]["currentStatus"]["preserveExpiryTime"] = "2026-01-05T00:00:00Z"
    machine["status"]["lastKnownState"] = "vm-state"
    machine["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    machine["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"}]
    running = mk_machine(world_probe.clock, "running", phase=c.PHASE_RUNNING, provider_id="x")
    deleting = mk_machine(world_probe.clock, "deleting", phase=c.PHASE_TERMINATING, deleting_ago=1.0)
    r = rig(frozen=True, machines=[machine, running, deleting])
    r.world.clock.step(42)
    assert r.safety.reconcile("") == Result.after(P)
    assert not r.is_frozen()
    stored = r.world.machines.get("testmachine1")["status"]
    now = r.world.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    assert stored["currentStatus"] == {
        "phase": c.PHASE_RUNNING,
        "lastUpdateTime": now,
        "preserveExpiryTime": "2026-01-05T00:00:00Z",
    }
    assert stored["lastOperation"] == {
        "description": "Machine Health Timeout was reset due to APIServer being unreachable",
        "state": "Successful",
        "type": "HealthCheck",
        "lastUpdateTime": now,
    }
    assert stored["lastKnownState"] == "vm-state"
    assert stored["conditions"] == [{"type": "Ready", "status": "False"}]
    assert stored["addresses"] == [{"type": "InternalIP", "address": "10.0.0.1"}]
    assert r.world.machines.get("running")["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING
    assert r.world.machines.writes == [("update_status", "testmachine1")]
    assert sorted(r.world.enqueued) == sorted(
        ("machine", f"{NS}/{n}") for n in ("testmachine1", "running", "deleting")
    )
    unfrozen = [e["involvedObject"]["name"] for e in r.events if e["reason"] == "MachineControllerUnfrozen"]
    assert sorted(unfrozen) == ["running", "testmachine1"]


def test_unfreeze_requeue_delay_is_30s() -> None:
    seen: list[float] = []
    r = rig(frozen=True)
    r.world.deps.enqueue_machine = lambda key, after: seen.append(after)
    r.safety.reconcile("")
    assert seen == [UNFREEZE_REQUEUE_DELAY] == [30.0]


def test_unfreeze_skips_machine_no_longer_unknown_live() -> None:
    """The cache still says Unknown, the API already Running: nothing written."""
    r = rig(frozen=True)
    stale = FakeResource("machines")
    stale.put(r.world.machines.get("testmachine1"))
    live = r.world.machines.get("testmachine1")
    live["status"]["currentStatus"]["phase"] = c.PHASE_RUNNING
    r.world.machines.put(live)
    r.world.deps.listers = dataclasses.replace(r.world.deps.listers, machines=cast(Any, stale))
    r.safety.reconcile("")
    assert not r.is_frozen()
    assert r.world.machines.writes == []


# --- the outage start is cleared by every successful probe ----------------------------------------


def test_bug1_short_outage_does_not_arm_a_later_freeze() -> None:
    r = rig()
    r.control.down = unreachable()
    r.safety.reconcile("")
    r.world.clock.step(6)
    r.safety.reconcile("")  # 6 s of outage: shorter than the timeout
    assert not r.is_frozen()
    r.control.down = None
    r.world.clock.step(6)
    r.safety.reconcile("")
    assert r.safety.inactive_since is None
    r.world.clock.step(3 * 3600)
    r.control.down = unreachable()
    r.safety.reconcile("")  # one failed probe hours later
    assert not r.is_frozen()
    r.world.clock.step(31)
    r.safety.reconcile("")  # continuous outage longer than the timeout
    assert r.is_frozen()


def test_freeze_needs_more_than_the_timeout() -> None:
    r = rig()
    r.control.down = unreachable()
    for _ in range(5):
        r.safety.reconcile("")
        r.world.clock.step(6)
    r.safety.reconcile("")  # exactly 30 s: not more than the timeout
    assert not r.is_frozen()
    r.world.clock.step(0.5)
    r.safety.reconcile("")
    assert r.is_frozen()
    frozen = [e for e in r.events if e["reason"] == "MachineControllerFrozen"]
    assert [e["involvedObject"]["name"] for e in frozen] == ["testmachine1"]
    assert frozen[0]["type"] == "Warning"


# --- unfreezing is retried until it succeeds ------------------------------------------------------


@pytest.mark.parametrize(
    "breakage",
    ["update_status", "get", "list", "connection"],
)
def test_bug2_unfreeze_failures_are_retried_forever(breakage: str) -> None:
    r = rig(frozen=True)
    if breakage == "update_status":
        r.world.machines.fail("update_status", InternalError({"message": "boom", "code": 500}), times=20)
    original_get = r.control.get
    failures = {"left": 20}

    def flaky_get(name: str, **kwargs: Any) -> Any:
        if name != "dummy_name" and failures["left"] > 0:
            failures["left"] -= 1
            if breakage == "get":
                raise InternalError({"message": "boom", "code": 500})
            if breakage == "connection":
                raise ConnectionFailed("connection reset")
        return original_get(name, **kwargs)

    r.control.get = flaky_get  # type: ignore[method-assign]
    lister = r.world.deps.listers.machines

    class FlakyList:
        def list(self) -> Any:
            if breakage == "list" and failures["left"] > 0:
                failures["left"] -= 1
                raise InternalError({"message": "cache", "code": 500})
            return lister.list()

        def get(self, name: str) -> Any:
            return lister.get(name)

    r.world.deps.listers = dataclasses.replace(r.world.deps.listers, machines=cast(Any, FlakyList()))
    for _ in range(20):
        assert r.safety.reconcile("") == Result.after(c.SHORT_RETRY)  # never an exception, never dropped
        assert r.is_frozen()
    assert r.safety.reconcile("") == Result.after(P)
    assert not r.is_frozen()
    assert r.world.machines.get("testmachine1")["status"]["currentStatus"]["phase"] == c.PHASE_RUNNING


# --- probe deadline: a hanging server is down ---------------------------------------------------


def test_hanging_probe_counts_as_down() -> None:
    r = rig()
    r.control.hang = threading.Event()
    done = threading.Event()
    outcome: list[Result] = []

    def run() -> None:
        outcome.append(r.safety.reconcile(""))
        done.set()

    baseline = r.world.clock.waiter_count()  # the permit giver's janitor
    threading.Thread(target=run, daemon=True).start()
    r.world.clock.block_until_waiters(baseline + 1)
    r.world.clock.step(6)  # the probe deadline: max(T / 5, 0.5 s)
    assert done.wait(5)
    r.control.hang.set()
    assert outcome == [Result.after(T / 5)]
    assert r.safety.inactive_since is not None


def test_no_target_cluster_never_freezes() -> None:
    r = rig()
    r.world.deps.listers = dataclasses.replace(r.world.deps.listers, nodes=None)
    r.world.deps.writers = dataclasses.replace(r.world.deps.writers, nodes=None)
    r.control.down = unreachable()
    assert r.safety.reconcile("") == DONE
    assert r.control.gets == 0
    assert not r.is_frozen()


# --- what the frozen flag blocks ------------------------------------------------------------------


def test_frozen_blocks_machine_reconcile_but_not_deletion() -> None:
    world = make_world()
    world.deps.frozen = lambda: True
    world.classes.put(mk_class("class-0"))
    world.secrets.put(mk_secret("secret-0", userData="x"))
    world.machines.put(mk_machine(world.clock, "alive", finalizer=False))
    world.machines.put(
        mk_machine(world.clock, "dying", phase=c.PHASE_RUNNING, provider_id="p", deleting_ago=1.0)
    )
    reconciler = MachineReconciler(world.deps)
    assert reconciler.reconcile_machine_key(f"{NS}/alive") == Result.after(c.LONG_RETRY)
    assert world.machines.writes == []
    assert world.driver.calls == []
    reconciler.reconcile_machine_termination_key(f"{NS}/dying")
    assert world.machines.writes  # the deletion flow went on

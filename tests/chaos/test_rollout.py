"""The manager scenarios' invariants (``md-surge``, ``md-available``, ``md-converges``) on
hand-written histories: each catches what it promises and lets pass what a correct manager does;
the pool's recorder turns store changes into those histories; the owner leaves the pool alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mcm.emulator import ClusterPair
from mcm.testing.chaos.pool import POOL, POOL_LABEL, PoolRecorder
from mcm.testing.chaos.rollout import (
    CONVERGE,
    OVERSHOOT_ALLOWED,
    check_rollout,
    deployment_view,
    fenceposts,
    machine_view,
    settled_problems,
)
from mcm.testing.chaos.tracker import Event, Tracker
from mcm.testing.chaos.world import NAMESPACE, OWNER_LABEL, Owner


class PoolHistory:
    """A pool's events in order; each one second after the last unless ``at`` says when."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.spec: dict[str, Any] = {}

    def add(
        self, source: str, kind: str, key: str, uid: str = "", at: float | None = None, **data: Any
    ) -> PoolHistory:
        t = float(len(self.events)) if at is None else at
        self.events.append(Event(len(self.events), t, source, kind, key, uid, data))
        return self

    def deployment(self, at: float | None = None, **change: Any) -> PoolHistory:
        """A version of the deployment: the last one with ``change``; its status says settled
        (every count = replicas) unless given."""
        self.spec = {
            "replicas": 3,
            "surge": 1,
            "unavailable": 0,
            "template": "a",
            "generation": 1,
            **self.spec,
        }
        self.spec.update(change)
        replicas = self.spec["replicas"]
        view = {
            "deleting": False,
            "observed": self.spec["generation"],
            **{k: replicas for k in ("st_replicas", "updated", "ready", "available")},
            **self.spec,
        }
        self.spec = {
            k: v
            for k, v in self.spec.items()
            if k in ("replicas", "surge", "unavailable", "template", "generation")
        }
        return self.add("pool", "deployment", POOL, "d", at=at, type="MODIFIED", **view)

    def machine(self, name: str, type: str = "MODIFIED", at: float | None = None, **view: Any) -> PoolHistory:
        data = {"phase": "Running", "deleting": False, "template": "a", **view}
        return self.add("pool", "machine", name, f"uid-{name}", at=at, type=type, **data)

    def settled(self, names: tuple[str, ...] = ("m1", "m2", "m3"), template: str = "a") -> PoolHistory:
        self.deployment(template=template)
        for name in names:
            self.machine(name, "ADDED", phase="", template=template)
            self.machine(name, template=template)
        return self


def _only(violations: list[Any], invariant: str) -> list[Any]:
    return [v for v in violations if v.invariant == invariant]


# --- md-surge ---------------------------------------------------------------------------------


def test_surge_allows_replicas_plus_max_surge_and_catches_one_more() -> None:
    history = (
        PoolHistory()
        .settled()
        .deployment(template="b", generation=2)
        .machine("n1", "ADDED", phase="", template="b")
    )
    assert check_rollout(history.events) == []
    history.machine("n2", "ADDED", phase="", template="b")
    [violation] = check_rollout(history.events)
    assert violation.invariant == "md-surge" and violation.key == "n2"
    assert violation.message == "n2 made 5 machines > 3 replicas + 1 maxSurge"


def test_machines_being_deleted_use_up_surge() -> None:
    history = (
        PoolHistory()
        .settled()
        .deployment(template="b", generation=2)
        .machine("m1", deleting=True)
        .machine("n1", "ADDED", phase="", template="b")
        .machine("n2", "ADDED", phase="", template="b")
    )
    [violation] = _only(check_rollout(history.events), "md-surge")
    assert violation.key == "n2" and "5 machines" in violation.message


def test_the_overshoot_allowance_raises_the_bound_while_it_is_on() -> None:
    history = (
        PoolHistory()
        .settled()
        .add("fault", OVERSHOOT_ALLOWED, POOL, extra=2)
        .machine("x1", "ADDED")
        .machine("x2", "ADDED")
        .machine("x3", "ADDED")
    )
    assert check_rollout(history.events) == []  # 6 = 3 + 1 + 2
    history.machine("x4", "ADDED")
    [violation] = check_rollout(history.events)
    assert violation.key == "x4" and "+ 2 allowed" in violation.message
    off = (
        PoolHistory()
        .settled()
        .add("fault", OVERSHOOT_ALLOWED, POOL, extra=2)
        .add("fault", OVERSHOOT_ALLOWED, POOL, extra=0)
    )
    off.machine("x1", "ADDED").machine("x2", "ADDED")
    assert [v.key for v in check_rollout(off.events)] == ["x2"]


def test_after_a_scale_down_the_old_bound_holds_until_the_pool_settles_at_the_new_size() -> None:
    history = PoolHistory().settled().deployment(replicas=1, generation=2)
    history.machine("late", "ADDED", phase="")  # decided before the scale-down: 4 <= 3 + 1
    assert check_rollout(history.events) == []
    for name in ("late", "m1", "m2"):
        history.machine(name, "DELETED")
    assert settled_problems({**deployment_view({"spec": {"replicas": 1}}), "template": "a"}, []) != []
    history.deployment(replicas=1)  # status caught up: settled at 1
    history.machine("y1", "ADDED", phase="").machine("y2", "ADDED", phase="")  # 3 > 1 + 1
    [violation] = check_rollout(history.events)
    assert violation.key == "y2" and "3 machines > 1 replicas + 1 maxSurge" in violation.message


# --- md-available -------------------------------------------------------------------------------


def test_a_roll_out_that_deletes_an_old_machine_before_its_replacement_runs_is_caught_once() -> None:
    good = (
        PoolHistory()
        .settled()
        .deployment(template="b", generation=2)
        .machine("n1", "ADDED", phase="", template="b")
        .machine("n1", phase="Running", template="b")
        .machine("m1", deleting=True)
    )
    assert check_rollout(good.events) == []
    bad = (
        PoolHistory()
        .settled()
        .deployment(template="b", generation=2)
        .machine("n1", "ADDED", phase="", template="b")
        .machine("m1", deleting=True)
        .machine("m2", deleting=True)
    )
    [violation] = check_rollout(bad.events)
    assert violation.invariant == "md-available" and violation.key == "m1"
    assert violation.message == "2 Running < 3 replicas - 0 maxUnavailable during the roll-out to b"


def test_max_unavailable_allows_that_many_fewer_and_a_failed_phase_counts_as_unavailable() -> None:
    history = PoolHistory().deployment(unavailable=1).settled().deployment(template="b", generation=2)
    history.machine("m1", deleting=True)
    assert check_rollout(history.events) == []
    history.machine("m2", phase="Failed")
    assert [v.invariant for v in check_rollout(history.events)] == ["md-available"]


def test_a_scale_up_or_a_pool_still_coming_up_is_not_a_roll_out() -> None:
    scaled = PoolHistory().settled().deployment(replicas=5, generation=2).machine("x", "ADDED", phase="")
    assert check_rollout(scaled.events) == []  # 3 Running < 5
    coming_up = (
        PoolHistory().deployment().machine("m1", "ADDED", phase="").deployment(template="b", generation=2)
    )
    coming_up.machine("m1", deleting=True)
    assert check_rollout(coming_up.events) == []


def test_a_settled_pool_ends_the_roll_out() -> None:
    history = (
        PoolHistory()
        .settled()
        .deployment(template="b", generation=2)
        .machine("m1", template="b")  # as if replaced in place: settled again on b
        .machine("m2", template="b")
        .machine("m3", template="b")
        .machine("m1", deleting=True)  # after the roll-out: a deletion by someone else
    )
    assert check_rollout(history.events) == []


# --- md-converges -------------------------------------------------------------------------------


def test_the_pool_must_settle_within_the_bound_after_the_faults_stop() -> None:
    def history(settles_at: float) -> PoolHistory:
        h = PoolHistory().settled().deployment(template="b", generation=2, at=6.5)
        h.add("check", CONVERGE, POOL, at=10.0, bound=5.0, why="the faults stopped")
        h.machine("m1", template="b", at=11.0)
        h.machine("m2", template="b", at=12.0)
        return h.machine("m3", template="b", at=settles_at)

    assert check_rollout(history(14.0).events) == []
    [violation] = check_rollout(history(16.0).events, "chaos-pool")
    assert violation.invariant == "md-converges" and violation.key == "chaos-pool" and violation.t == 15.0
    assert violation.message == "not settled 5s after the faults stopped: not Running on b: a:Running"


def test_a_pool_settled_when_the_faults_stop_has_converged() -> None:
    history = PoolHistory().settled().add("check", CONVERGE, POOL, bound=1.0)
    assert check_rollout(history.events) == []
    never = PoolHistory().add("check", CONVERGE, POOL, bound=1.0, why="the pool came up")
    [violation] = check_rollout(never.events)
    assert violation.message == "not settled 1s after the pool came up: no MachineDeployment"


def test_settled_means_the_machines_and_the_status_for_the_current_generation() -> None:
    deployment = {
        **deployment_view({"spec": {"replicas": 2}, "metadata": {"generation": 3}}),
        "template": "a",
    }
    running = {"phase": "Running", "deleting": False, "template": "a"}
    status = {"observed": 3, "st_replicas": 2, "updated": 2, "ready": 2, "available": 2}
    assert settled_problems({**deployment, **status}, [running, running]) == []
    assert settled_problems({**deployment, **status, "observed": 2}, [running, running]) != []
    assert settled_problems({**deployment, **status, "updated": 1}, [running, running]) != []
    assert settled_problems({**deployment, **status}, [running, {**running, "deleting": True}]) != []
    assert settled_problems({**deployment, **status}, [running, {**running, "template": "b"}]) != []
    assert settled_problems({**deployment, **status}, [running]) == ["1 machines, want 2"]


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "expected"),
    [
        (4, "50%", "25%", (2, 1)),
        (3, "25%", "25%", (1, 0)),  # up, down
        (5, "30%", "30%", (2, 1)),
        (3, 0, 0, (0, 1)),  # both 0: one may be unavailable
        (3, 1, 0, (1, 0)),
    ],
)
def test_fenceposts_round_as_upstream(
    replicas: int, surge: Any, unavailable: Any, expected: tuple[int, int]
) -> None:
    spec = {
        "replicas": replicas,
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
        },
    }
    assert fenceposts(spec) == expected
    assert fenceposts({"replicas": replicas, "strategy": {"type": "Recreate"}}) == (0, replicas)


# --- the recorder and the owner -----------------------------------------------------------------


def _machine(name: str, labels: dict[str, str], phase: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"class": {"kind": "MachineClass", "name": "a"}},
        **({"status": {"currentStatus": {"phase": phase}}} if phase else {}),
    }


def test_the_recorder_records_the_pools_machines_once_per_change_the_checks_see(tmp_path: Path) -> None:
    with ClusterPair.single(tmp_path) as pair:
        emulator = pair.control
        tracker = Tracker(NAMESPACE)
        recorder = PoolRecorder(tracker, emulator)
        recorder.start()
        emulator.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        emulator.seed([_machine("p1", {POOL_LABEL: POOL}), _machine("other", {OWNER_LABEL: "owner"})])
        _update(
            emulator, "p1", lambda m: m["metadata"]["labels"].update(extra="label")
        )  # nothing the checks see
        _update(
            emulator, "p1", lambda m: m.update(status={"currentStatus": {"phase": "Running"}}), status=True
        )
        _update(
            emulator, "other", lambda m: m.update(status={"currentStatus": {"phase": "Running"}}), status=True
        )
        recorder.stop()
        _update(
            emulator, "p1", lambda m: m.update(status={"currentStatus": {"phase": "Failed"}}), status=True
        )
    pool = [e for e in tracker.events() if e.source == "pool"]
    assert [(e.key, e.data["type"], e.data["phase"]) for e in pool] == [
        ("p1", "ADDED", ""),
        ("p1", "MODIFIED", "Running"),
    ]
    assert machine_view(_machine("p1", {}, phase="Running")) == {
        "phase": "Running",
        "deleting": False,
        "template": "a",
    }


def _update(emulator: Any, name: str, change: Callable[[dict[str, Any]], None], status: bool = False) -> None:
    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        copy = json.loads(json.dumps(current))
        change(copy)
        return copy

    rt = emulator.resource_type("machines.machine.sapcloud.io")
    subresource = "status" if status else ""
    assert emulator.storage.guaranteed_update(rt, NAMESPACE, name, mutate, subresource=subresource).committed


class _Store:
    def __init__(self, machines: list[dict[str, Any]]) -> None:
        self.machines = machines
        self.deleted: list[str] = []
        self.created = 0


def test_the_owner_keeps_its_own_machines_and_leaves_the_pools_alone() -> None:
    pool_failed = _machine("p1", {POOL_LABEL: POOL}, phase="Failed")
    pool_running = _machine("p2", {POOL_LABEL: POOL}, phase="Running")
    mine = _machine("o1", {OWNER_LABEL: "owner"}, phase="Running")
    store = _Store([pool_failed, pool_running, mine])
    tracker = Tracker(NAMESPACE)
    world = SimpleNamespace(
        machines=lambda: store.machines,
        tracker=tracker,
        nodes=lambda: {},
        vms=lambda: [],
    )
    owner = Owner(world, seed=1, replicas=2)  # type: ignore[arg-type]
    owner.delete = lambda name, why: store.deleted.append(name)  # type: ignore[method-assign]
    owner.create = lambda: store.__setattr__("created", store.created + 1) or ""  # type: ignore[method-assign]
    owner.step()
    assert store.deleted == [] and store.created == 1  # p1 is the manager's to replace; o1 + 1 = 2
    problems = dict(owner.pending())
    assert problems["owner"] == "1 live machines, want 2"
    assert "p1" in problems  # every machine must run, the pool's too

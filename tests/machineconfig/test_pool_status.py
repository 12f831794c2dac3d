"""A pool's status from its nodes, without a cluster: each node's phase and availability, the
counts, every condition with its reason and message, the Events a status change announces."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.conditions import condition
from mcm.machineconfig.nodes import (
    DEGRADED,
    NOT_READY,
    OUTDATED,
    UPDATED,
    UPDATING,
    candidate_order,
    is_unavailable,
    node_phase,
    not_schedulable_reason,
)
from mcm.machineconfig.pools import PoolSpecError
from mcm.machineconfig.status import (
    PAUSED_MESSAGE,
    PoolCounts,
    announce_status_change,
    count_nodes,
    pool_status,
    with_degraded,
)
from mcm.runtime.client import Object
from mcm.runtime.clock import FakeClock

T = "rendered-worker-new"
OLD = "rendered-worker-old"
START = dt.datetime(2026, 12, 7, 12, 0, 0, tzinfo=dt.UTC)


def node(
    name: str = "n",
    current: str | None = T,
    desired: str | None = T,
    state: str | None = api.STATE_DONE,
    *,
    ready: str | None = "True",
    unschedulable: bool = False,
    reason: str | None = None,
    conditions: list[Any] | None = None,
    zone: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> Object:
    notes = {
        k: v
        for k, v in (
            (api.CURRENT_CONFIG_ANNOTATION, current),
            (api.DESIRED_CONFIG_ANNOTATION, desired),
            (api.STATE_ANNOTATION, state),
            (api.REASON_ANNOTATION, reason),
        )
        if v is not None
    }
    found = [] if ready is None else [{"type": "Ready", "status": ready}]
    labels = {} if zone is None else {api.ZONE_LABEL: zone}
    return {
        "metadata": {"name": name, "annotations": notes, "labels": labels, "creationTimestamp": created},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"conditions": found + (conditions or [])},
    }


# --- one node -------------------------------------------------------------------------------------

PHASES: list[tuple[str, Object, str, str, bool]] = [
    ("updated", node(), T, UPDATED, False),
    ("updated-without-state", node(state=None), T, UPDATED, False),
    ("degraded-even-if-done", node(state=api.STATE_DEGRADED), T, DEGRADED, True),
    ("degraded-behind", node(current=OLD, state=api.STATE_DEGRADED), T, DEGRADED, True),
    ("updating-desired-differs", node(current=OLD), T, UPDATING, True),
    ("updating-working", node(state=api.STATE_WORKING), T, UPDATING, True),
    ("updating-no-current", node(current=None), T, UPDATING, True),
    ("not-ready", node(ready="False"), T, NOT_READY, True),
    ("not-ready-unknown", node(ready="Unknown"), T, NOT_READY, True),
    ("not-ready-no-condition", node(ready=None), T, NOT_READY, True),
    ("outdated", node(current=OLD, desired=OLD), T, OUTDATED, False),
    ("outdated-no-annotations", node(current=None, desired=None, state=None), T, OUTDATED, False),
    ("outdated-no-target", node(current="", desired=""), "", OUTDATED, False),
    ("updated-but-cordoned", node(unschedulable=True), T, UPDATED, True),
    (
        "updated-disk-pressure",
        node(conditions=[{"type": "DiskPressure", "status": "True"}]),
        T,
        UPDATED,
        True,
    ),
    ("updated-disk-fine", node(conditions=[{"type": "DiskPressure", "status": "False"}]), T, UPDATED, False),
    (
        "updated-network-unknown",
        node(conditions=[{"type": "NetworkUnavailable", "status": "Unknown"}]),
        T,
        UPDATED,
        True,
    ),
    ("outdated-cordoned", node(current=OLD, desired=OLD, unschedulable=True), T, OUTDATED, True),
]


@pytest.mark.parametrize(
    ("obj", "target", "phase", "unavailable"), [p[1:] for p in PHASES], ids=[p[0] for p in PHASES]
)
def test_a_node_has_one_phase_and_is_unavailable_when_it_cannot_take_work(
    obj: Object, target: str, phase: str, unavailable: bool
) -> None:
    assert node_phase(obj, target) == phase
    assert is_unavailable(obj, phase) is unavailable


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (node(), ""),
        (node(ready="False"), "node n is reporting NotReady=False"),
        (node(ready=None), "node n is reporting NotReady=Unknown"),
        ({"metadata": {"name": "n"}, "status": {"conditions": "x"}}, "node n is reporting NotReady=Unknown"),
        (node(conditions=[{"type": "DiskPressure", "status": "True"}]), "node n is reporting OutOfDisk=True"),
        (
            node(conditions=[{"type": "NetworkUnavailable", "status": "True"}]),
            "node n is reporting NetworkUnavailable=True",
        ),
        (node(unschedulable=True), "node n is reporting Unschedulable"),
        (node(ready="False", unschedulable=True), "node n is reporting NotReady=False"),
    ],
)
def test_why_a_node_cannot_take_workloads(obj: Object, reason: str) -> None:
    assert not_schedulable_reason(obj) == reason


def test_candidates_are_ordered_by_zone_then_age_then_name() -> None:
    nodes = [
        node("d"),
        node("c", zone="b", created="2026-01-01T00:00:00Z"),
        node("b", zone="a", created="2026-01-02T00:00:00Z"),
        node("a", zone="a", created="2026-01-02T00:00:00Z"),
        node("e", zone="a", created="2026-01-01T00:00:00Z"),
        node("f", zone="", created="2026-01-03T00:00:00Z"),
    ]
    assert [api.name_of(n) for n in sorted(nodes, key=candidate_order)] == ["f", "e", "a", "b", "c", "d"]


# --- counts -----------------------------------------------------------------------------------------


def test_counts_by_phase_and_availability() -> None:
    nodes = [
        node("a"),
        node("b", unschedulable=True),
        node("c", current=OLD),
        node("d", state=api.STATE_DEGRADED, reason="cannot write /etc/x"),
        node("e", current=OLD, state=api.STATE_DEGRADED),
        node("f", ready="False"),
        node("g", current=OLD, desired=OLD),
    ]
    counts = count_nodes(nodes, T, contested=["node z: pools a, b"])
    assert counts == PoolCounts(
        total=7,
        updated=2,
        ready=6,
        unavailable=5,
        updating=1,
        degraded=2,
        degraded_reasons=("Node d is reporting: 'cannot write /etc/x'", "Node e is reporting: ''"),
        contested=("node z: pools a, b",),
    )
    assert not counts.all_updated
    assert counts.as_metrics() == {
        "total": 7,
        "updated": 2,
        "ready": 6,
        "unavailable": 5,
        "updating": 1,
        "degraded": 2,
    }


def test_known_phases_are_taken_as_given() -> None:
    nodes = [node("a"), node("b", current=OLD)]
    counts = count_nodes(nodes, T, known={"b": UPDATED, "a": DEGRADED})
    assert (counts.updated, counts.degraded, counts.updating, counts.unavailable) == (1, 1, 0, 1)
    assert counts.degraded_reasons == ("Node a is reporting: ''",)


@pytest.mark.parametrize(
    ("counts", "done"),
    [
        (PoolCounts(), True),
        (PoolCounts(total=2, updated=2), True),
        (PoolCounts(total=2, updated=1), False),
        (PoolCounts(total=2, updated=2, unavailable=1), False),
    ],
)
def test_all_updated_means_every_node_updated_and_none_unavailable(counts: PoolCounts, done: bool) -> None:
    assert counts.all_updated is done


# --- the status ------------------------------------------------------------------------------------


def pool(paused: Any = None, generation: int | None = 3, status: dict[str, Any] | None = None) -> Object:
    spec: dict[str, Any] = {}
    if paused is not None:
        spec["paused"] = paused
    meta: dict[str, Any] = {"name": "worker"}
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "spec": spec, "status": status or {}}


def conditions_of(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


DONE_COUNTS = PoolCounts(total=2, updated=2, ready=2)
BEHIND = PoolCounts(total=2, updated=1, ready=2, unavailable=1, updating=1)
SELECTING_ALL = PoolSpecError(api.Reason.SELECTING_ALL, "This machinepool is selecting all nodes.")
BAD_SELECTOR = PoolSpecError(api.Reason.INVALID_SELECTOR, "bad selector")
BAD_MAX = PoolSpecError(api.Reason.INVALID_MAX_UNAVAILABLE, "maxUnavailable is bad")

TWO_DEGRADED = (
    "2 nodes are reporting degraded status on sync: Node a is reporting: 'x', Node b is reporting: 'y'"
)

STATUS_CASES: list[
    tuple[str, Object, PoolCounts, str, PoolSpecError | None, dict[str, tuple[str, str, str]]]
] = [
    (
        "all-updated",
        pool(),
        DONE_COUNTS,
        T,
        None,
        {
            api.POOL_UPDATED: ("True", "", f"All nodes are updated with MachineConfig {T}"),
            api.POOL_UPDATING: ("False", "", ""),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "updating",
        pool(),
        BEHIND,
        T,
        None,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: ("True", "", f"All nodes are updating to MachineConfig {T}"),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "paused-behind",
        pool(paused=True),
        BEHIND,
        T,
        None,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: (
                "False",
                api.Reason.PAUSED,
                f"Pool is paused; will not update to MachineConfig {T}",
            ),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "paused-done",
        pool(paused=True),
        DONE_COUNTS,
        T,
        None,
        {
            api.POOL_UPDATED: ("True", "", f"All nodes are updated with MachineConfig {T}"),
            api.POOL_UPDATING: ("False", api.Reason.PAUSED, PAUSED_MESSAGE),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "paused-without-target",
        pool(paused=True),
        BEHIND,
        "",
        None,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: ("False", api.Reason.PAUSED, PAUSED_MESSAGE),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "paused-as-a-string-is-not-paused",
        pool(paused="true"),
        BEHIND,
        T,
        None,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: ("True", "", f"All nodes are updating to MachineConfig {T}"),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "no-target",
        pool(),
        DONE_COUNTS,
        "",
        None,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: (
                "False",
                "NoRenderedConfig",
                "waiting for the RenderController to render a configuration",
            ),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("False", "", ""),
        },
    ),
    (
        "selecting-all",
        pool(paused=True),
        DONE_COUNTS,
        T,
        SELECTING_ALL,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: ("False", api.Reason.SELECTING_ALL, str(SELECTING_ALL)),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("True", api.Reason.SELECTING_ALL, str(SELECTING_ALL)),
        },
    ),
    (
        "invalid-selector",
        pool(),
        DONE_COUNTS,
        T,
        BAD_SELECTOR,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: ("False", api.Reason.INVALID_SELECTOR, "bad selector"),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("True", api.Reason.INVALID_SELECTOR, "bad selector"),
        },
    ),
    (
        "bad-max-unavailable-nodes-still-known",
        pool(),
        DONE_COUNTS,
        T,
        BAD_MAX,
        {
            api.POOL_UPDATED: ("True", "", f"All nodes are updated with MachineConfig {T}"),
            api.POOL_UPDATING: ("False", api.Reason.INVALID_MAX_UNAVAILABLE, "maxUnavailable is bad"),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("False", "", ""),
            api.POOL_DEGRADED: ("True", api.Reason.INVALID_MAX_UNAVAILABLE, "maxUnavailable is bad"),
        },
    ),
    (
        "degraded-and-contested",
        pool(),
        PoolCounts(
            total=3,
            updated=1,
            degraded=2,
            unavailable=2,
            degraded_reasons=("Node a is reporting: 'x'", "Node b is reporting: 'y'"),
            contested=("node c: pools a, b", "node d: pools a, c"),
        ),
        T,
        None,
        {
            api.POOL_UPDATED: ("False", "", ""),
            api.POOL_UPDATING: ("True", "", f"All nodes are updating to MachineConfig {T}"),
            api.POOL_NODE_DEGRADED: (
                "True",
                api.Reason.NODE_DEGRADED,
                TWO_DEGRADED,
            ),
            api.POOL_NODES_CONFLICT: (
                "True",
                api.Reason.NODE_IN_MULTIPLE_POOLS,
                "node c: pools a, b; node d: pools a, c",
            ),
            api.POOL_DEGRADED: (
                "True",
                api.Reason.NODE_DEGRADED,
                TWO_DEGRADED,
            ),
        },
    ),
    (
        "contested-only",
        pool(),
        PoolCounts(total=1, updated=1, contested=("node c: pools a, b",)),
        T,
        None,
        {
            api.POOL_UPDATED: ("True", "", f"All nodes are updated with MachineConfig {T}"),
            api.POOL_UPDATING: ("False", "", ""),
            api.POOL_NODE_DEGRADED: ("False", "", ""),
            api.POOL_NODES_CONFLICT: ("True", api.Reason.NODE_IN_MULTIPLE_POOLS, "node c: pools a, b"),
            api.POOL_DEGRADED: ("True", api.Reason.NODE_IN_MULTIPLE_POOLS, "node c: pools a, b"),
        },
    ),
]


@pytest.mark.parametrize(
    ("obj", "counts", "target", "problem", "expected"),
    [c[1:] for c in STATUS_CASES],
    ids=[c[0] for c in STATUS_CASES],
)
def test_the_pool_status_conditions(
    obj: Object,
    counts: PoolCounts,
    target: str,
    problem: PoolSpecError | None,
    expected: dict[str, tuple[str, str, str]],
) -> None:
    status = pool_status(obj, counts, target, problem, FakeClock(START))
    assert conditions_of(status) == expected
    assert status["machineCount"] == counts.total
    assert status["updatingMachines"] == counts.updated
    assert status["readyMachines"] == counts.ready
    assert status["unavailableMachines"] == counts.unavailable
    assert status["degradedMachineCount"] == counts.degraded
    assert status["currentMachineConfig"] == target
    if expected[api.POOL_UPDATED][0] == "True":
        assert status["configuration"] == {"name": target}
    else:
        assert "configuration" not in status


def test_the_status_keeps_what_it_does_not_compute_and_the_last_completed_configuration() -> None:
    old_status = {
        "configuration": {"name": OLD},
        "extra": {"kept": True},
        "conditions": [
            {
                "type": "RenderDegraded",
                "status": "True",
                "reason": "RenderFailed",
                "message": "bad config",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {
                "type": api.POOL_UPDATED,
                "status": "True",
                "reason": "",
                "message": "old",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
        ],
    }
    obj = pool(status=old_status, generation=None)
    status = pool_status(obj, BEHIND, T, None, FakeClock(START))
    assert status["configuration"] == {"name": OLD}, "what the nodes last completed, until the new one"
    assert status["extra"] == {"kept": True}
    assert status["observedGeneration"] == 0
    assert conditions_of(status)[api.POOL_DEGRADED] == ("True", "RenderFailed", "bad config")
    assert conditions_of(status)["RenderDegraded"] == ("True", "RenderFailed", "bad config")
    updated = condition(status["conditions"], api.POOL_UPDATED)
    assert updated is not None and updated["lastTransitionTime"] == "2026-12-07T12:00:00Z"
    render = condition(status["conditions"], "RenderDegraded")
    assert render is not None and render["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert obj["status"] == old_status and len(old_status["conditions"]) == 2, "the pool is not changed"
    assert pool_status(pool(generation=7), DONE_COUNTS, T, None, FakeClock(START))["observedGeneration"] == 7


def test_degraded_takes_the_first_true_of_render_node_and_conflict() -> None:
    clock = FakeClock(START)

    def cond(kind: str, status: str, reason: Any = "R", message: Any = "M") -> dict[str, Any]:
        return {"type": kind, "status": status, "reason": reason, "message": message}

    both = [
        cond(api.POOL_NODE_DEGRADED, "True", "N", "node"),
        cond(api.POOL_RENDER_DEGRADED, "True", "R", "render"),
    ]
    assert conditions_of({"conditions": with_degraded(both, None, clock)})[api.POOL_DEGRADED] == (
        "True",
        "R",
        "render",
    )
    later = [cond(api.POOL_RENDER_DEGRADED, "False"), cond(api.POOL_NODES_CONFLICT, "True", "C", "conflict")]
    assert conditions_of({"conditions": with_degraded(later, None, clock)})[api.POOL_DEGRADED] == (
        "True",
        "C",
        "conflict",
    )
    empty = [cond(api.POOL_NODE_DEGRADED, "True", None, None)]
    assert conditions_of({"conditions": with_degraded(empty, None, clock)})[api.POOL_DEGRADED] == (
        "True",
        "",
        "",
    )
    none = [cond(api.POOL_NODE_DEGRADED, "Unknown")]
    assert conditions_of({"conditions": with_degraded(none, None, clock)})[api.POOL_DEGRADED] == (
        "False",
        "",
        "",
    )
    assert conditions_of({"conditions": with_degraded(both, BAD_MAX, clock)})[api.POOL_DEGRADED] == (
        "True",
        api.Reason.INVALID_MAX_UNAVAILABLE,
        "maxUnavailable is bad",
    )


# --- Events -----------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        self.events.append((event_type, reason, message))


def status_with(target: str, updated: str, updating: tuple[str, str] = ("", "")) -> dict[str, Any]:
    return {
        "currentMachineConfig": target,
        "conditions": [
            {"type": api.POOL_UPDATED, "status": updated},
            {"type": api.POOL_UPDATING, "status": "False", "reason": updating[0], "message": updating[1]},
        ],
    }


COMPLETED = ("Normal", api.Reason.COMPLETED, f"Pool worker has completed update to MachineConfig {T}")


@pytest.mark.parametrize(
    ("old", "new", "problem", "events"),
    [
        (status_with(T, "False"), status_with(T, "True"), None, [COMPLETED]),
        ({}, status_with(T, "True"), None, [COMPLETED]),
        (status_with(OLD, "True"), status_with(T, "True"), None, [COMPLETED]),
        (status_with(T, "True"), status_with(T, "True"), None, []),
        (status_with(T, "True"), status_with(T, "False"), None, []),
        (status_with(T, "False"), status_with(T, "False"), None, []),
        (
            status_with(T, "False"),
            status_with(T, "False", (api.Reason.PAUSED, "paused!")),
            None,
            [("Normal", api.Reason.PAUSED, "paused!")],
        ),
        (
            status_with(T, "False", (api.Reason.PAUSED, "paused!")),
            status_with(T, "False", (api.Reason.PAUSED, "paused!")),
            None,
            [],
        ),
        (
            status_with(T, "False", (api.Reason.PAUSED, "paused!")),
            status_with(T, "False", (api.Reason.PAUSED, "paused again")),
            None,
            [("Normal", api.Reason.PAUSED, "paused again")],
        ),
        (
            status_with(T, "False"),
            status_with(T, "False", (api.Reason.INVALID_MAX_UNAVAILABLE, "maxUnavailable is bad")),
            BAD_MAX,
            [("Warning", api.Reason.INVALID_MAX_UNAVAILABLE, "maxUnavailable is bad")],
        ),
        (
            status_with(T, "False"),
            status_with(T, "False", (api.Reason.PAUSED, "paused!")),
            BAD_MAX,
            [("Normal", api.Reason.PAUSED, "paused!")],
        ),
        (
            status_with(T, "False"),
            status_with(T, "False", ("NoRenderedConfig", "waiting")),
            None,
            [],
        ),
        (
            status_with(T, "False"),
            status_with(T, "True", (api.Reason.PAUSED, "paused!")),
            None,
            [COMPLETED, ("Normal", api.Reason.PAUSED, "paused!")],
        ),
    ],
    ids=[
        "completed",
        "completed-first-status",
        "completed-new-target",
        "still-completed",
        "no-longer-updated",
        "nothing",
        "paused",
        "still-paused",
        "paused-message-changed",
        "spec-problem",
        "paused-not-the-problem",
        "other-reason",
        "completed-and-paused",
    ],
)
def test_a_status_change_announces_completion_pauses_and_spec_problems(
    old: dict[str, Any],
    new: dict[str, Any],
    problem: PoolSpecError | None,
    events: list[tuple[str, str, str]],
) -> None:
    recorder = Recorder()
    announce_status_change(recorder, pool(), old, new, problem)  # type: ignore[arg-type]
    assert recorder.events == events

"""Pod selection (upstream's ``getPodsForDeletion``), events, the pending-pod re-check (upstream
v0.59.0, #979) and VolumeAttachment cleanup."""

from __future__ import annotations

import threading
from typing import Any, cast

from mcm.drain import (
    REASON_DRAIN_BLOCKED,
    REASON_DRAIN_FAILED,
    REASON_DRAIN_STARTED,
    REASON_DRAIN_SUCCEEDED,
    DrainOptions,
    DrainResult,
    run_drain,
)
from mcm.drain.pods import blocking_pdb, select_pods
from mcm.driver import FakeDriver
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj
from mcm.runtime.record import EventRecorder
from tests.drain.fakes import ClockDriver, FakeCluster, lister, listers, server_error, too_many_requests
from tests.drain.scenario import NODE, Scenario, build, pod


def names(pods: list[Any]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_selection_skips_mirror_and_daemonset_pods_and_warns() -> None:
    mirror = pod("mirror")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    local = pod("local")
    local["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    finished = pod("finished", owner_kind=None)
    finished["status"]["phase"] = "Succeeded"
    terminating = pod("terminating")
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    pods = [
        pod("plain"),
        mirror,
        pod("ds", owner_kind="DaemonSet"),
        local,
        pod("bare", owner_kind=None),
        finished,
        terminating,
        pod("elsewhere", node="other"),
    ]
    selection = select_pods(pods, NODE, DrainOptions())
    assert names(selection.pods) == ["plain", "local", "bare", "finished", "terminating"]
    assert sorted(selection.skipped) == ["default/ds", "default/mirror"]
    assert selection.error() is None
    assert selection.warning_lines() == [
        "Deleting pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet: bare",
        "Deleting pods with local storage: local",
        "Ignoring DaemonSet-managed pods: ds",
    ]


def test_selection_fails_with_upstream_texts_when_options_forbid() -> None:
    local = pod("local")
    local["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    pods = [local, pod("bare", owner_kind=None), pod("ds", owner_kind="DaemonSet")]
    strict = DrainOptions(
        delete_local_data=False, ignore_pods_without_controllers=False, ignore_daemonsets=False
    )
    selection = select_pods(pods, NODE, strict)
    assert selection.error() == (
        "DaemonSet-managed pods (use --ignore-daemonsets to ignore): ds; "
        "pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet "
        "(use --force to override): bare; "
        "pods with local storage (use --delete-local-data to override): local"
    )


def test_malformed_pods_are_ignored() -> None:
    selection = select_pods([{"metadata": None}, "junk", {"spec": {}}], NODE, DrainOptions())  # type: ignore[list-item]
    assert selection.pods == []


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        self.events.append((event_type, reason, message))


def drain(s: Scenario, recorder: Recorder | None = None, **options: Any) -> Any:
    base: dict[str, Any] = {"timeout": 60, "max_evict_retries": 2, "pv_reattach_timeout": 0.001}
    base.update(options)
    with ClockDriver(s.clock, lambda: sum(s.cluster.calls.values())):
        return run_drain(
            s.cluster.as_client(),
            s.listers(pdbs=[pdb_for("db")]),
            FakeDriver(),
            NODE,
            DrainOptions(**base),
            clock=s.clock,
            stop=threading.Event(),
            recorder=cast(EventRecorder, recorder),
            machine_ref={"kind": "Machine", "metadata": {"name": "m"}},
        )


def pdb_for(app: str) -> Obj:
    return {
        "metadata": {"name": f"pdb-{app}", "namespace": "default", "generation": 1},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": [app]}]}},
        "status": {"observedGeneration": 1, "expectedPods": 2, "currentHealthy": 1, "disruptionsAllowed": 0},
    }


def test_events_for_start_blocked_pdb_and_outcome() -> None:
    s = Scenario(FakeCluster(), FakeClock())
    s.add(pod("db-0", labels={"app": "db"}))
    s.add(pod("db-1", labels={"app": "db"}))
    s.cluster.nodes[NODE] = {"metadata": {"name": NODE}}
    refusals = {"db-0": 1, "db-1": 1}

    def refuse_once(victim: Obj) -> None:
        name = victim["metadata"]["name"]
        if refusals[name]:
            refusals[name] -= 1
            raise too_many_requests()

    s.cluster.evict_reactor = refuse_once
    s.cluster.handlers.append(s.delete_pod)
    recorder = Recorder()
    result = drain(s, recorder)
    assert result.ok, result
    reasons = [reason for _, reason, _ in recorder.events]
    assert reasons == [REASON_DRAIN_STARTED, REASON_DRAIN_BLOCKED, REASON_DRAIN_SUCCEEDED]
    assert "PodDisruptionBudget default/pdb-db" in recorder.events[1][2]

    failing = Scenario(FakeCluster(), FakeClock())
    failing.add(pod("x"))
    failing.cluster.nodes[NODE] = {"metadata": {"name": NODE}}

    def broken(_victim: Obj) -> None:
        raise server_error("nope")

    failing.cluster.evict_reactor = broken
    recorder = Recorder()
    result = drain(failing, recorder)
    assert result.error == 'error when evicting pod "x": nope scheduled on node old-node'
    assert recorder.events[-1][:2] == ("Warning", REASON_DRAIN_FAILED)


def test_pending_pv_pod_removed_by_someone_else_counts_as_gone() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)

    def fail_and_vanish(victim: Obj) -> None:
        s.cluster.pods.pop("default/" + victim["metadata"]["name"], None)  # lock is held by the fake
        raise server_error("transient")

    s.cluster.evict_reactor = fail_and_vanish
    result = drain(s)
    assert result.ok, result
    assert result.gone == ("default/expv-0",)
    assert s.cluster.count("pods.evict.attempt") == 1


def test_empty_node_drains_without_api_calls() -> None:
    cluster = FakeCluster()
    result = run_drain(
        cluster.as_client(),
        listers(),
        FakeDriver(),
        NODE,
        DrainOptions(),
        clock=FakeClock(),
        stop=threading.Event(),
    )
    assert result.ok and result.evicted == () and sum(cluster.calls.values()) == 0


def test_the_drainer_cordons_and_drains_with_the_options_it_is_given() -> None:
    from mcm.drain import Drainer

    s = build(FakeCluster(), FakeClock(), nopv=2)
    s.cluster.handlers.append(s.delete_pod)
    drainer = Drainer(s.cluster.as_client(), s.listers(), FakeDriver(), clock=s.clock, stop=threading.Event())
    options = DrainOptions(timeout=60, max_evict_retries=3, pv_detach_timeout=5, pv_reattach_timeout=5)
    drainer.cordon(NODE)
    assert s.cluster.nodes[NODE]["spec"]["unschedulable"] is True
    assert drainer.drain(NODE, options, machine_ref={"metadata": {"name": "m"}}).ok
    assert s.left() == {}

    failing = build(FakeCluster(), FakeClock(), nopv=1)

    def broken(_victim: Obj) -> None:
        raise server_error("nope")

    failing.cluster.evict_reactor = broken
    drainer = Drainer(failing.cluster.as_client(), failing.listers(), FakeDriver(), clock=failing.clock,
                      stop=threading.Event())  # fmt: skip
    result = drainer.drain(NODE, options)
    assert result.error == 'error when evicting pod "nopv-0": nope scheduled on node old-node'
    assert result.left_behind[0].key == "default/nopv-0"


def _pdb(name: str, selector: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}


def test_blocking_pdb_uses_policy_v1_selector_semantics() -> None:
    """policy/v1: a nil selector selects nothing, ``{}`` every pod; expressions as labels.Selector."""
    target = pod("web-0", labels={"app": "web", "tier": "front"})
    cases: list[tuple[Any, bool]] = [
        (None, False),
        ({}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Bogus", "values": ["x"]}]}, False),
    ]
    for selector, selected in cases:
        pdbs = lister([_pdb("budget", selector)], "poddisruptionbudget", namespaced=True, group="policy")
        assert (blocking_pdb(target, pdbs) is not None) is selected, selector


def test_a_single_refused_eviction_records_one_blocked_event() -> None:
    s = Scenario(FakeCluster(), FakeClock())
    s.add(pod("db-0", labels={"app": "db"}))
    s.cluster.nodes[NODE] = {"metadata": {"name": NODE}}
    refused: list[str] = []

    def refuse_once(victim: Obj) -> None:
        if not refused:
            refused.append(victim["metadata"]["name"])
            raise too_many_requests()

    s.cluster.evict_reactor = refuse_once
    s.cluster.handlers.append(s.delete_pod)
    recorder = Recorder()
    assert drain(s, recorder).ok
    assert [reason for _, reason, _ in recorder.events] == [
        REASON_DRAIN_STARTED,
        REASON_DRAIN_BLOCKED,
        REASON_DRAIN_SUCCEEDED,
    ]


def test_a_drain_result_given_only_its_node_and_duration_describes_a_clean_drain() -> None:
    """Drainers other than mcm's (a provider's, a test stub) build results with only what went
    wrong: whatever they leave out did not happen (no timeout, Node still there, not forced)."""
    result = DrainResult(node=NODE, duration=1.0)
    assert result.ok and result.pending_pods == ""
    assert (result.timed_out, result.node_gone, result.forced) == (False, False, False)
    assert (result.evicted, result.deleted, result.gone, result.left_behind, result.skipped) == ((),) * 5

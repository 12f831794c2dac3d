"""Outcomes of the PV path and the termination wait that the mutation run (issue 23) found
unchecked: each test states what a user of the drain sees."""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from typing import cast

import pytest

from mcm.drain import DrainListers, DrainResult, PodDeletions, cordon_node, run_drain
from mcm.drain.state import DETACH_TIMEOUT_TEXT, LEFT_DEADLINE, LEFT_NODE_GONE, TERMINATION_BUFFER
from mcm.driver import FakeDriver
from mcm.runtime.cache import Lister
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import Conflict
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj
from tests.clocks import SelfSteppingClock
from tests.drain.fakes import ClockDriver, FakeCluster, listers, server_error, too_many_requests
from tests.drain.scenario import NODE, Scenario, build, pod
from tests.drain.test_regressions import drain_in_thread, misconfigured_pdb, options, run


class _BrokenClaims:
    """A PVC lister whose cache is broken: any lookup raises an unexpected error."""

    def namespaced(self, _namespace: str) -> _BrokenClaims:
        return self

    def get(self, _name: str) -> Obj:
        raise RuntimeError("pvc cache broken")


def test_an_unexpected_error_of_the_pv_path_leaves_its_pods_behind() -> None:
    s = build(FakeCluster(), FakeClock(), nopv=1, expv=2)
    s.cluster.handlers.append(s.delete_pod)
    with_broken_claims = dataclasses.replace(s.listers(), pvcs=cast(Lister, _BrokenClaims()))
    result, _ = _run_with(s, with_broken_claims)
    assert not result.ok
    assert result.evicted == ("default/nopv-0",)  # the pods without PVs are drained as usual
    assert sorted((p.key, p.reason) for p in result.left_behind) == [
        ("default/expv-0", "pvc cache broken"),
        ("default/expv-1", "pvc cache broken"),
    ]
    assert "error draining pod default/expv-0: pvc cache broken" in (result.error or "")


def _run_with(s: Scenario, drain_listers: DrainListers) -> tuple[DrainResult, float]:
    with ClockDriver(s.clock, lambda: sum(s.cluster.calls.values())) as clock_driver:
        result = run_drain(
            s.cluster.as_client(),
            drain_listers,
            FakeDriver(),
            NODE,
            options(),
            clock=s.clock,
            stop=threading.Event(),
        )
    return result, clock_driver.elapsed


def test_a_node_gone_while_volumes_detach_ends_the_drain_without_counting_the_pod_drained() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)

    def pod_and_node_go(victim: Obj) -> None:
        s.delete_pod(victim)
        with s.cluster.lock:
            s.cluster.nodes.pop(NODE, None)

    s.cluster.handlers.append(pod_and_node_go)
    result, elapsed = run(s, options(pv_detach_timeout=600, timeout=3600))
    assert result.node_gone
    assert [(p.key, p.reason) for p in result.left_behind] == [("default/expv-0", LEFT_NODE_GONE)]
    assert result.evicted == ()
    assert elapsed < 60


def test_a_pv_pod_behind_a_misconfigured_pdb_is_left_behind_with_its_error() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    pdb = misconfigured_pdb()
    pdb["spec"]["selector"] = {"matchLabels": {"volumes": "only-exclusive"}}

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    s.cluster.evict_reactor = refuse
    result, _ = run(s, options(), pdbs=[pdb])
    assert not result.ok
    assert [(p.key, p.reason) for p in result.left_behind] == [
        ("default/expv-0", "misconfigured PodDisruptionBudget")
    ]
    assert result.error == (
        'error while evicting pod "expv-0": pod disruption budget default/pdb is misconfigured '
        "and requires zero voluntary evictions"
    )
    assert s.cluster.count("pods.evict.attempt") == 1
    assert s.cluster.count("pods.delete.attempt") == 0


def test_the_detach_wait_adds_the_pods_grace_period_to_the_detach_timeout() -> None:
    """A pod with a 60 s grace period may hold its volume for 60 s: the detach wait is 60 + 30 s."""
    s = build(FakeCluster(), FakeClock(), expv=1, tgp=60)
    s.cluster.handlers.append(s.delete_pod)
    s.cluster.handlers.append(s.sleep_then(45, "detach"))
    result, elapsed = run(s, options(pv_detach_timeout=30, timeout=600))
    assert result.ok, result
    assert result.evicted == ("default/expv-0",)
    assert 45 <= elapsed < 60


def test_the_detach_wait_ends_at_the_detach_timeout_after_the_grace_period() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1, tgp=10)
    s.cluster.handlers.append(s.delete_pod)  # the volume never detaches
    result, elapsed = run(s, options(pv_detach_timeout=30, timeout=600))
    assert [(p.key, p.reason) for p in result.left_behind] == [("default/expv-0", DETACH_TIMEOUT_TEXT)]
    assert 40 <= elapsed < 41


def test_a_pod_with_a_zero_grace_period_is_waited_for_the_termination_buffer_only() -> None:
    s = build(FakeCluster(), FakeClock(), nopv=1, tgp=0)  # evicted, never terminates
    result, elapsed = run(s, options(timeout=3600))
    assert [p.key for p in result.left_behind] == ["default/nopv-0"]
    assert TERMINATION_BUFFER <= elapsed < TERMINATION_BUFFER + 1


def _parked(clock: FakeClock) -> set[int]:
    """The waits parked on the fake clock (a woken wait leaves the set, a new one joins it)."""
    with clock._lock:
        return {id(entry) for _, _, entry in clock._heap if entry._state == "armed"}


def test_a_pod_the_informer_still_has_is_not_counted_gone_when_another_goes() -> None:
    """Woken by the informer's delete event of one pod, the drain settles only that pod."""
    clock = FakeClock()
    cluster = FakeCluster()
    pods = [pod(f"bare-{i}", tgp=2, owner_kind=None) for i in range(2)]
    for p in pods:
        cluster.add_pod(p)
    cluster.nodes[NODE] = {"metadata": {"name": NODE}, "spec": {}, "status": {}}
    deletions = PodDeletions()
    drain_listers = dataclasses.replace(listers(pods), pod_deletions=deletions)
    drain, results = drain_in_thread(cluster, drain_listers, clock, options(timeout=3))
    clock.block_until_waiters(1)
    clock.step(2)
    cluster.remove_pod(pods[0])  # only the first pod leaves
    drain_listers.pods.indexer.delete(pods[0])
    parked = _parked(clock)
    deletions.on_delete(pods[0])
    while drain.is_alive() and parked & _parked(clock):  # until the delete event has woken the drain
        time.sleep(0.001)
    if drain.is_alive():
        clock.block_until_waiters(1)  # it settled the pod the informer saw go, and waits again
        clock.step(1)  # the drain deadline
    drain.join(10)
    assert not drain.is_alive()
    result = results[0]
    assert result.evicted == ("default/bare-0",)
    assert [(p.key, p.reason) for p in result.left_behind] == [("default/bare-1", LEFT_DEADLINE)]


class _ConflictingNodes:
    """A Node whose updates conflict ``conflicts`` times before one is accepted."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.updates = 0
        self.node: Obj = {"metadata": {"name": NODE, "resourceVersion": "1"}, "spec": {}}

    def resource(self, _resource: object) -> _ConflictingNodes:
        return self

    def get(self, _name: str) -> Obj:
        return copy.deepcopy(self.node)

    def update(self, body: Obj) -> Obj:
        self.updates += 1
        if self.updates <= self.conflicts:
            raise Conflict({"message": "the object has been modified", "code": 409})
        self.node = copy.deepcopy(body)
        return body


@pytest.mark.parametrize(("conflicts", "cordoned"), [(0, True), (4, True), (5, False)])
def test_cordon_retries_conflicts_as_client_go_default_retry(conflicts: int, cordoned: bool) -> None:
    """Five tries about 10 ms apart (``retry.DefaultRetry``), slept on the injected clock."""
    nodes, clock = _ConflictingNodes(conflicts), SelfSteppingClock()
    if cordoned:
        cordon_node(cast(ClusterClient, nodes), NODE, clock=clock)
        assert nodes.node["spec"]["unschedulable"] is True
    else:
        with pytest.raises(Conflict):
            cordon_node(cast(ClusterClient, nodes), NODE, clock=clock)
    assert nodes.updates == min(conflicts + 1, 5)
    assert len(clock.slept) == min(conflicts, 4)
    assert all(0.010 <= slept < 0.011 for slept in clock.slept)


def test_a_node_that_reports_no_status_has_no_volumes_attached() -> None:
    """A Node whose status is empty (omitted) while a pod's volumes detach is read as having no
    volume attached: the pod counts as drained, the drain does not fail on it."""
    s = build(FakeCluster(), FakeClock(), expv=1)

    def pod_goes_and_status_is_emptied(victim: Obj) -> None:
        s.delete_pod(victim)
        with s.cluster.lock:
            s.cluster.nodes[NODE].pop("status", None)

    s.cluster.handlers.append(pod_goes_and_status_is_emptied)
    result, _ = run(s, options(pv_detach_timeout=600, timeout=3600))
    assert result.ok, result
    assert result.evicted == ("default/expv-0",)


def test_a_failing_node_read_during_the_termination_wait_does_not_end_the_drain() -> None:
    """While evicted pods terminate, the drain asks whether the Node is gone; an API error on
    that read is not "gone": the drain keeps waiting and the pod counts as drained."""
    s = build(FakeCluster(), FakeClock(), nopv=1)
    s.cluster.handlers.append(s.sleep_then(12, "delete"))

    def node_reads_fail(_name: str) -> None:
        raise server_error("etcd down")

    s.cluster.node_get_reactor = node_reads_fail
    result, elapsed = run(s, options(timeout=600))
    assert result.ok, result
    assert not result.node_gone
    assert result.evicted == ("default/nopv-0",)
    assert 12 <= elapsed < 20

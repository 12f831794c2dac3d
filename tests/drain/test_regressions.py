"""One test per upstream drain bug mcm fixes (upstream v0.47.0 ``pkg/util/provider/drain/drain.go``
and ``volume_attachment.go``; docs/drain.md, "Where mcm differs from upstream").

Each test names the upstream behaviour it would catch.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from typing import Any

import pytest

from mcm.drain import DrainOptions, DrainResult, PodDeletions, VolumeAttachmentHub, cordon_node, run_drain
from mcm.drain.state import LEFT_NODE_GONE, POD_POLL_INTERVAL, TERMINATION_BUFFER
from mcm.drain.volumes import is_attached
from mcm.driver import Code, FakeDriver, GetVolumeIDsResponse, MachineError
from mcm.runtime.cache.listers import new_not_found
from mcm.runtime.client.errors import ApiError
from mcm.runtime.client.resources import PODS
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj
from tests.drain.fakes import ClockDriver, FakeCluster, listers, server_error, too_many_requests
from tests.drain.scenario import NEW_NODE, NODE, Scenario, attachment, build, pod, pvc


def run(
    s: Scenario,
    options: DrainOptions,
    *,
    driver: FakeDriver | None = None,
    stop: threading.Event | None = None,
    **listers_extra: Any,
) -> tuple[DrainResult, float]:
    with ClockDriver(s.clock, lambda: sum(s.cluster.calls.values())) as clock_driver:
        result = run_drain(
            s.cluster.as_client(),
            s.listers(**listers_extra),
            FakeDriver() if driver is None else driver,
            NODE,
            options,
            clock=s.clock,
            stop=stop or threading.Event(),
            hub=s.hub,
        )
    return result, clock_driver.elapsed


def options(**changes: Any) -> DrainOptions:
    base: dict[str, Any] = {
        "timeout": 120,
        "max_evict_retries": 3,
        "pv_detach_timeout": 30,
        "pv_reattach_timeout": 0.001,
    }
    base.update(changes)
    return DrainOptions(**base)


def evictions_remove_pods(s: Scenario) -> None:
    s.cluster.handlers.append(s.delete_pod)
    s.cluster.handlers.append(s.sleep_then(0.5, "detach"))


# --- max evict retries of 0 (upstream's ``evictPodsWithPv`` hangs) --------------------------------


def test_zero_evict_retries_deletes_at_once_and_never_hangs() -> None:
    """Upstream: zero eviction passes, no delete pass, the PV pods never report → blocks for ever."""
    s = build(FakeCluster(), FakeClock(), nopv=2, expv=2)
    evictions_remove_pods(s)
    result, _ = run(s, options(max_evict_retries=0))
    assert result.ok, result
    assert s.cluster.count("pods.evict.attempt") == 0
    assert sorted(result.deleted) == ["default/expv-0", "default/expv-1", "default/nopv-0", "default/nopv-1"]
    assert s.left() == {}


# --- GetVolumeIDs errors (a nil answer panics v0.47.0's ``getVolIDsFromDriver``) ------------------


def test_get_volume_ids_error_skips_only_that_volume() -> None:
    """Upstream v0.47.0 dereferenced a nil response before checking the error and crashed."""
    s = build(FakeCluster(), FakeClock(), expv=1, pvs_per_pod=2)
    s.cluster.handlers.append(s.delete_pod)
    driver = FakeDriver()

    def answer(_ctx: Any, request: Any) -> GetVolumeIDsResponse:
        handle = request.pv_specs[0]["csi"]["volumeHandle"]
        if handle == "expv-0-0":
            raise MachineError(Code.Internal, "cloud down")
        return GetVolumeIDsResponse(volume_ids=(handle,))

    driver.always("get_volume_ids", answer)
    # Keep the failing volume attached for ever: only the other one is waited on.
    s.cluster.nodes[NODE]["status"]["volumesAttached"] = [{"name": "expv-0-0"}]
    result, elapsed = run(s, options(), driver=driver)
    assert result.ok, result
    assert result.evicted == ("default/expv-0",)
    assert len(driver.calls_to("get_volume_ids")) == 2  # one call per PV
    assert elapsed < 1  # nothing to wait for: the other volume is detached


# --- nil priority (upstream's ``sortPodsByPriority`` panics) --------------------------------------


def test_pods_without_priority_are_drained_in_priority_order() -> None:
    """Upstream dereferenced ``Spec.Priority`` in the sort and panicked on nil."""
    s = Scenario(FakeCluster(), FakeClock())
    for name, priority in (("low", -5), ("none", None), ("high", 10)):
        s.add(pod(name, claims=[f"c-{name}"], priority=priority), [f"c-{name}"])
    s.cluster.nodes[NODE] = {"metadata": {"name": NODE}, "status": {}}
    order: list[str] = []

    def record(victim: Obj) -> None:
        order.append(victim["metadata"]["name"])
        s.delete_pod(victim)

    s.cluster.handlers.append(record)
    result, _ = run(s, options(max_evict_retries=1))
    assert result.ok, result
    assert order == ["high", "none", "low"]


# --- VolumeAttachments without a PV name (upstream's ``dispatch`` panics) -------------------------


def test_inline_volume_attachments_are_harmless() -> None:
    """Upstream dereferenced ``PersistentVolumeName`` in dispatch and the reattach wait."""
    hub = VolumeAttachmentHub()
    watch = hub.watch(NODE, ["pv-a"])
    hub.on_add(attachment(None, NEW_NODE))
    hub.on_update({}, {"metadata": {"name": "broken"}, "spec": None})
    hub.on_add(None)
    hub.on_delete(attachment(None, NODE))
    assert not watch.reattached.is_set()
    hub.on_add(attachment("pv-a", NEW_NODE))
    assert watch.reattached.is_set()


# --- the worker count read without the lock (upstream's ``dispatch``) -----------------------------


def test_hub_dispatch_races_with_watch_registration() -> None:
    """Upstream read the worker slice length without the lock and dropped events on full channels."""
    hub = VolumeAttachmentHub()
    errors: list[BaseException] = []
    done = threading.Event()

    def churn() -> None:
        try:
            while not done.is_set():
                hub.unwatch(hub.watch(NODE, ["pv-x"]))
        except BaseException as err:  # pragma: no cover - the failure being tested for
            errors.append(err)

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    kept = hub.watch(NODE, ["pv-y"])
    for _ in range(2000):
        hub.dispatch(attachment("pv-x", NEW_NODE))
    hub.dispatch(attachment("pv-y", NEW_NODE))  # never dropped, whatever else is going on
    done.set()
    for t in threads:
        t.join()
    assert errors == []
    assert kept.reattached.is_set()


# --- pods left behind counted as drained (``evictPodsWithPVInternal``'s fast track) ---------------


def test_pods_left_at_the_deadline_are_reported_not_drained() -> None:
    """Upstream's fast-track reported success for PV pods not processed before the deadline."""
    s = build(FakeCluster(), FakeClock(), expv=2)

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    s.cluster.evict_reactor = refuse
    result, elapsed = run(s, options(timeout=30, max_evict_retries=100))
    assert not result.ok
    assert result.timed_out
    assert {p.key for p in result.left_behind} == {"default/expv-0", "default/expv-1"}
    assert result.evicted == () and result.deleted == ()
    assert "drain deadline exceeded" in (result.error or "")
    assert elapsed <= 30


# --- PV pods without tracked volumes (upstream does not wait for them) ----------------------------


def test_pv_pod_without_tracked_volumes_is_waited_for() -> None:
    """Upstream counted a pod whose PVs are all shared as done right after the eviction call."""
    s = build(FakeCluster(), FakeClock(), shpv=2)  # evicted, never terminates (no handler)
    result, elapsed = run(s, options(timeout=60))
    assert not result.ok
    assert result.evicted == ()
    assert {p.key for p in result.left_behind} == {"default/shpv-0", "default/shpv-1"}
    assert elapsed <= 60


# --- regex matching of volume IDs (upstream's ``waitForDetach``) ----------------------------------


def test_volume_ids_match_exactly() -> None:
    """Upstream used the ID as an unanchored regular expression."""
    attached = [
        {"name": "kubernetes.io/csi/ebs.csi.aws.com^vol-10"},
        {"name": "kubernetes.io/aws-ebs/vol-2x3"},
    ]
    assert is_attached("vol-10", attached)
    assert not is_attached("vol-1", attached)  # substring
    assert not is_attached("vol-2.3", attached)  # regex wildcard
    assert not is_attached("[", attached)  # invalid regex is no error either
    assert is_attached("vol-2x3", attached)


# --- cordon errors (v0.47.0's ``RunCordonOrUncordon`` ignores a failed GET) -----------------------


def test_cordon_tolerates_a_missing_node_but_reports_other_errors() -> None:
    """Upstream v0.47.0 silently skipped cordoning on any GET error."""
    cluster = FakeCluster()
    cordon_node(cluster.as_client(), "missing")  # not an error
    cluster.nodes[NODE] = {"metadata": {"name": NODE}, "spec": {}}
    cordon_node(cluster.as_client(), NODE)
    assert cluster.nodes[NODE]["spec"]["unschedulable"] is True
    cordon_node(cluster.as_client(), NODE)
    assert cluster.count("nodes.update") == 1

    def fail(_name: str) -> None:
        raise server_error("etcd unavailable")

    cluster.node_get_reactor = fail
    with pytest.raises(ApiError, match="etcd unavailable"):
        cordon_node(cluster.as_client(), NODE)


# --- every wait honours the deadline and the stop event (upstream's sleeps do not) ----------------


def test_eviction_retries_of_pods_without_pv_end_at_the_deadline() -> None:
    """Upstream's without-PV path ignored the timeout: up to MaxEvictRetries x 20 s of sleeps."""
    s = build(FakeCluster(), FakeClock(), nopv=3)

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    s.cluster.evict_reactor = refuse
    result, elapsed = run(s, options(timeout=50, max_evict_retries=360))
    assert result.timed_out and not result.ok
    assert elapsed <= 50
    assert s.cluster.count("pods.evict.attempt") == 9  # t = 0, 20, 40 for each pod


def test_stop_event_ends_a_sleeping_drain_promptly() -> None:
    """Upstream's 20 s and 5 s sleeps ignored contexts."""
    clock = FakeClock()
    s = build(FakeCluster(), clock, nopv=1, expv=1)

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    s.cluster.evict_reactor = refuse
    stop = threading.Event()
    results: list[DrainResult] = []
    thread = threading.Thread(
        target=lambda: results.append(
            run_drain(
                s.cluster.as_client(), s.listers(), FakeDriver(), NODE, options(), clock=clock, stop=stop
            )
        )
    )
    thread.start()
    clock.block_until_waiters(2)  # both paths are parked in their 20 s retry sleep
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert {p.reason for p in results[0].left_behind} == {"drain stopped"}


# --- misleading error text (upstream says "evicting" after a delete) ------------------------------


def test_failed_final_delete_is_reported_as_a_delete() -> None:
    """Upstream reported "error evicting pod" even when the failing last attempt was a delete."""
    s = build(FakeCluster(), FakeClock(), expv=1)

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    def fail(_pod: Obj) -> None:
        raise server_error()

    s.cluster.evict_reactor = refuse
    s.cluster.delete_reactor = fail
    result, _ = run(s, options(max_evict_retries=1))
    assert result.error == 'error deleting pod default/expv-0 from node "old-node"'


# --- eviction body version (upstream posts through the v1beta1 client) ----------------------------


def test_eviction_is_posted_as_policy_v1() -> None:
    """Upstream posted through the v1beta1 client with the preferred version in the body."""
    sent: list[tuple[str, str, Obj]] = []

    class Transport:
        def request(self, method: str, path: str, *, body: Obj | None = None, **_: Any) -> Obj:
            sent.append((method, path, body or {}))
            return {"kind": "Status", "status": "Success"}

    RESTClient(Transport(), PODS).evict("p", "default")  # type: ignore[arg-type]
    method, path, body = sent[0]
    assert (method, path) == ("POST", "/api/v1/namespaces/default/pods/p/eviction")
    assert (body["apiVersion"], body["kind"]) == ("policy/v1", "Eviction")


# --- HEAD rules mcm adopts (docs/drain.md) --------------------------------------------------------


def misconfigured_pdb(**status: Any) -> Obj:
    base = {"expectedPods": 3, "desiredHealthy": 3, "currentHealthy": 3, "disruptionsAllowed": 0}
    base.update(status)
    return {
        "metadata": {"name": "pdb", "namespace": "default", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"observedGeneration": 1, **base},
    }


@pytest.mark.parametrize(
    ("status", "misconfigured"),
    [
        ({}, True),
        ({"disruptionsAllowed": 1}, False),
        ({"disruptedPods": {"db-1": "2024-01-01T00:00:00Z"}}, False),
        ({"currentHealthy": 2}, False),
        ({"observedGeneration": 0}, False),
        ({"expectedPods": 0, "currentHealthy": 0}, False),
    ],
)
def test_misconfigured_pdb_rule(status: Obj, misconfigured: bool) -> None:
    from mcm.drain import is_misconfigured

    assert is_misconfigured(misconfigured_pdb(**status)) is misconfigured


def test_misconfigured_pdb_fails_the_pod_without_retries() -> None:
    s = Scenario(FakeCluster(), FakeClock())
    s.add(pod("db-0", labels={"app": "db"}))
    s.cluster.nodes[NODE] = {"metadata": {"name": NODE}}

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    s.cluster.evict_reactor = refuse
    result, _ = run(s, options(), pdbs=[misconfigured_pdb()])
    assert result.error == (
        'error while evicting pod "db-0": pod disruption budget default/pdb is misconfigured '
        "and requires zero voluntary evictions"
    )
    assert s.cluster.count("pods.evict.attempt") == 1
    assert s.cluster.count("pods.delete.attempt") == 0


def test_unbound_and_missing_claims_are_skipped() -> None:
    s = Scenario(FakeCluster(), FakeClock())
    s.add(pod("p", claims=["unbound", "missing"]))
    s.pvcs.append(pvc("unbound", volume=""))
    s.cluster.nodes[NODE] = {"metadata": {"name": NODE}}
    s.cluster.handlers.append(s.delete_pod)
    result, _ = run(s, options())
    assert result.ok and result.evicted == ("default/p",)


# --- the termination wait listens to the pod informer ------------------------------------------------


def drain_in_thread(
    cluster: FakeCluster, drain_listers: Any, clock: FakeClock, drain_options: DrainOptions
) -> tuple[threading.Thread, list[DrainResult]]:
    """``run_drain`` of NODE started in a thread (the test moves the fake clock); its result is
    appended to the list returned."""
    results: list[DrainResult] = []

    def drain_and_keep_result() -> None:
        client = cluster.as_client()
        stop = threading.Event()
        results.append(
            run_drain(client, drain_listers, FakeDriver(), NODE, drain_options, clock=clock, stop=stop)
        )

    drain = threading.Thread(target=drain_and_keep_result)
    drain.start()
    return drain, results


def _drain_of_bare_pods_gone_after_2s(*, informer: bool) -> DrainResult:
    """Two bare pods evicted at t=0 that leave at t=2 (fake time); the informer (the listers' pod
    cache plus PodDeletions) sees them go when ``informer`` is true. The test moves the clock."""
    clock = FakeClock()
    cluster = FakeCluster()
    pods = [pod(f"bare-{i}", tgp=2, owner_kind=None) for i in range(2)]
    for p in pods:
        cluster.add_pod(p)
    cluster.nodes[NODE] = {"metadata": {"name": NODE}, "spec": {}, "status": {}}
    deletions = PodDeletions()
    drain_listers = listers(pods)
    if informer:
        drain_listers = dataclasses.replace(drain_listers, pod_deletions=deletions)
    drain, results = drain_in_thread(cluster, drain_listers, clock, options())
    clock.block_until_waiters(1)  # both evicted, the drain waits for them to terminate
    assert cluster.count("pods.evict") == 2
    clock.step(2)
    for p in pods:  # the kubelet is done: the pods leave the API server and the informer's cache
        cluster.remove_pod(p)
        drain_listers.pods.indexer.delete(p)
        deletions.on_delete(p)
    if not informer:
        clock.block_until_waiters(1)  # still waiting for its next poll
        clock.step(3)
    drain.join(10)
    assert not drain.is_alive()
    assert deletions.watch_count == 0  # the drain leaves no watch behind
    return results[0]


def test_wait_for_terminated_pods_ends_when_the_informer_sees_them_go() -> None:
    """Upstream (and mcm before) polled every 5 s: two bare pods gone after 2 s took 5 s."""
    result = _drain_of_bare_pods_gone_after_2s(informer=True)
    assert result.ok and sorted(result.evicted) == ["default/bare-0", "default/bare-1"]
    assert result.duration == 2.0
    polled = _drain_of_bare_pods_gone_after_2s(informer=False)
    assert polled.ok and polled.duration == 5.0  # without the informer: the 5 s poll


def test_a_pod_the_informer_has_not_seen_go_is_asked_for_before_its_wait_runs_out() -> None:
    """The cache can lag: at the drain deadline the API server decides, not the cache."""
    clock = FakeClock()
    cluster = FakeCluster()
    victim = pod("bare", tgp=2, owner_kind=None)
    cluster.add_pod(victim)
    cluster.nodes[NODE] = {"metadata": {"name": NODE}, "spec": {}, "status": {}}
    drain_listers = dataclasses.replace(listers([victim]), pod_deletions=PodDeletions())
    drain, results = drain_in_thread(cluster, drain_listers, clock, options(timeout=3))
    clock.block_until_waiters(1)
    clock.step(2)
    cluster.remove_pod(victim)  # gone from the API server; the informer has not noticed
    clock.block_until_waiters(1)
    clock.step(1)  # the drain deadline, before the next 5 s poll
    drain.join(10)
    assert results[0].ok and results[0].evicted == ("default/bare",), results[0]


def test_pod_deletions_wake_every_watch_and_honour_stop() -> None:
    deletions = PodDeletions()
    stop = threading.Event()
    first, second = deletions.watch(stop), deletions.watch()
    deletions.on_update({}, {})
    deletions.on_add({})
    assert not first.is_set() and not second.is_set()
    deletions.on_delete({"metadata": {"name": "p"}})
    assert first.is_set() and second.is_set()
    first.clear()
    stop.set()
    assert first.is_set() and first.wait(0)
    deletions.unwatch(first)
    deletions.unwatch(second)
    assert deletions.watch_count == 0


# --- issue 23 "tests that notice": outcomes the mutation run found unchecked -------------------


def test_a_pod_recreated_under_the_same_name_counts_as_gone() -> None:
    """A StatefulSet puts a new pod (new uid) under the old name at once: the evicted pod is
    gone; waiting for the name to disappear would wait out the whole termination timeout."""
    s = build(FakeCluster(), FakeClock(), nopv=2, tgp=600)

    def recreate(victim: Obj) -> None:
        with s.cluster.lock:
            fresh = copy.deepcopy(victim)
            fresh["metadata"]["uid"] = f"{victim['metadata']['uid']}-new"
            s.cluster.pods[f"{victim['metadata']['namespace']}/{victim['metadata']['name']}"] = fresh

    s.cluster.handlers.append(recreate)
    result, elapsed = run(s, options())
    assert result.ok, result
    assert sorted(result.evicted) == ["default/nopv-0", "default/nopv-1"]
    assert result.left_behind == ()
    assert elapsed < POD_POLL_INTERVAL * 2


def test_a_node_that_disappears_ends_the_wait_for_pods_without_volumes() -> None:
    """Pods without PVs whose eviction was accepted but which never terminate: once the Node is
    gone the drain stops waiting and succeeds (node_gone), long before their termination wait."""
    s = build(FakeCluster(), FakeClock(), nopv=3, tgp=600)
    polls = 0

    def node_vanishes(name: str) -> None:
        nonlocal polls
        polls += 1
        if polls >= 2:
            with s.cluster.lock:
                s.cluster.nodes.pop(NODE, None)

    s.cluster.node_get_reactor = node_vanishes
    result, elapsed = run(s, options(timeout=3600))
    assert result.ok, result
    assert result.node_gone
    assert sorted(p.key for p in result.left_behind) == ["default/nopv-0", "default/nopv-1", "default/nopv-2"]
    assert {p.reason for p in result.left_behind} == {LEFT_NODE_GONE}
    assert elapsed < 60


def test_pods_that_stay_while_the_node_stays_fail_the_drain_at_their_termination_wait() -> None:
    s = build(FakeCluster(), FakeClock(), nopv=1, tgp=5)
    result, elapsed = run(s, options(timeout=3600))
    assert not result.ok
    assert not result.node_gone
    assert [p.key for p in result.left_behind] == ["default/nopv-0"]
    assert "timed out waiting for the condition" in (result.error or "")
    assert 5 + TERMINATION_BUFFER <= elapsed < 5 + TERMINATION_BUFFER + POD_POLL_INTERVAL + 1


def test_a_pod_gone_before_its_eviction_is_counted_as_gone() -> None:
    s = build(FakeCluster(), FakeClock(), nopv=2)

    def vanish_first(victim: Obj) -> None:
        if victim["metadata"]["name"] == "nopv-0":
            s.cluster.remove_pod(victim)
            raise new_not_found("", "pods", "nopv-0")

    s.cluster.evict_reactor = vanish_first
    s.cluster.handlers.append(s.delete_pod)
    result, _ = run(s, options())
    assert result.ok, result
    assert result.gone == ("default/nopv-0",)
    assert result.evicted == ("default/nopv-1",)


def test_a_fatal_pod_selection_evicts_nothing() -> None:
    """A pod with local storage and no permission to delete it stops the drain before any pod
    is touched (upstream's fatal filter)."""
    s = build(FakeCluster(), FakeClock(), nopv=1)
    local = pod("scratch")
    local["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    s.add(local)
    s.cluster.handlers.append(s.delete_pod)
    result, _ = run(s, options(delete_local_data=False))
    assert not result.ok
    assert "scratch" in (result.error or "")
    assert s.cluster.count("pods.evict.attempt") == 0 and s.cluster.count("pods.delete.attempt") == 0


def test_the_drain_deadline_while_volumes_still_detach_leaves_the_pod_behind() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    s.cluster.handlers.append(s.delete_pod)  # the pod goes, its volume never detaches
    result, elapsed = run(s, options(timeout=20, pv_detach_timeout=30))
    assert not result.ok
    assert result.timed_out
    assert [(p.key, p.reason) for p in result.left_behind] == [("default/expv-0", "drain deadline exceeded")]
    assert elapsed <= 20


def test_the_drain_waits_for_volumes_to_reattach_elsewhere() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    s.hub = VolumeAttachmentHub()
    s.cluster.handlers.append(s.delete_pod)
    s.cluster.handlers.append(s.sleep_then(0.5, "detach"))  # detach, then reattach 5 s later
    result, elapsed = run(s, options(pv_reattach_timeout=30))
    assert result.ok, result
    assert 5 <= elapsed < 30


def test_an_attachment_event_that_changes_nothing_does_not_make_the_detach_wait_spin() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    hub = s.hub = VolumeAttachmentHub()

    def poke_then_detach(victim: Obj) -> None:
        s.delete_pod(victim)
        s.clock.sleep(0.1)
        hub.dispatch(attachment("expv-0-0", NODE))  # still attached to this node
        s.clock.sleep(2)
        s.detach_exclusive(victim)

    s.cluster.handlers.append(poke_then_detach)
    result, _ = run(s, options(pv_reattach_timeout=30))
    assert result.ok, result
    assert s.cluster.count("nodes.get") < 10


def test_a_pv_pod_refused_once_is_evicted_on_the_next_pass() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    refused: list[str] = []

    def refuse_once(victim: Obj) -> None:
        if not refused:
            refused.append(victim["metadata"]["name"])
            raise too_many_requests()

    s.cluster.evict_reactor = refuse_once
    s.cluster.handlers.append(s.delete_pod)
    s.cluster.handlers.append(s.sleep_then(0.5, "detach"))
    result, elapsed = run(s, options())
    assert result.ok, result
    assert result.evicted == ("default/expv-0",)
    assert s.cluster.count("pods.evict") == 1
    assert 20 <= elapsed < 60  # one eviction retry interval


def test_a_claim_without_spec_does_not_break_the_drain() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    s.pvcs[0] = {k: v for k, v in s.pvcs[0].items() if k != "spec"}
    s.cluster.handlers.append(s.delete_pod)
    result, _ = run(s, options())
    assert result.ok, result
    assert result.evicted == ("default/expv-0",)

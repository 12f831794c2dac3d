"""The drain's rules as tables (upstream v0.47.0 ``pkg/util/provider/drain/drain.go``, with HEAD's
changes): what a drain hands back, the PDB and eviction paths, the waits for terminating pods
and for volumes. Fake cluster and FakeClock (tests/drain/fakes.py)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, cast

import pytest

from mcm.drain import DrainOptions, DrainResult, run_drain
from mcm.drain.drain import _eviction_supported, _result
from mcm.drain.metrics import DrainMetrics
from mcm.drain.parallel import _evict_with_retries, remove_in_parallel
from mcm.drain.pods import (
    DAEMONSET_FATAL,
    DAEMONSET_WARNING,
    LOCAL_STORAGE_FATAL,
    LOCAL_STORAGE_WARNING,
    MIRROR_ANNOTATION,
    UNREPLICATED_FATAL,
    UNREPLICATED_WARNING,
    select_pods,
)
from mcm.drain.shared import DrainRun
from mcm.drain.state import (
    DETACH_TIMEOUT_TEXT,
    EVICTION_RETRY_INTERVAL,
    LEFT_DEADLINE,
    LEFT_NODE_GONE,
    LEFT_STOPPED,
    REASON_DRAIN_BLOCKED,
    REASON_DRAIN_FAILED,
    REASON_DRAIN_STARTED,
    REASON_DRAIN_SUCCEEDED,
    TERMINATION_BUFFER,
    Deadline,
    Removed,
    Tally,
    aggregate,
)
from mcm.drain.types import PodOutcome
from mcm.drain.volumes import TrackedVolume, VolumeAttachmentHub, attachment_pv_name, is_attached, pod_volumes
from mcm.driver import FakeDriver, GetVolumeIDsResponse
from mcm.runtime.cache.keys import DeletedFinalStateUnknown
from mcm.runtime.cache.listers import new_not_found
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj
from mcm.runtime.record import EventRecorder
from tests.drain.fakes import ClockDriver, FakeCluster, lister, listers, server_error, too_many_requests
from tests.drain.scenario import NEW_NODE, NODE, Scenario, attachment, build, pv, pvc
from tests.drain.scenario import pod as scenario_pod


@pytest.mark.parametrize(
    ("value", "field_name"),
    [
        (DrainOptions(), "timeout"),
        (listers(), "pods"),
        (PodOutcome("default", "p", "evicted"), "action"),
        (DrainResult(node="n", duration=0.0), "node"),
        (TrackedVolume("pv", "vol"), "pv_name"),
    ],
    ids=["DrainOptions", "DrainListers", "PodOutcome", "DrainResult", "TrackedVolume"],
)
def test_the_drains_values_are_immutable_and_hashable(value: Any, field_name: str) -> None:
    """Options, listers and results are shared between the drain's threads and handed to
    callers: none of them can be changed after it is built, and each can be a dict key."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field_name, None)
    assert hash(value) == hash(dataclasses.replace(value))


# --- which pods a drain removes (getPodsForDeletion) --------------------------------------------


def _pod(**changes: Any) -> Obj:
    victim = scenario_pod("victim")
    meta, spec = victim["metadata"], victim["spec"]
    if "owners" in changes:
        meta["ownerReferences"] = changes["owners"]
    if "volumes" in changes:
        spec["volumes"] = changes["volumes"]
    if "phase" in changes:
        victim["status"]["phase"] = changes["phase"]
    if "annotations" in changes:
        meta["annotations"] = changes["annotations"]
    return victim


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
DS = {**RS, "kind": "DaemonSet"}
NOT_CONTROLLER = {**RS, "controller": False}
STRING_CONTROLLER = {**RS, "controller": "true"}
EMPTY_DIR = {"name": "tmp", "emptyDir": {}}
STRICT = DrainOptions(delete_local_data=False, ignore_pods_without_controllers=False, ignore_daemonsets=False)
LENIENT = DrainOptions()


@pytest.mark.parametrize(
    ("victim", "options", "drained", "warning", "fatal"),
    [
        # a controller reference among junk entries is found; only controller: true counts
        (_pod(owners=["junk", None, RS]), STRICT, True, None, None),
        (_pod(owners=[NOT_CONTROLLER]), STRICT, False, None, UNREPLICATED_FATAL),
        (_pod(owners=[STRING_CONTROLLER]), LENIENT, True, UNREPLICATED_WARNING, None),
        (_pod(owners=None), LENIENT, True, UNREPLICATED_WARNING, None),
        # a finished bare pod needs no controller
        (_pod(owners=[], phase="Succeeded"), STRICT, True, None, None),
        (_pod(owners=[], phase="Failed"), STRICT, True, None, None),
        (_pod(owners=[], phase="Pending"), STRICT, False, None, UNREPLICATED_FATAL),
        # emptyDir volumes are local storage, whatever else the pod mounts
        (
            _pod(volumes=["junk", {"name": "cfg", "configMap": {}}, EMPTY_DIR]),
            STRICT,
            False,
            None,
            LOCAL_STORAGE_FATAL,
        ),
        (_pod(volumes=[EMPTY_DIR]), LENIENT, True, LOCAL_STORAGE_WARNING, None),
        (_pod(volumes=[{"name": "cfg", "configMap": {}}, "junk"]), STRICT, True, None, None),
        (_pod(volumes=None), STRICT, True, None, None),
        # DaemonSet pods are never drained: a warning when ignored, else fatal
        (_pod(owners=[DS]), LENIENT, False, DAEMONSET_WARNING, None),
        (_pod(owners=[DS]), STRICT, False, None, DAEMONSET_FATAL),
        # mirror pods are skipped silently
        (_pod(annotations={MIRROR_ANNOTATION: "x"}), STRICT, False, None, None),
        (_pod(annotations=None), STRICT, True, None, None),
    ],
)
def test_select_pods(
    victim: Obj, options: DrainOptions, drained: bool, warning: str | None, fatal: str | None
) -> None:
    selection = select_pods([victim], NODE, options)
    assert [p["metadata"]["name"] for p in selection.pods] == (["victim"] if drained else [])
    assert selection.skipped == ([] if drained else ["default/victim"])
    assert selection.warnings == ({warning: ["victim"]} if warning else {})
    assert selection.fatal == ({fatal: ["victim"]} if fatal else {})
    assert selection.error() == (f"{fatal}: victim" if fatal else None)


# --- one drain's shared pieces: Deadline, Tally, aggregate ---------------------------------------


@pytest.mark.parametrize(
    ("errors", "aggregated"),
    [
        ([], None),
        (["", ""], None),
        (["a"], "a"),
        (["a", "", "a"], "a"),
        (["a", "b", "a"], "[a, b]"),
    ],
)
def test_errors_are_aggregated_as_apimachinery_does(errors: list[str], aggregated: str | None) -> None:
    assert aggregate(errors) == aggregated


START = FakeClock().monotonic()


def test_the_deadline_counts_down_on_its_clock_and_a_stop_ends_it() -> None:
    clock, stop = FakeClock(), threading.Event()
    deadline = Deadline(clock, stop, 10.0)
    assert (deadline.remaining(), deadline.over(), deadline.reason()) == (10.0, False, LEFT_DEADLINE)
    clock.step(4.0)
    assert (deadline.remaining(), deadline.over()) == (6.0, False)
    clock.step(6.0)
    assert (deadline.remaining(), deadline.over(), deadline.reason()) == (0.0, True, LEFT_DEADLINE)
    clock.step(1.0)
    assert deadline.remaining() == 0.0  # never negative
    stopped = Deadline(clock, stop, 10.0)
    stop.set()
    assert (stopped.over(), stopped.reason()) == (True, LEFT_STOPPED)
    assert Deadline(clock, threading.Event(), -5.0).remaining() == 0.0  # a negative timeout is over at once


def test_a_deadline_sleep_waits_at_most_until_the_deadline() -> None:
    clock = FakeClock()
    deadline = Deadline(clock, threading.Event(), 10.0)
    with ClockDriver(clock):
        assert deadline.sleep(4.0) is True
        assert clock.monotonic() == pytest.approx(4.0 + START)
        assert deadline.sleep(20.0) is False  # cut at the deadline, which is then over
        assert clock.monotonic() == pytest.approx(10.0 + START)
        assert deadline.sleep(1.0) is False  # over: no wait at all
        assert clock.monotonic() == pytest.approx(10.0 + START)


def test_the_tally_keeps_the_last_outcome_of_each_pod_and_every_error() -> None:
    tally = Tally()
    a, b = scenario_pod("a"), scenario_pod("b")
    tally.record(a, "left", "refused", "first error")
    tally.record(a, "evicted")
    tally.record(b, "left", "timed out", "second error")
    tally.record(b, "left", "again", "")
    assert tally.of("evicted") == ("default/a",)
    assert tally.left() == (PodOutcome("default", "b", "left", "again"),)
    assert tally.errors == ["first error", "second error"]


# --- DrainRun: one evict or delete call, a refused eviction, the termination wait's bounds -------


class _Recorded:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        self.events.append((event_type, reason, message))


def _run(cluster: FakeCluster | None = None, pdbs: tuple[Obj, ...] = (), **options: Any) -> DrainRun:
    cluster = cluster or FakeCluster()
    cluster.nodes.setdefault(NODE, {"metadata": {"name": NODE}})
    return DrainRun(
        cluster.as_client(),
        listers(pdbs=pdbs),
        FakeDriver(),
        NODE,
        DrainOptions(**{"timeout": 100.0, **options}),
        FakeClock(),
        threading.Event(),
        recorder=cast(EventRecorder, _Recorded()),
        machine_ref={"kind": "Machine", "metadata": {"name": "m"}},
    )


class _PodsSpy:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, Any]] = []

    def evict(self, name: str, namespace: str, body: Any) -> None:
        self.calls.append(("evict", name, namespace, body))

    def delete(self, name: str, *, namespace: str, grace_period_seconds: int) -> None:
        self.calls.append(("delete", name, namespace, grace_period_seconds))


@pytest.mark.parametrize(
    ("grace", "body"),
    [
        (None, None),  # the pod's own grace period
        (-1, None),  # negative: the pod's own too
        (0, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}),
        (30, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 30}),
    ],
)
def test_an_eviction_carries_the_configured_grace_period(grace: int | None, body: Any) -> None:
    run = _run(grace_period=grace)
    spy = _PodsSpy()
    run.pods_api = spy
    assert run.act(scenario_pod("p"), evict=True) == "evicted"
    assert spy.calls == [("evict", "p", "default", body)]


def test_a_delete_is_immediate_whatever_the_grace_period() -> None:
    run = _run(grace_period=30)
    spy = _PodsSpy()
    run.pods_api = spy
    assert run.act(scenario_pod("p"), evict=False) == "deleted"
    assert spy.calls == [("delete", "p", "default", 0)]


def _budget(name: str, app: str, **status: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": app}}},
        "status": {"observedGeneration": 1, **status},
    }


HEALTHY_BUDGET = {"expectedPods": 3, "currentHealthy": 3, "disruptionsAllowed": 1}
MISCONFIGURED = {"expectedPods": 3, "currentHealthy": 3, "disruptionsAllowed": 0}


def test_a_refused_eviction_without_a_pdb_is_retried_without_an_event() -> None:
    run = _run()
    assert run.refused_by_pdb(scenario_pod("p", labels={"app": "db"}), too_many_requests()) is None
    assert run.blocked_pdbs == set()
    assert cast(_Recorded, run.recorder).events == []


def test_a_pdb_blocking_evictions_is_announced_once_per_drain() -> None:
    run = _run(pdbs=(_budget("db", "db", **HEALTHY_BUDGET),))
    for name in ("db-0", "db-1", "db-0"):
        assert run.refused_by_pdb(scenario_pod(name, labels={"app": "db"}), too_many_requests()) is None
    assert run.blocked_pdbs == {"default/db"}
    assert cast(_Recorded, run.recorder).events == [
        (
            "Warning",
            REASON_DRAIN_BLOCKED,
            "Eviction of pod default/db-0 from node 'old-node' blocked by PodDisruptionBudget default/db",
        )
    ]


def test_each_blocking_pdb_is_announced() -> None:
    run = _run(pdbs=(_budget("db", "db", **HEALTHY_BUDGET), _budget("web", "web", **HEALTHY_BUDGET)))
    run.refused_by_pdb(scenario_pod("db-0", labels={"app": "db"}), too_many_requests())
    run.refused_by_pdb(scenario_pod("web-0", labels={"app": "web"}), too_many_requests())
    assert [message.rsplit(" ", 1)[-1] for _, _, message in cast(_Recorded, run.recorder).events] == [
        "default/db",
        "default/web",
    ]


def test_a_misconfigured_pdb_fails_the_pod_with_upstreams_text() -> None:
    run = _run(pdbs=(_budget("db", "db", **MISCONFIGURED),))
    assert run.refused_by_pdb(scenario_pod("db-0", labels={"app": "db"}), too_many_requests()) == (
        'error while evicting pod "db-0": pod disruption budget default/db is misconfigured and '
        "requires zero voluntary evictions"
    )


def test_events_need_a_recorder_and_a_machine() -> None:
    run = _run(pdbs=(_budget("db", "db", **HEALTHY_BUDGET),))
    run.machine_ref = None
    run.refused_by_pdb(scenario_pod("db-0", labels={"app": "db"}), too_many_requests())
    assert cast(_Recorded, run.recorder).events == []
    run.machine_ref, run.recorder = {"metadata": {"name": "m"}}, None
    run.event("Normal", "R", "m")  # no recorder: nothing to do, no failure


@pytest.mark.parametrize(
    ("grace", "timeout", "waited"),
    [
        (5, 100.0, 5 + TERMINATION_BUFFER),
        (None, 100.0, TERMINATION_BUFFER),  # no grace period: the buffer only
        (3600, 100.0, 100.0),  # the grace period is capped by the drain timeout, then the deadline
        (50, 60.0, 60.0),  # never past the drain's deadline
    ],
)
def test_a_removed_pod_is_waited_for_its_grace_period_and_a_buffer_within_the_deadline(
    grace: int | None, timeout: float, waited: float
) -> None:
    run = _run(timeout=timeout)
    victim = scenario_pod("p")
    victim["spec"]["terminationGracePeriodSeconds"] = grace
    assert run.termination_deadline(victim) - run.clock.monotonic() == pytest.approx(waited)


def test_a_pod_is_gone_when_not_found_or_replaced_under_its_name() -> None:
    cluster = FakeCluster()
    run = _run(cluster)
    victim = scenario_pod("p")
    assert run.is_gone(victim) is True
    cluster.add_pod(victim)
    assert run.is_gone(victim) is False
    replaced = scenario_pod("p")  # same name, new UID
    cluster.add_pod(replaced)
    assert run.is_gone(victim) is True


def test_the_node_is_missing_only_when_not_found() -> None:
    cluster = FakeCluster()
    run = _run(cluster)
    assert (run.node_missing(), run.tally.node_gone) == (False, False)

    def failing(_name: str) -> None:
        raise server_error()

    cluster.node_get_reactor = failing
    assert (run.node_missing(), run.tally.node_gone) == (False, False)  # an API error: still there
    cluster.node_get_reactor = None
    del cluster.nodes[NODE]
    assert (run.node_missing(), run.tally.node_gone) == (True, True)


# --- which volumes a PV pod is waited on for ------------------------------------------------------


def _volumes(pods: list[Obj], pvcs: list[Obj], pvs: list[Obj], driver: FakeDriver | None = None) -> Any:
    if driver is None:
        driver = FakeDriver()
        driver.always(
            "get_volume_ids",
            lambda _ctx, request: GetVolumeIDsResponse(
                volume_ids=[f"id-{spec['csi']['volumeHandle']}" for spec in request.pv_specs]
            ),
        )
    return pod_volumes(
        pods,
        lister(pvcs, "persistentvolumeclaim", namespaced=True),
        lister(pvs, "persistentvolume", namespaced=False),
        driver,
        clock=FakeClock(),
        deadline=FakeClock().monotonic() + 60.0,
    )


def test_only_volumes_one_pod_alone_uses_are_tracked() -> None:
    """A PV two pods of the node share is skipped for both (upstream's shared-volume rule); a
    claim or PV that cannot be found, and a claim not bound yet, add nothing."""
    a = scenario_pod("a", claims=["own-a", "shared"])
    b = scenario_pod("b", claims=["shared", "missing-claim", "unbound", "missing-pv"])
    pvcs = [pvc("own-a"), pvc("shared"), pvc("unbound", volume=""), pvc("missing-pv")]
    pvs = [pv("own-a"), pv("shared")]
    assert _volumes([a, b], pvcs, pvs) == {
        "default/a": [TrackedVolume("own-a", "id-own-a")],
        "default/b": [],
    }


def test_a_claim_in_another_namespace_is_not_the_pods() -> None:
    victim = scenario_pod("p", claims=["data"])
    elsewhere = {**pvc("data"), "metadata": {"name": "data", "namespace": "other"}}
    assert _volumes([victim], [elsewhere], [pv("data")]) == {"default/p": []}


def test_a_failing_volume_id_lookup_skips_only_that_volume() -> None:
    driver = FakeDriver()

    def answer(_ctx: Any, request: Any) -> GetVolumeIDsResponse:
        handle = request.pv_specs[0]["csi"]["volumeHandle"]
        if handle == "bad":
            raise RuntimeError("driver down")
        return GetVolumeIDsResponse(volume_ids=[handle])

    driver.always("get_volume_ids", answer)
    victim = scenario_pod("p", claims=["bad", "good"])
    assert _volumes([victim], [pvc("bad"), pvc("good")], [pv("bad"), pv("good")], driver) == {
        "default/p": [TrackedVolume("good", "good")]
    }


@pytest.mark.parametrize(("deadline_in", "bound"), [(60.0, 30.0), (10.0, 10.0)])
def test_a_volume_id_lookup_is_bounded_by_its_timeout_and_the_drain_deadline(
    deadline_in: float, bound: float
) -> None:
    clock = FakeClock()
    seen: list[float | None] = []

    def answer(ctx: Any, _request: Any) -> GetVolumeIDsResponse:
        seen.append(ctx.deadline)
        return GetVolumeIDsResponse(volume_ids=["v"])

    driver = FakeDriver()
    driver.always("get_volume_ids", answer)
    pod_volumes(
        [scenario_pod("p", claims=["data"])],
        lister([pvc("data")], "persistentvolumeclaim", namespaced=True),
        lister([pv("data")], "persistentvolume", namespaced=False),
        driver,
        clock=clock,
        deadline=clock.monotonic() + deadline_in,
    )
    assert seen == [pytest.approx(clock.monotonic() + bound)]


@pytest.mark.parametrize(
    ("name", "attached"),
    [
        ("vol-1", True),
        ("kubernetes.io/csi/test.csi^vol-1", True),  # CSI: driver^handle
        ("kubernetes.io/aws-ebs/vol-1", True),  # in-tree: plugin/volume
        ("vol-10", False),
        ("xvol-1", False),
        ("kubernetes.io/csi/test.csi^vol-1/extra", False),
    ],
)
def test_a_volume_is_attached_when_a_node_entry_names_it(name: str, attached: bool) -> None:
    assert is_attached("vol-1", [{"name": name}]) is attached


def test_malformed_node_volume_entries_are_skipped() -> None:
    assert is_attached("vol-1", ["vol-1", {"name": None}, {"name": 1}, {"devicePath": "x"}]) is False
    assert is_attached("vol-1", ["junk", {"name": "vol-1"}]) is True


@pytest.mark.parametrize(
    ("attachment", "pv_name"),
    [
        ({"spec": {"source": {"persistentVolumeName": "pv-a"}}}, "pv-a"),
        ({"spec": {"source": {"persistentVolumeName": ""}}}, None),
        ({"spec": {"source": {"persistentVolumeName": 7}}}, None),
        ({"spec": {"source": {"inlineVolumeSpec": {}}}}, None),
        ({"spec": {"source": "junk"}}, None),
        ({"spec": {"source": None}}, None),
        ({"spec": None}, None),
        ({}, None),
        ("junk", None),
    ],
)
def test_the_pv_of_a_volume_attachment(attachment: Any, pv_name: str | None) -> None:
    assert attachment_pv_name(attachment) == pv_name


def test_a_watch_is_heard_until_it_is_removed() -> None:
    hub = VolumeAttachmentHub()
    first = hub.watch(NODE, ["pv-a"])
    second = hub.watch(NODE, ["pv-a"])
    assert hub.watch_count == 2
    hub.unwatch(first)
    hub.unwatch(first)  # twice: no error
    assert hub.watch_count == 1
    hub.dispatch(attachment("pv-a", NEW_NODE))
    assert (first.changed.is_set(), second.changed.is_set()) == (False, True)
    hub.unwatch(second)
    assert hub.watch_count == 0


def test_a_tombstone_is_unwrapped() -> None:
    hub = VolumeAttachmentHub()
    watch = hub.watch(NODE, ["pv-a"])
    hub.on_delete(DeletedFinalStateUnknown("va", attachment("pv-a", NEW_NODE)))
    assert (watch.changed.is_set(), watch.reattached.is_set()) == (True, False)


# --- pods without PVs: one pod's evictions, retries and final delete ------------------------------


def _refusing(cluster: FakeCluster, error: Any, times: int = 1000) -> list[str]:
    """Refuse evictions (``times``) with ``error()``; returns the log of evict/delete attempts."""
    attempts: list[str] = []
    left = [times]

    def evict(victim: Obj) -> None:
        attempts.append("evict")
        if left[0] > 0:
            left[0] -= 1
            raise error()

    def delete(_victim: Obj) -> None:
        attempts.append("delete")

    cluster.evict_reactor, cluster.delete_reactor = evict, delete
    return attempts


@pytest.mark.parametrize(
    ("supported", "retries", "refusals", "attempts", "action"),
    [
        (True, 3, 0, ["evict"], "evicted"),
        (True, 3, 2, ["evict", "evict", "evict"], "evicted"),
        (True, 3, 1000, ["evict", "evict", "evict", "delete"], "deleted"),  # then one delete
        (True, 1, 1000, ["evict", "delete"], "deleted"),
        (True, 0, 1000, ["delete"], "deleted"),  # no eviction attempt at all
        (False, 3, 1000, ["delete"], "deleted"),  # the API server cannot evict
    ],
)
def test_a_pod_is_evicted_until_its_attempts_are_used_then_deleted(
    supported: bool, retries: int, refusals: int, attempts: list[str], action: str
) -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    log = _refusing(cluster, too_many_requests, refusals)
    run = _run(cluster, max_evict_retries=retries, timeout=3600.0)
    run.evict_supported = supported
    with ClockDriver(run.clock):
        removed = _evict_with_retries(run, victim)
    assert log == attempts
    assert removed is not None and (removed.action, removed.pod) == (action, victim)
    assert run.clock.monotonic() - START == pytest.approx(EVICTION_RETRY_INTERVAL * (len(attempts) - 1))


@pytest.mark.parametrize(
    ("supported", "error", "left"),
    [
        (
            True,
            server_error,
            ("left", "boom", 'error when evicting pod "p": boom scheduled on node old-node'),
        ),
        (
            False,
            server_error,
            ("left", "boom", 'error when deleting pod "p": boom scheduled on node old-node'),
        ),
        (
            False,
            too_many_requests,
            ("left", "Cannot evict pod", 'error when deleting pod "p": Cannot evict pod'),
        ),
    ],
)
def test_a_failed_call_leaves_the_pod_with_upstreams_error(
    supported: bool, error: Any, left: tuple[str, ...]
) -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    _refusing(cluster, error)

    def refuse_delete(_victim: Obj) -> None:
        raise error()

    cluster.delete_reactor = refuse_delete
    run = _run(cluster)
    run.evict_supported = supported
    assert _evict_with_retries(run, victim) is None
    (outcome,) = run.tally.left()
    assert (outcome.action, outcome.reason[: len(left[1])]) == left[:2]
    assert run.tally.errors[0].startswith(left[2])


def test_a_pod_gone_before_its_eviction_is_counted_gone() -> None:
    run = _run()
    run.evict_supported = True
    assert _evict_with_retries(run, scenario_pod("p")) is None
    assert run.tally.of("gone") == ("default/p",)


def test_a_pod_behind_a_misconfigured_pdb_is_left_at_once() -> None:
    cluster = FakeCluster()
    victim = scenario_pod("db-0", labels={"app": "db"})
    cluster.add_pod(victim)
    log = _refusing(cluster, too_many_requests)
    run = _run(cluster, pdbs=(_budget("db", "db", **MISCONFIGURED),))
    run.evict_supported = True
    assert _evict_with_retries(run, victim) is None
    assert log == ["evict"]
    assert [(o.key, o.reason) for o in run.tally.left()] == [
        ("default/db-0", "misconfigured PodDisruptionBudget")
    ]


def test_no_attempt_is_made_once_the_deadline_is_over() -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    log = _refusing(cluster, too_many_requests, 0)
    run = _run(cluster, timeout=0.0)
    run.evict_supported = True
    assert _evict_with_retries(run, victim) is None
    assert log == []
    assert [(o.key, o.reason) for o in run.tally.left()] == [("default/p", LEFT_DEADLINE)]


def test_a_forced_removal_counts_each_accepted_delete_and_waits_for_nothing() -> None:
    cluster = FakeCluster()
    pods = [scenario_pod(f"p-{i}") for i in range(3)]
    for victim in pods:
        cluster.add_pod(victim)
    cluster.pods.pop("default/p-2")  # gone before its delete
    run = _run(cluster, force=True, max_parallel_evictions=0)
    remove_in_parallel(run, pods)
    assert sorted(run.tally.of("deleted")) == ["default/p-0", "default/p-1"]
    assert run.tally.of("gone") == ("default/p-2",)
    assert cluster.count("pods.get") == 0  # no termination wait


# --- run_drain: before any pod, and what it hands back ------------------------------------------


def _drain(cluster: FakeCluster, pods: list[Obj], **kw: Any) -> tuple[DrainResult, _Recorded]:
    recorded = _Recorded()
    clock = FakeClock()
    drain_listers = kw.pop("listers", None) or listers(pods)
    options = DrainOptions(**{"timeout": 600.0, "pv_reattach_timeout": 0.001, **kw.pop("options", {})})
    with ClockDriver(clock, lambda: sum(cluster.calls.values())):
        result = run_drain(
            cluster.as_client(),
            drain_listers,
            FakeDriver(),
            NODE,
            options,
            clock=clock,
            stop=threading.Event(),
            recorder=cast(EventRecorder, recorded),
            machine_ref={"kind": "Machine", "metadata": {"name": "m"}},
            **kw,
        )
    return result, recorded


def test_a_pod_cache_that_never_syncs_fails_the_drain_before_any_call() -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    never = dataclasses.replace(listers([victim]), pods_synced=lambda: False)
    result, recorded = _drain(cluster, [victim], listers=never, options={"timeout": 0.05})
    assert result.error == "timed out waiting for pod cache to sync"
    assert sum(cluster.calls.values()) == 0
    assert [reason for _, reason, _ in recorded.events] == [REASON_DRAIN_STARTED, REASON_DRAIN_FAILED]
    assert recorded.events[-1][2] == f"Drain of node {NODE!r} failed: timed out waiting for pod cache to sync"


def test_a_synced_pod_cache_lets_the_drain_go_on() -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    cluster.handlers.append(cluster.remove_pod)
    synced = dataclasses.replace(listers([victim]), pods_synced=lambda: True)
    result, recorded = _drain(cluster, [victim], listers=synced)
    assert (result.ok, result.evicted) == (True, ("default/p",))
    assert recorded.events[-1] == ("Normal", REASON_DRAIN_SUCCEEDED, f"Drain of node {NODE!r} successful")


class _Discovery:
    def __init__(self, version: str | None, resource: bool, error: Exception | None = None) -> None:
        self.version, self.resource, self.error = version, resource, error
        self.asked: list[str] = []

    def preferred_version(self, group: str) -> str | None:
        self.asked.append(f"version {group}")
        if self.error is not None:
            raise self.error
        return self.version

    def has_resource(self, group_version: str, name: str, kind: str | None = None) -> bool:
        self.asked.append(f"resource {group_version} {name} {kind}")
        return self.resource


@pytest.mark.parametrize(
    ("version", "resource", "supported", "asked"),
    [
        ("policy/v1", True, True, ["version policy", "resource v1 pods/eviction Eviction"]),
        ("policy/v1", False, False, ["version policy", "resource v1 pods/eviction Eviction"]),
        (None, True, False, ["version policy"]),  # no policy group: the eviction resource is not asked
    ],
)
def test_eviction_support_needs_the_policy_group_and_the_eviction_subresource(
    version: str | None, resource: bool, supported: bool, asked: list[str]
) -> None:
    discovery = _Discovery(version, resource)

    class Client:
        def discovery(self) -> _Discovery:
            return discovery

    assert _eviction_supported(cast(Any, Client())) is supported
    assert discovery.asked == asked


def test_without_eviction_support_every_pod_is_deleted() -> None:
    cluster = FakeCluster(eviction=False)
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    result, _ = _drain(cluster, [victim])
    assert (result.ok, result.deleted, result.evicted) == (True, ("default/p",), ())
    assert cluster.count("pods.evict.attempt") == 0


def test_a_failed_eviction_discovery_fails_the_drain_before_any_pod() -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    broken = _Discovery(None, False, server_error("discovery down"))
    cluster.discovery = lambda: broken  # type: ignore[method-assign]
    result, _ = _drain(cluster, [victim])
    assert result.error == "error discovering eviction support: discovery down"
    assert cluster.count("pods.evict.attempt") + cluster.count("pods.delete.attempt") == 0


def test_a_forced_drain_asks_no_discovery_and_deletes() -> None:
    cluster = FakeCluster()
    victim = scenario_pod("p")
    cluster.add_pod(victim)
    result, _ = _drain(cluster, [victim], options={"force": True})
    assert (result.ok, result.forced, result.deleted) == (True, True, ("default/p",))
    assert cluster.count("discovery") == 0
    assert cluster.count("pods.delete.grace0") == 1


def test_the_result_lists_warnings_and_skipped_pods_and_feeds_the_metrics() -> None:
    from prometheus_client import CollectorRegistry

    cluster = FakeCluster()
    bare = scenario_pod("bare", owner_kind=None)
    ds = scenario_pod("ds", owner_kind="DaemonSet")
    for victim in (bare, ds):
        cluster.add_pod(victim)
    cluster.handlers.append(cluster.remove_pod)
    registry = CollectorRegistry()
    result, _ = _drain(cluster, [bare, ds], metrics=DrainMetrics(registry))
    assert result.ok and result.evicted == ("default/bare",)
    assert result.skipped == ("default/ds",)
    assert result.warnings == (
        f"{UNREPLICATED_WARNING}: bare",
        f"{DAEMONSET_WARNING}: ds",
    )
    assert registry.get_sample_value("mcm_machine_drain_evicted_pods_total") == 1.0
    assert registry.get_sample_value("mcm_machine_drain_deleted_pods_total") == 0.0
    assert registry.get_sample_value("mcm_machine_drain_duration_seconds_count") == 1.0


@pytest.mark.parametrize(
    ("outcomes", "error", "timed_out"),
    [
        ([("a", "evicted", "")], None, False),
        ([("a", "left", LEFT_DEADLINE)], f"{LEFT_DEADLINE} for node {NODE!r}; pods left: default/a", True),
        (
            [("a", "left", LEFT_STOPPED), ("b", "left", LEFT_STOPPED)],
            f"{LEFT_STOPPED} for node {NODE!r}; pods left: default/a, default/b",
            False,
        ),
        ([("a", "left", "refused")], None, False),  # its own error is in the tally's errors
    ],
)
def test_pods_left_at_the_deadline_or_a_stop_are_named_in_the_error(
    outcomes: list[tuple[str, str, str]], error: str | None, timed_out: bool
) -> None:
    run = _run()
    for name, action, reason in outcomes:
        run.tally.record(scenario_pod(name), action, reason)
    result = _result(run, None)
    assert (result.error, result.timed_out) == (error, timed_out)
    assert [p.key for p in result.left_behind] == [f"default/{n}" for n, a, _ in outcomes if a == "left"]
    assert _result(run, "early").error == (f"[early, {error}]" if error else "early")


@pytest.mark.parametrize("with_stop", [False, True])
def test_a_wait_on_a_watch_returns_once_another_thread_sets_it(with_stop: bool) -> None:
    """The detach and reattach waits block on a watch's events until the hub (the informer's
    thread) sets them; a set during the wait ends it with True."""
    watch = VolumeAttachmentHub().watch(NODE, ["pv-a"], threading.Event() if with_stop else None)
    timer = threading.Timer(0.05, watch.changed.set)
    timer.start()
    try:
        assert watch.changed.wait(30) is True
    finally:
        timer.cancel()


def test_a_stop_during_a_wait_on_a_watch_ends_it() -> None:
    stop = threading.Event()
    watch = VolumeAttachmentHub().watch(NODE, ["pv-a"], stop)
    timer = threading.Timer(0.05, stop.set)
    timer.start()
    try:
        assert watch.reattached.wait(30) is True
    finally:
        timer.cancel()


@pytest.mark.parametrize("with_stop", [False, True])
def test_a_wait_on_a_watch_nothing_sets_ends_false_at_its_timeout(with_stop: bool) -> None:
    watch = VolumeAttachmentHub().watch(NODE, ["pv-a"], threading.Event() if with_stop else None)
    assert watch.changed.wait(0.12) is False
    assert watch.changed.wait(0) is False


# --- pods with PVs, one at a time ---------------------------------------------------------------


def _pv_run(s: Scenario, **changes: Any) -> tuple[DrainResult, float]:
    """``run_drain`` in a thread, bounded: a wait that never ends fails the test (its drain is
    then stopped) instead of hanging it."""
    base: dict[str, Any] = {"timeout": 600, "max_evict_retries": 3, "pv_detach_timeout": 30}
    base["pv_reattach_timeout"] = 0.001
    base.update(changes)
    stop = threading.Event()
    results: list[DrainResult] = []

    def drain() -> None:
        client, drain_listers = s.cluster.as_client(), s.listers()
        options = DrainOptions(**base)
        results.append(
            run_drain(client, drain_listers, FakeDriver(), NODE, options, clock=s.clock, stop=stop, hub=s.hub)
        )

    thread = threading.Thread(target=drain, daemon=True)
    with ClockDriver(s.clock, lambda: sum(s.cluster.calls.values())) as clock_driver:
        thread.start()
        thread.join(timeout=10)  # milliseconds when it works
        finished = not thread.is_alive()
        stop.set()  # ends a wait that never would
        thread.join(timeout=10)
    assert finished, "the drain did not end"
    return results[0], clock_driver.elapsed


def _evictions_detach(s: Scenario) -> None:
    s.cluster.handlers.append(s.delete_pod)
    s.cluster.handlers.append(s.sleep_then(0.5, "detach"))


@pytest.mark.parametrize(
    ("refusals", "evicts", "deletes", "elapsed"),
    [
        (0, 1, 0, (0.5, 5.5)),  # evicted at once, volumes detach after 0.5 s
        (2, 3, 0, (40.5, 45.5)),  # two passes refused: two 20 s pauses
        (3, 3, 1, (40.5, 45.5)),  # every pass refused: the delete pass follows without a pause
    ],
)
def test_a_pv_pod_gets_one_eviction_per_pass_then_one_delete(
    refusals: int, evicts: int, deletes: int, elapsed: tuple[float, float]
) -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    _evictions_detach(s)
    left = [refusals]

    def refuse(_pod: Obj) -> None:
        if left[0] > 0:
            left[0] -= 1
            raise too_many_requests()

    s.cluster.evict_reactor = refuse
    result, took = _pv_run(s)
    assert result.ok, result
    assert (s.cluster.count("pods.evict.attempt"), s.cluster.count("pods.delete")) == (evicts, deletes)
    assert (result.evicted, result.deleted) == (
        (("default/expv-0",), ()) if not deletes else ((), ("default/expv-0",))
    )
    assert elapsed[0] <= took < elapsed[1]


def test_a_failing_node_read_while_volumes_detach_leaves_the_pod_with_the_error() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    s.cluster.handlers.append(s.delete_pod)

    def failing(_name: str) -> None:
        raise server_error("node read failed")

    s.cluster.node_get_reactor = failing
    result, _ = _pv_run(s)
    assert [(p.key, p.reason) for p in result.left_behind] == [("default/expv-0", "node read failed")]
    assert result.error == "error waiting for PVs to detach: node read failed"
    assert not result.node_gone


def test_a_pv_pod_whose_delete_keeps_failing_is_left_with_upstreams_text() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)

    def refuse(_pod: Obj) -> None:
        raise too_many_requests()

    s.cluster.evict_reactor = refuse
    s.cluster.delete_reactor = refuse  # a 429 on the delete: retried, never done
    result, _ = _pv_run(s, max_evict_retries=1)
    assert [(p.key, p.reason) for p in result.left_behind] == [
        ("default/expv-0", "could not be evicted or deleted")
    ]
    assert result.error == 'error deleting pod default/expv-0 from node "old-node"'
    assert s.cluster.count("pods.delete.attempt") == 1


def test_pv_pods_are_handled_one_at_a_time_by_priority() -> None:
    s = build(FakeCluster(), FakeClock(), expv=3)
    for i, prio in enumerate((5, 100, -1)):
        s.pods[i]["spec"]["priority"] = prio
    _evictions_detach(s)
    order: list[str] = []
    s.cluster.evict_reactor = lambda victim: order.append(victim["metadata"]["name"])
    result, _ = _pv_run(s)
    assert result.ok, result
    assert order == ["expv-1", "expv-0", "expv-2"]


def test_without_eviction_support_pv_pods_are_deleted_in_one_pass() -> None:
    s = build(FakeCluster(eviction=False), FakeClock(), expv=2)
    s.cluster.handlers.append(s.sleep_then(0.5, "detach"))
    result, took = _pv_run(s)
    assert result.ok, result
    assert sorted(result.deleted) == ["default/expv-0", "default/expv-1"]
    assert s.cluster.count("pods.evict.attempt") == 0
    assert took < 20  # no eviction pass, no 20 s pause


def test_a_pv_pod_without_grace_period_waits_the_detach_timeout_only() -> None:
    s = build(FakeCluster(), FakeClock(), expv=1)
    del s.pods[0]["spec"]["terminationGracePeriodSeconds"]
    s.cluster.handlers.append(s.delete_pod)  # the volume never detaches
    result, took = _pv_run(s, pv_detach_timeout=30)
    assert [(p.key, p.reason) for p in result.left_behind] == [("default/expv-0", DETACH_TIMEOUT_TEXT)]
    assert 30 <= took < 31


def test_a_node_gone_at_the_deadline_leaves_the_remaining_pv_pods_as_node_gone() -> None:
    """The first reason that halts the PV path is the one its remaining pods are left with: a
    Node found gone at the very moment the deadline passes stays the reason."""
    s = build(FakeCluster(), FakeClock(), expv=2)

    def node_goes_late(victim: Obj) -> None:
        if victim["metadata"]["name"] == "expv-0":
            s.clock.sleep(9.5)
            with s.cluster.lock:
                s.cluster.nodes.pop(NODE, None)

    s.cluster.handlers.append(node_goes_late)
    result, _ = _pv_run(s, timeout=10)
    assert result.node_gone
    assert sorted((p.key, p.reason) for p in result.left_behind) == [
        ("default/expv-0", LEFT_NODE_GONE),
        ("default/expv-1", LEFT_NODE_GONE),
    ]
    assert s.cluster.count("pods.evict.attempt") == 1


# --- the wait for removed pods to terminate ------------------------------------------------------


class _PodsGet:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def get(self, name: str, *, namespace: str) -> Obj:
        if isinstance(self.answer, Exception):
            raise self.answer
        return cast(Obj, self.answer)


def test_a_removed_pod_that_cannot_be_read_is_left_with_the_error() -> None:
    run = _run()
    victim = scenario_pod("p")
    run.pods_api = _PodsGet(server_error("pods down"))
    run.wait_for_termination([Removed(victim, "evicted", run.clock.monotonic() + 60)])
    assert [(o.key, o.action, o.reason) for o in run.tally.left()] == [("default/p", "left", "pods down")]
    assert run.tally.errors == [f'error when waiting for pod "p"/{NODE} terminating: pods down']


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (new_not_found("", "pods", "p"), ("evicted", "")),  # gone
        ("replaced", ("evicted", "")),  # another pod under its name
        ("same", ("left", "timed out waiting for termination")),  # still there, its wait is over
    ],
)
def test_a_removed_pod_is_settled_by_the_api_servers_answer(answer: Any, outcome: tuple[str, str]) -> None:
    run = _run()
    victim = scenario_pod("p")
    if answer == "replaced":
        answer = scenario_pod("p")
    elif answer == "same":
        answer = victim
    run.pods_api = _PodsGet(answer)
    run.wait_for_termination([Removed(victim, "evicted", run.clock.monotonic())])
    assert [(o.action, o.reason) for o in run.tally.outcomes.values()] == [outcome]
    if outcome[0] == "left":
        assert run.tally.errors == [
            f'error when waiting for pod "p"/{NODE} terminating: timed out waiting for the condition'
        ]


def test_a_removed_pod_still_there_at_the_drain_deadline_is_left_with_the_deadline() -> None:
    run = _run(timeout=0.0)
    victim = scenario_pod("p")
    run.pods_api = _PodsGet(victim)
    run.wait_for_termination([Removed(victim, "deleted", run.clock.monotonic())])
    assert [(o.action, o.reason) for o in run.tally.outcomes.values()] == [("left", LEFT_DEADLINE)]
    assert run.tally.errors == []


@pytest.mark.parametrize("with_hub", [False, True])
def test_a_reattach_wait_nobody_answers_ends_at_its_timeout(with_hub: bool) -> None:
    """The volumes detached but no attachment elsewhere is ever seen: the pod is drained after
    the reattach timeout (a warning only), whether or not VolumeAttachment events arrive."""
    s = build(FakeCluster(), FakeClock(), expv=1)
    s.hub = VolumeAttachmentHub() if with_hub else None
    _evictions_detach(s)
    result, took = _pv_run(s, pv_reattach_timeout=5)
    assert result.ok and result.evicted == ("default/expv-0",)
    assert 5.5 <= took < 10.5

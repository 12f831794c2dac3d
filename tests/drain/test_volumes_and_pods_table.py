"""Table cases for the drain's building blocks: which volumes a pod is waited on for, what a
VolumeAttachment event means to a waiting drain, which pods are drained and the PDB rules."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from mcm.drain import DrainOptions, VolumeAttachmentHub, is_misconfigured
from mcm.drain.pods import blocking_pdb, select_pods
from mcm.drain.volumes import TrackedVolume, pod_volumes, uses_pvc
from mcm.driver import FakeDriver, GetVolumeIDsResponse
from mcm.runtime.clock import FakeClock
from mcm.runtime.objects import Obj
from tests.drain.fakes import lister
from tests.drain.scenario import NEW_NODE, NODE, attachment, pod, pv, pvc

# --- uses_pvc: which pods take the serial PV path ---------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, False),  # no volumes at all
        ({"volumes": None}, False),
        ({"volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]}, False),
        ({"volumes": [{"name": "d", "persistentVolumeClaim": {}}]}, False),  # no claim name
        (
            {
                "volumes": [
                    {"name": "tmp", "emptyDir": {}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "d"}},
                ]
            },
            True,
        ),
    ],
)
def test_uses_pvc(spec: Obj, expected: bool) -> None:
    assert uses_pvc({"metadata": {"name": "p"}, "spec": spec}) is expected


# --- pod_volumes: the driver's answer --------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (("vol-1",), [TrackedVolume("data", "vol-1")]),
        (("", "vol-2"), [TrackedVolume("data", "vol-2")]),  # an empty ID is no ID
        ((), []),  # not a volume of this provider
        (("",), []),
        ((None, 7, b"vol-3", "vol-4"), [TrackedVolume("data", "vol-4")]),  # a buggy driver: not IDs
    ],
)
def test_pod_volumes_takes_the_first_non_empty_volume_id(
    ids: tuple[Any, ...], expected: list[TrackedVolume]
) -> None:
    driver = FakeDriver()
    driver.always("get_volume_ids", lambda _ctx, _request: GetVolumeIDsResponse(volume_ids=ids))
    volumes = pod_volumes(
        [pod("p", claims=["data"])],
        lister([pvc("data")], "persistentvolumeclaim", namespaced=True),
        lister([pv("data")], "persistentvolume", namespaced=False),
        driver,
        clock=FakeClock(),
        deadline=60.0,
    )
    assert volumes == {"default/p": expected}


# --- VolumeWatch: what one VolumeAttachment event means to a waiting PV pod -----------------------


def _without_status(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k != "status"}


@pytest.mark.parametrize(
    ("event", "deleted", "changed", "reattached"),
    [
        (attachment("pv-a", NEW_NODE), False, True, True),
        (attachment("pv-a", NODE), False, True, False),  # still (or again) on the drained node
        (attachment("pv-a", NEW_NODE, attached=False), False, True, False),  # not attached yet
        (_without_status(attachment("pv-a", NEW_NODE)), False, True, False),  # just created
        (attachment("pv-a", NEW_NODE), True, True, False),  # deleted elsewhere: not attached there
        (attachment("pv-b", NEW_NODE), False, False, False),  # another pod's volume
        (attachment(None, NEW_NODE), False, False, False),  # an inline volume
    ],
)
@pytest.mark.parametrize("with_stop", [False, True])
def test_volume_attachment_events(
    event: Obj, deleted: bool, changed: bool, reattached: bool, with_stop: bool
) -> None:
    hub = VolumeAttachmentHub()
    watch = hub.watch(NODE, ["pv-a"], threading.Event() if with_stop else None)
    if deleted:
        hub.on_delete(event)
    else:
        hub.on_add(event)
    assert (watch.changed.is_set(), watch.reattached.is_set()) == (changed, reattached)


def test_reattached_needs_every_volume_of_the_pod() -> None:
    hub = VolumeAttachmentHub()
    watch = hub.watch(NODE, ["pv-a", "pv-b"], threading.Event())
    hub.on_add(attachment("pv-a", NEW_NODE))
    assert not watch.reattached.is_set()
    hub.on_update({}, attachment("pv-b", NEW_NODE))
    assert watch.reattached.is_set()
    assert watch.reattached.wait(0)


def test_a_watch_without_volumes_is_reattached_at_once() -> None:
    watch = VolumeAttachmentHub().watch(NODE, [])
    assert watch.reattached.is_set()
    assert not watch.changed.is_set()


def test_a_stopped_drain_ends_the_waits_on_its_watches() -> None:
    stop = threading.Event()
    watch = VolumeAttachmentHub().watch(NODE, ["pv-a"], stop)
    assert not watch.reattached.wait(0.01)
    stop.set()
    assert watch.changed.is_set() and watch.reattached.is_set()
    assert watch.reattached.wait(30)  # returns at once


# --- select_pods: malformed and unusual pods ------------------------------------------------------


def _owned_without_controller() -> Obj:
    p = pod("orphan", owner_kind=None)
    p["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u"}]
    return p


def _pod_without_status() -> Obj:
    p = pod("new")
    del p["status"]
    return p


@pytest.mark.parametrize(
    ("victim", "ignore_unreplicated", "drained", "warnings", "fatal"),
    [
        # an owner that is no controller leaves the pod unreplicated, as in kubectl drain
        (_owned_without_controller(), True, ["orphan"], 1, False),
        (_owned_without_controller(), False, [], 0, True),
        (_pod_without_status(), True, ["new"], 0, False),  # a pod the kubelet has not reported on yet
    ],
)
def test_select_pods_edge_cases(
    victim: Obj, ignore_unreplicated: bool, drained: list[str], warnings: int, fatal: bool
) -> None:
    selection = select_pods([victim], NODE, DrainOptions(ignore_pods_without_controllers=ignore_unreplicated))
    assert [p["metadata"]["name"] for p in selection.pods] == drained
    assert len(selection.warning_lines()) == warnings
    assert (selection.error() is not None) is fatal


# --- PodDisruptionBudgets ---------------------------------------------------------------------------


def test_a_pdb_without_spec_selects_nothing() -> None:
    pdbs = lister(
        [{"metadata": {"name": "budget", "namespace": "default"}}],
        "poddisruptionbudget",
        namespaced=True,
        group="policy",
    )
    assert blocking_pdb(pod("web-0", labels={"app": "web"}), pdbs) is None


@pytest.mark.parametrize("count", [1, 2, 3])
def test_the_first_matching_pdb_by_name_is_chosen_with_a_warning_when_several_match(count: int) -> None:
    pdbs = [
        {"metadata": {"name": f"budget-{i}", "namespace": "default"}, "spec": {"selector": {}}}
        for i in reversed(range(count))
    ]
    with capture_logs() as logs:
        chosen = blocking_pdb(
            pod("web-0"), lister(pdbs, "poddisruptionbudget", namespaced=True, group="policy")
        )
    assert chosen is not None and chosen["metadata"]["name"] == "budget-0"
    warned = [e for e in logs if e["event"] == "pod_matches_several_pdbs_first_chosen"]
    assert [(e["log_level"], e["pdb"]) for e in warned] == ([("warning", "budget-0")] if count > 1 else [])


def _pdb_status(**status: Any) -> Obj:
    return {
        "metadata": {"name": "pdb", "namespace": "default", "generation": 1},
        "status": {"observedGeneration": 1, **status},
    }


@pytest.mark.parametrize(
    ("status", "misconfigured"),
    [
        ({"expectedPods": 1, "currentHealthy": 1, "disruptionsAllowed": 0}, True),
        ({"expectedPods": 1, "currentHealthy": 1}, True),  # disruptionsAllowed omitted: zero
        ({"expectedPods": 1, "disruptionsAllowed": 0}, False),  # currentHealthy omitted: zero
        ({"currentHealthy": 1, "disruptionsAllowed": 0}, False),  # expectedPods omitted: zero
        ({"expectedPods": 1, "currentHealthy": 1, "disruptionsAllowed": 1}, False),
    ],
)
def test_misconfigured_pdb_with_omitted_zero_fields(status: Obj, misconfigured: bool) -> None:
    """The API server omits zero counts from a PDB's status; omitted means zero."""
    assert is_misconfigured(_pdb_status(**status)) is misconfigured


@pytest.mark.parametrize(
    "pdb",
    [
        {"metadata": {"name": "new", "namespace": "default", "generation": 1}},
        {"metadata": {"name": "new", "namespace": "default", "generation": 1}, "status": None},
    ],
)
def test_a_pdb_its_controller_has_not_observed_yet_is_not_misconfigured(pdb: Obj) -> None:
    """A PDB created a moment ago has no status yet: it is not misconfigured (the drain keeps
    retrying its evictions) and reading it does not fail."""
    assert is_misconfigured(pdb) is False

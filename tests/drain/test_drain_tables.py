"""The drain's rules as tables (upstream v0.47.0 ``pkg/util/provider/drain/drain.go``, with HEAD's
changes): what a drain hands back, the PDB and eviction paths, the waits for terminating pods
and for volumes. Fake cluster and FakeClock (tests/drain/fakes.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mcm.drain import DrainOptions, DrainResult
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
from mcm.drain.types import PodOutcome
from mcm.drain.volumes import TrackedVolume
from mcm.runtime.objects import Obj
from tests.drain.fakes import listers
from tests.drain.scenario import NODE
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

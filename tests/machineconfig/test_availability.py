"""Node availability as machine-config-operator counts it (``LayeredNodeState.CheckNodeReady``):
a node that cannot take workloads uses a slot of ``maxUnavailable`` whatever its config."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.nodes import OUTDATED, UPDATED, is_unavailable, node_phase, not_schedulable_reason
from mcm.machineconfig.status import count_nodes
from mcm.testing.machineconfig import node_manifest


def node(condition: dict[str, str] | None = None, *, cordoned: bool = False, current: str = "t") -> Any:
    manifest = node_manifest("n1")
    manifest["metadata"]["annotations"] = {
        api.CURRENT_CONFIG_ANNOTATION: current,
        api.DESIRED_CONFIG_ANNOTATION: current,
        api.STATE_ANNOTATION: api.STATE_DONE,
    }
    if condition is not None:
        manifest["status"]["conditions"].append(condition)
    if cordoned:
        manifest["spec"]["unschedulable"] = True
    return manifest


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        (node(), ""),
        (node({"type": "DiskPressure", "status": "False"}), ""),
        (node({"type": "NetworkUnavailable", "status": "False"}), ""),
        (node(cordoned=True), "node n1 is reporting Unschedulable"),
        (node({"type": "DiskPressure", "status": "True"}), "node n1 is reporting OutOfDisk=True"),
        (node({"type": "DiskPressure", "status": "Unknown"}), "node n1 is reporting OutOfDisk=Unknown"),
        (
            node({"type": "NetworkUnavailable", "status": "True"}),
            "node n1 is reporting NetworkUnavailable=True",
        ),
    ],
    ids=["schedulable", "no-disk-pressure", "network", "cordoned", "disk-pressure", "disk-unknown", "no-net"],
)
def test_a_node_that_cannot_take_workloads_is_unavailable_whatever_its_config(
    manifest: Any, reason: str
) -> None:
    assert not_schedulable_reason(manifest) == reason
    phase = node_phase(manifest, "t")
    assert phase == UPDATED  # it runs the target and is Ready
    assert is_unavailable(manifest, phase) is bool(reason)
    counts = count_nodes([manifest], "t")
    assert (counts.updated, counts.unavailable, counts.all_updated) == (1, int(bool(reason)), not reason)


def test_a_cordoned_outdated_node_is_unavailable_and_not_ready_is_named() -> None:
    cordoned = node(cordoned=True, current="old")
    assert node_phase(cordoned, "t") == OUTDATED and is_unavailable(cordoned, OUTDATED)
    not_ready = node_manifest("n2", ready=False)
    assert not_schedulable_reason(not_ready) == "node n2 is reporting NotReady=False"
    without_conditions = {"metadata": {"name": "n3"}, "status": {}}
    assert not_schedulable_reason(without_conditions) == "node n3 is reporting NotReady=Unknown"

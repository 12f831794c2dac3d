"""The MachineSet and MachineDeployment CRDs have the status and scale subresources and
upstream v0.47.0's printer columns (``kubernetes/crds/``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mcm.emulator.cluster import default_crd_dir

UPSTREAM_COLUMNS = {
    "machinesets": [
        ("Desired", ".spec.replicas"),
        ("Current", ".status.replicas"),
        ("Ready", ".status.readyReplicas"),
        ("Age", ".metadata.creationTimestamp"),
    ],
    "machinedeployments": [
        ("Ready", ".status.readyReplicas"),
        ("Desired", ".spec.replicas"),
        ("Up-to-date", ".status.updatedReplicas"),
        ("Available", ".status.availableReplicas"),
        ("Age", ".metadata.creationTimestamp"),
    ],
}


def _version(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((default_crd_dir() / f"machine.sapcloud.io_{plural}.yaml").read_text())
    versions: list[dict[str, Any]] = crd["spec"]["versions"]
    return next(v for v in versions if v["name"] == "v1alpha1")


@pytest.mark.parametrize("plural", sorted(UPSTREAM_COLUMNS))
def test_printer_columns_are_upstream_s(plural: str) -> None:
    columns = [(c["name"], c["jsonPath"]) for c in _version(plural)["additionalPrinterColumns"]]
    assert columns == UPSTREAM_COLUMNS[plural]


@pytest.mark.parametrize("plural", sorted(UPSTREAM_COLUMNS))
def test_status_and_scale_subresources(plural: str) -> None:
    subresources = _version(plural)["subresources"]
    assert subresources["status"] == {}
    assert subresources["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
    }

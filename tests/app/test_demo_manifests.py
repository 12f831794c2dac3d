"""The demo builds its objects from the packaged manifests, which examples/manifests/ mirrors for
users byte for byte; ``--machines N`` picks or extends the Machines of the file; the
MachineDeployment is applied at its own step and rolls to the other class."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from mcm import packaged
from mcm.app.demo import (
    CLASS_NAME,
    MANIFESTS,
    _apply_target_manifests,
    demo_objects,
    manifests,
    pool_manifest,
)
from mcm.emulator import Emulator
from mcm.runtime.client import load_config
from mcm.runtime.client.resources import POD_DISRUPTION_BUDGETS, PODS

REPO = Path(__file__).resolve().parents[2]


def _file_objects(cluster: str) -> list[dict[str, object]]:
    directory = REPO / "examples" / "manifests" / cluster
    return [d for f in sorted(directory.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def test_the_demo_reads_the_files_users_apply() -> None:
    assert manifests("control") == _file_objects("control")
    assert manifests("target") == _file_objects("target")
    kinds = [o["kind"] for o in manifests("control")]
    assert kinds == ["Secret", "MachineClass", "MachineClass", *["Machine"] * 5, "MachineDeployment"]
    assert sorted(o["kind"] for o in manifests("target")) == ["Pod", "Pod", "PodDisruptionBudget"]


def test_the_examples_are_mirrors_of_the_packaged_manifests() -> None:
    """``hack/sync-packaged.py --check`` (tests/test_packaged.py) compares every mirror it lists;
    the demo's manifests must stay on that list."""
    spec = importlib.util.spec_from_file_location("sync_packaged", REPO / "hack" / "sync-packaged.py")
    assert spec is not None and spec.loader is not None
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    mirrors = {(source, mirror) for source, mirror, _ in sync.MIRRORS}
    for cluster in ("control", "target"):
        assert (f"mcm/{MANIFESTS}/{cluster}", f"examples/manifests/{cluster}") in mirrors
        assert packaged.path(f"{MANIFESTS}/{cluster}") == REPO / "mcm" / MANIFESTS / cluster


def _machines(count: int) -> list[dict[str, object]]:
    return [o for _, o in demo_objects(count) if o["kind"] == "Machine"]


def test_machines_takes_the_first_n_of_the_file_and_names_more_like_the_first() -> None:
    from_file = [o for o in manifests("control") if o["kind"] == "Machine"]
    assert _machines(2) == from_file[:2]
    seven = _machines(7)
    assert [m["metadata"]["name"] for m in seven] == [f"demo-machine-{i}" for i in range(1, 8)]
    assert seven[:5] == from_file
    assert all(m["spec"] == from_file[0]["spec"] for m in seven[5:])


def test_boot_delay_overrides_the_classes_and_the_rest_stays_as_in_the_file() -> None:
    objects = [o for _, o in demo_objects(2, boot_delay=0.2)]
    classes = [o for o in objects if o["kind"] == "MachineClass"]
    assert [c["metadata"]["name"] for c in classes] == ["local-small", "local-large"]
    assert all(c["providerSpec"]["bootDelaySeconds"] == 0.2 for c in classes)
    from_file = [o for o in manifests("control") if o["kind"] in ("MachineClass", "Secret")]
    assert [o.get("providerSpec", {}).get("bootDelaySeconds") for o in from_file] == [None, 2, 2]
    assert objects[0] == from_file[0]  # the Secret


def test_the_machine_deployment_waits_for_its_step_and_rolls_to_the_other_class() -> None:
    """``demo_objects`` leaves the MachineDeployment out (the demo creates it once the machine
    story is told); its selector picks its template's machines and none of the plain Machines."""
    assert "MachineDeployment" not in {o["kind"] for _, o in demo_objects(7)}
    deployment, other = pool_manifest()
    spec = deployment["spec"]
    assert (deployment["metadata"]["name"], spec["replicas"], other) == ("demo-pool", 2, "local-large")
    assert spec["template"]["spec"]["class"] == {"kind": "MachineClass", "name": CLASS_NAME}
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    machines = [o for o in manifests("control") if o["kind"] == "Machine"]
    assert all(m["spec"]["class"]["name"] == CLASS_NAME for m in machines)
    assert not any(selector.items() <= (m["metadata"].get("labels") or {}).items() for m in machines)


def test_with_one_machine_there_is_no_workload(emulator: Emulator, kubeconfig: str) -> None:
    """``--machines 1``: the web workload's second pod would have no Node (and its budget would
    then block the drain of the first), so the demo applies none of it."""
    target = load_config(kubeconfig)
    try:
        assert _apply_target_manifests(target, ["demo-machine-1"], timeout=5) is False
        assert target.resource(PODS).list(namespace="default")["items"] == []
        assert target.resource(POD_DISRUPTION_BUDGETS).list(namespace="default")["items"] == []
    finally:
        target.close()

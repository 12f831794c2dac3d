"""Both managers write the same objects: the same scenario (create 2 machines, scale to 3,
roll them to another class, scale to 1) runs once with upstream's Go manager and once with
mcm's, each on mcm's machine controller, and what each left behind is compared: the
MachineDeployment's annotations, finalizers and status, every MachineSet (name,
machine-template-hash, labels, annotations, owner references, finalizers, spec, status) and
Machine (labels, annotations, owner references, finalizers, generateName, spec), and the Events
on the MachineDeployment and MachineSets (type, reason, message, source).

Values are compared as Go reads them: a field that is absent equals its zero value (upstream's
types omit empty numbers and write empty structs), and times, UIDs, resourceVersions, machine
names (random) and the sizes of single scaling steps (timing) are left out. The deployment's
``metadata.generation`` is left out too: upstream's manager rewrites the whole
MachineDeployment when it adds its finalizer (its typed object adds
``spec.template.spec.nodeTemplate: {metadata: {}, spec: {}}`` and drops ``minReadySeconds: 0``),
which bumps the generation; mcm's adds the finalizer alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mcm.runtime import objects as o

from .env import NS, InteropEnv, Upstream, eventually, machine_deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LEFT_OUT = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "lastUpdateTime",
    "lastTransitionTime",
    "generation",
    "observedGeneration",
}
MACHINE_NAME = re.compile(r"\bpool-[0-9bcdfghjklmnpqrstvwxz]{5}-[0-9a-z]{5}\b")
SCALED_TO = re.compile(r" to \d+$")


def event_message(message: str) -> str:
    """``message`` without machine names (random) and scaling targets (how many machines a step
    scales depends on how many became Running together)."""
    return SCALED_TO.sub(" to <n>", MACHINE_NAME.sub("<machine>", message))


def as_go_reads_it(value: Any) -> Any:
    """``value`` without zero values (absent = zero for Go) and without the fields left out."""
    if isinstance(value, dict):
        kept = {k: as_go_reads_it(v) for k, v in value.items() if k not in LEFT_OUT}
        return {k: v for k, v in kept.items() if v not in (None, 0, "", {}, [], False)}
    if isinstance(value, list):
        return [as_go_reads_it(v) for v in value]
    return value


def snapshot(env: InteropEnv) -> dict[str, Any]:
    deployment = env.deployment()
    machines = sorted(
        (
            as_go_reads_it(
                {
                    "metadata": {
                        **{k: v for k, v in o.meta(m).items() if k not in ("name", "labels")},
                        "labels": {k: v for k, v in o.labels_of(m).items() if k != "node"},
                    },
                    "spec": {k: v for k, v in m["spec"].items() if k != "providerID"},
                }
            )
            for m in env.all_machines()
        ),
        key=repr,
    )
    events = {
        (
            e.get("type"),
            e["involvedObject"]["kind"],
            e.get("reason"),
            event_message(e.get("message", "")),
            (e.get("source") or {}).get("component"),
        )
        for e in env.events()
        if e["involvedObject"]["kind"] in ("MachineDeployment", "MachineSet")
    }
    return {
        "deployment": as_go_reads_it(
            {"metadata": {k: o.meta(deployment).get(k) for k in ("annotations", "labels", "finalizers")}}
            | {"status": deployment["status"]}
        ),
        "generation observed": o.meta(deployment).get("generation")
        == deployment["status"]["observedGeneration"],
        "machine sets": {o.name_of(s): as_go_reads_it(s) for s in env.all_sets()},
        "machines": machines,
        "events": sorted(events, key=repr),
    }


def run(tmp_path: Path, upstream: Upstream, manager: str) -> dict[str, Any]:
    env = InteropEnv(tmp_path / manager, upstream)
    try:
        env.start_controller("mcm")
        env.start_manager(manager)
        env.deployments.create(machine_deployment(replicas=2), namespace=NS)
        eventually(lambda: env.settled(2), what=f"2 Running machines\n{env.logs()}")
        env.scale(3)
        eventually(lambda: env.settled(3), what=f"scaled to 3\n{env.logs()}")
        env.roll_to("class-b")
        eventually(lambda: env.settled(3, "class-b"), what=f"rolled to class-b\n{env.logs()}")
        env.scale(1)
        eventually(lambda: env.settled(1, "class-b"), what=f"scaled to 1\n{env.logs()}")
        # the last condition and old-set annotations are written a pass after the last machine
        # is Running
        eventually(
            lambda: any(c.get("reason") == "NewMachineSetAvailable" for c in o.conditions(env.deployment())),
            what="Progressing: NewMachineSetAvailable",
        )
        return snapshot(env)
    finally:
        env.close()


def test_both_managers_write_the_same_objects(tmp_path: Path, upstream: Upstream) -> None:
    pytest.importorskip("mcm.manager", reason="mcm's manager (mcm.manager) is not in this tree")
    go = run(tmp_path, upstream, "go")
    mcm = run(tmp_path, upstream, "mcm")
    assert list(go["machine sets"]) == list(mcm["machine sets"]), "same names, so same hashes"
    for key in go:
        assert mcm[key] == go[key], key

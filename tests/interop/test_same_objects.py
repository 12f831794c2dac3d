"""Both managers write the same objects: the same scenario (create 2 machines, scale to 3,
roll them to another class, scale to 1) runs once with upstream's Go manager and once with
mcm's, each on upstream's machine controller (which writes ``status.node`` as well as the
``node`` label, so both managers find the Nodes), and what each left behind is compared: the
MachineDeployment's annotations, finalizers and status, every MachineSet (name,
machine-template-hash, labels, annotations, owner references, finalizers, spec, status) and
Machine (labels, annotations, owner references, finalizers, generateName, spec), the taints and
annotations the managers put on Nodes, and the Events on the MachineDeployment and MachineSets
(type, reason, message, source). They are compared twice, each time once nothing has changed
for a second: in the middle of the roll-out (held at its first new machines, which do not boot
until released) and at the end.

Values are compared as Go reads them: a field that is absent equals its zero value (upstream's
types omit empty numbers and write empty structs), and times, UIDs, resourceVersions, machine
names (random) and the sizes of single scaling steps (timing) are left out. The deployment's
``metadata.generation`` is left out too: upstream's manager rewrites the whole
MachineDeployment when it adds its finalizer (its typed object adds
``spec.template.spec.nodeTemplate: {metadata: {}, spec: {}}`` and drops ``minReadySeconds: 0``),
which bumps the generation; mcm's adds the finalizer alone.

In the middle of the roll-out, counts are left out (replicas, the number of machines and nodes,
the Progressing condition's reason and message): upstream's passes right after it creates the
new set update that set from a stale copy and fail with conflicts, and the pass that follows
works from caches that lag behind, so how far it goes depends on timing. It has scaled the new
set to 2 or 3 at once, beyond maxSurge 1, and its deployment status has gone from the old set's
``updatedReplicas: 3`` straight to the new set's count, which its progress check does not count
as progress, so Progressing keeps ``NewMachineSetCreated`` ("Created new machine set ..."). mcm
creates exactly one surge machine, writes the intermediate ``updatedReplicas: 0`` and then
reports ``MachineSetUpdated`` ("MachineSet ... is progressing."), as upstream's check intends.
For the same reason every Event mcm's manager records by then is one upstream's records, but
upstream's may have recorded more. At the end, mcm's manager has removed the cluster-autoscaler
annotations it put on the Nodes during the roll-out; upstream's removes them only in a pass that
starts after the roll-out is complete, which may be its periodic one, 10 minutes later.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from mcm.runtime import objects as o

from .env import HASH_LABEL, NS, InteropEnv, Upstream, eventually, machine_deployment, node_name

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
        "nodes": nodes(env),
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


NODE_KEYS = ("cluster-autoscaler.kubernetes.io/", "deployment.machine.sapcloud.io/")


def nodes(env: InteropEnv) -> list[Any]:
    """Per Node of a machine: its set's hash, and the managers' annotations and taints (the
    emulator's node lifecycle taints come and go with time)."""
    owners = {node_name(m): o.label(m, HASH_LABEL) for m in env.all_machines()}
    found = []
    for node in env.nodes.list()["items"]:
        if o.name_of(node) not in owners:
            continue
        annotations = {k: v for k, v in o.annotations_of(node).items() if k.startswith(NODE_KEYS)}
        taints = sorted(
            (t["key"], t.get("value"), t["effect"])
            for t in node["spec"].get("taints") or []
            if t["key"].startswith(NODE_KEYS)
        )
        found.append((owners[o.name_of(node)], tuple(sorted(annotations.items())), tuple(taints)))
    return sorted(found, key=repr)


def stable(env: InteropEnv) -> dict[str, Any]:
    """A snapshot that stays the same for a second: the manager has nothing left to do."""
    previous: list[dict[str, Any]] = [snapshot(env)]

    def unchanged() -> dict[str, Any] | None:
        time.sleep(1.0)
        current = snapshot(env)
        same = current == previous[0]
        previous[0] = current
        return current if same else None

    found: dict[str, Any] = eventually(unchanged, what=f"a quiet moment\n{env.logs()}")
    return found


DURING = "during the roll-out"
AT_THE_END = "at the end"
COUNTS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas")


def without_counts(found: dict[str, Any]) -> dict[str, Any]:
    """``found`` without what depends on how far upstream's roll-out got (see the module
    docstring): replica counts, the Progressing condition's reason and message, and how many
    machines and nodes look alike."""
    status = found["deployment"].get("status", {})
    for key in COUNTS:
        status.pop(key, None)
    for condition in status.get("conditions", []):
        if condition["type"] == "Progressing":
            condition.pop("reason", None)
            condition.pop("message", None)
    for machine_set in found["machine sets"].values():
        machine_set.get("spec", {}).pop("replicas", None)
        for key in ("fullyLabeledReplicas", *COUNTS):
            machine_set.get("status", {}).pop(key, None)
    found["machines"] = sorted({repr(m): m for m in found["machines"]}.values(), key=repr)
    found["nodes"] = sorted(set(found["nodes"]), key=repr)
    return found


def run(tmp_path: Path, upstream: Upstream, manager: str) -> dict[str, Any]:
    env = InteropEnv(tmp_path / manager, upstream)
    try:
        env.start_controller("go")
        env.start_manager(manager)
        env.deployments.create(machine_deployment(replicas=2), namespace=NS)
        eventually(lambda: env.settled(2), what=f"2 Running machines\n{env.logs()}")
        env.scale(3)
        eventually(lambda: env.settled(3), what=f"scaled to 3\n{env.logs()}")
        stable(env)  # every annotation of the scale-up written before the roll-out starts
        env.vms.hold()  # the roll-out stops at its first new machine, Pending
        env.roll_to("class-b")
        eventually(
            lambda: any(o.text(m, "spec", "class", "name") == "class-b" for m in env.all_machines()),
            what=f"the roll-out's first machine\n{env.logs()}",
        )
        during = without_counts(stable(env))
        env.vms.release()
        eventually(lambda: env.settled(3, "class-b"), what=f"rolled to class-b\n{env.logs()}")
        env.scale(1)
        eventually(lambda: env.settled(1, "class-b"), what=f"scaled to 1\n{env.logs()}")
        # the last condition and old-set annotations are written a pass after the last machine
        # is Running
        eventually(
            lambda: any(c.get("reason") == "NewMachineSetAvailable" for c in o.conditions(env.deployment())),
            what="Progressing: NewMachineSetAvailable",
        )
        return {DURING: during, AT_THE_END: snapshot(env)}
    finally:
        env.close()


def test_both_managers_write_the_same_objects(tmp_path: Path, upstream: Upstream) -> None:
    go = run(tmp_path, upstream, "go")
    mcm = run(tmp_path, upstream, "mcm")
    for moment in go:
        assert list(go[moment]["machine sets"]) == list(mcm[moment]["machine sets"]), "same names and hashes"
        for key in go[moment]:
            if moment == DURING and key == "events":
                assert set(mcm[moment][key]) <= set(go[moment][key]), f"{moment}: {key}"
            elif moment == AT_THE_END and key == "nodes":
                assert [n[::2] for n in mcm[moment][key]] == [n[::2] for n in go[moment][key]], key
                assert all(annotations == () for _, annotations, _ in mcm[moment][key])
            else:
                assert mcm[moment][key] == go[moment][key], f"{moment}: {key}"

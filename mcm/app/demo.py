"""``machine-controller demo``: mcm working end to end on a fresh machine, in about a minute.

Starts a control and a target API server emulator (``python -m mcm.emulator serve`` processes),
installs the Machine CRDs, applies the example manifests of the control cluster (a Secret, two
MachineClasses of the local provider, N Machines), runs ``machine-controller --driver=local``
and ``machine-controller-manager`` as processes, and shows a live table of the machines until
all are Running. Then it applies the target cluster's manifests (two pods of a web workload, one
on each of the first two machines' Nodes, under a PodDisruptionBudget; none with
``--machines 1``), deletes the first machine and shows its drain, the VM deletion and the Node
removal. Then the MachineDeployment of the manifests (:mod:`mcm.app.demopool`): created, scaled
up, rolled to the other class, a Node lost and the pool healed, scaled to 0, with
``kubectl get machinedeployments,machinesets`` columns at each step. It exits 0 with a summary
(1 with the reason if a step does not finish in time). ``--keep`` creates the
MachineDeployment, stops before the deletion and leaves everything running until Ctrl-C or
SIGTERM, printing the kubeconfig paths and the ``/metrics`` URLs of the controller and the
manager.

The objects come from the package's manifests (``mcm/app/manifests/``, mirrored for users in
the repository's ``examples/manifests/``): ``control/*.yaml`` in file order (the
MachineDeployment at its step), then ``target/*.yaml``. ``--machines N`` creates the first N
Machines of ``control/03-machines.yaml``; past its five, more like its first one, named
``demo-machine-6`` ... ``demo-machine-N``.

Everything runs as child processes of the demo and stops with it (see :mod:`mcm.app.demokit`
for interrupts, exit codes and the work directory).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from mcm import packaged
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS, MACHINES
from mcm.app.demokit import (
    DemoFailed,
    Processes,
    Screen,
    Terminated,
    _free_port,
    _say,
    _start_emulator,
    _stop_on_signals,
    _wait,
    _workdir,
    keep_running,
    run_demo_command,
)
from mcm.app.demopool import Pool
from mcm.driver.local import DEFAULT_NAMESPACE, VM_LABEL
from mcm.runtime.client import ClusterClient, ListOptions, load_config
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.client.resources import (
    CONFIG_MAPS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    Resource,
)

# The shared pieces are re-exported: machine-config-controller's demo imports them from here.
__all__ = [
    "CLASS_NAME",
    "DemoFailed",
    "Processes",
    "Screen",
    "Terminated",
    "_free_port",
    "_start_emulator",
    "_stop_on_signals",
    "_wait",
    "_workdir",
    "demo",
    "demo_objects",
    "keep_running",
    "manifests",
    "pool_manifest",
]

NAMESPACE = "default"
MANIFESTS = "app/manifests"
"""The demo's manifests inside the package (:func:`mcm.packaged.path`)."""
CLASS_NAME = "local-small"
"""The class of the manifests' Machines and of the MachineDeployment's first template."""

_RESOURCES: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r
    for r in (SECRETS, PODS, POD_DISRUPTION_BUDGETS, MACHINE_CLASSES, MACHINES, MACHINE_DEPLOYMENTS)
}


# --- the manifests ------------------------------------------------------------------------------


def manifests(cluster: str) -> list[dict[str, Any]]:
    """The objects of ``<package>/app/manifests/<cluster>/*.yaml`` (``control`` or ``target``),
    files in name order, documents in file order."""
    directory = packaged.path(f"{MANIFESTS}/{cluster}")
    objects: list[dict[str, Any]] = []
    for file in sorted(directory.glob("*.yaml")):
        objects += [doc for doc in yaml.safe_load_all(file.read_text(encoding="utf-8")) if doc]
    return objects


def demo_objects(count: int, boot_delay: float | None = None) -> list[tuple[Resource, dict[str, Any]]]:
    """The control cluster's objects but the MachineDeployment, with ``count`` Machines (see the
    module docstring), each with its resource; ``boot_delay`` overrides the classes'
    ``providerSpec.bootDelaySeconds``."""
    objects = [o for o in manifests("control") if o["kind"] != "MachineDeployment"]
    machines = [o for o in objects if o["kind"] == "Machine"]
    others = [o for o in objects if o["kind"] != "Machine"]
    if boot_delay is not None:
        for machine_class in (o for o in others if o["kind"] == "MachineClass"):
            machine_class.setdefault("providerSpec", {})["bootDelaySeconds"] = boot_delay
    wanted = machines[:count] + [_copy_named(machines[0], i) for i in range(len(machines) + 1, count + 1)]
    return [(_resource_of(o), o) for o in others + wanted]


def pool_manifest() -> tuple[dict[str, Any], str]:
    """The manifests' MachineDeployment and the class it rolls to: the first other class."""
    objects = manifests("control")
    deployment = next(o for o in objects if o["kind"] == "MachineDeployment")
    first = deployment["spec"]["template"]["spec"]["class"]["name"]
    other = next(
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "MachineClass" and o["metadata"]["name"] != first
    )
    return deployment, other


def _copy_named(machine: dict[str, Any], number: int) -> dict[str, Any]:
    """``machine`` renamed: its name's trailing number replaced by ``number``."""
    named = copy.deepcopy(machine)
    named["metadata"]["name"] = f"{machine['metadata']['name'].rsplit('-', 1)[0]}-{number}"
    return named


def _resource_of(obj: dict[str, Any]) -> Resource:
    try:
        return _RESOURCES[(obj["apiVersion"], obj["kind"])]
    except KeyError:
        raise DemoFailed(f"the demo's manifests hold a {obj['kind']} it cannot create") from None


# --- what the demo shows ------------------------------------------------------------------------


class _DeletionWatch:
    """What changed since the last look at a deleting machine: its lastOperation, its node's
    cordon, the pods left on the node, the VM record and the Node."""

    def __init__(
        self, control: ClusterClient, target: ClusterClient, machine: str, node: str, old_description: str
    ) -> None:
        self.control, self.target, self.machine, self.node = control, target, machine, node
        self.old_description = old_description
        """The machine's lastOperation before its deletion (its "joined" text): not a deletion step."""
        self.last: dict[str, str] = {}
        self.machine_gone = False

    def _facts(self) -> dict[str, str]:
        machines = {m["metadata"]["name"]: m for m in _list(self.control, MACHINES, NAMESPACE)}
        machine = machines.get(self.machine)
        self.machine_gone = machine is None
        description = _description(machine or {})
        nodes = {n["metadata"]["name"]: n for n in _list(self.target, NODES)}
        node = nodes.get(self.node)
        pods = [p for p in _list(self.target, PODS, "default") if p["spec"].get("nodeName") == self.node]
        return {
            "machine": f"machine {self.machine}: deleted"
            if machine is None
            else ""
            if description == self.old_description
            else f"machine {self.machine}: {description or '-'}",
            "cordon": f"node {self.node}: cordoned"
            if (node or {}).get("spec", {}).get("unschedulable")
            else "",
            "pods": f"pods on {self.node}: {len(pods)}",
            "vm": ""
            if _exists(self.control, CONFIG_MAPS, self.machine, DEFAULT_NAMESPACE)
            else f"VM {self.machine}: deleted",
            "node": "" if node is not None else f"node {self.node}: removed",
        }

    def changes(self) -> list[str]:
        facts = self._facts()
        new = [text for key, text in facts.items() if text and self.last.get(key) != text]
        self.last = facts
        return new


def _description(machine: dict[str, Any]) -> str:
    return str(((machine.get("status") or {}).get("lastOperation") or {}).get("description") or "")


def _age(created: str | None) -> str:
    if not created:
        return "-"
    start = time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    return f"{max(0, int(time.time() - start))}s"


def _table(machines: list[dict[str, Any]]) -> list[str]:
    rows = [("NAME", "PHASE", "NODE", "AGE", "LAST OPERATION")]
    for m in sorted(machines, key=lambda m: m["metadata"]["name"]):
        status = m.get("status") or {}
        rows.append(
            (
                m["metadata"]["name"],
                (status.get("currentStatus") or {}).get("phase") or "-",
                (m["metadata"].get("labels") or {}).get("node") or "-",
                _age(m["metadata"].get("creationTimestamp")),
                _description(m),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=False)) + "  " + r[4] for r in rows]


def _list(
    client: ClusterClient, resource: Any, namespace: str | None = None, selector: str | None = None
) -> list[dict[str, Any]]:
    try:
        items: list[dict[str, Any]] = (
            client.resource(resource)
            .list(ListOptions(label_selector=selector), namespace=namespace)
            .get("items")
            or []
        )
    except (ApiError, ConnectionFailed):
        return []
    return items


def _exists(client: ClusterClient, resource: Any, name: str, namespace: str | None = None) -> bool:
    try:
        client.resource(resource).get(name, namespace=namespace)
    except NotFound:
        return False
    return True


def _running(machines: list[dict[str, Any]], count: int) -> bool:
    phases = [((m.get("status") or {}).get("currentStatus") or {}).get("phase") for m in machines]
    return len(phases) == count and all(p == "Running" for p in phases)


# --- the steps ----------------------------------------------------------------------------------


@dataclass
class _Clusters:
    """The control and target emulators: their kubeconfig paths and clients."""

    control_cfg: Path
    target_cfg: Path
    control: ClusterClient
    target: ClusterClient

    def close(self) -> None:
        self.control.close()
        self.target.close()


@dataclass
class _Children:
    """The controller and the manager: their processes and ``/metrics`` URLs."""

    workdir: Path
    controller: subprocess.Popen[bytes]
    controller_metrics: str
    manager: subprocess.Popen[bytes]
    manager_metrics: str

    def check(self) -> None:
        """Raise :class:`DemoFailed` if either has exited."""
        for name, child in (
            ("machine-controller", self.controller),
            ("machine-controller-manager", self.manager),
        ):
            if child.poll() is not None:
                raise DemoFailed(f"{name} exited; see {self.workdir / f'{name}.log'}")


def run_demo(count: int, keep: bool, workdir: Path, timeout: float) -> dict[str, Any]:
    """The demo's steps; returns the summary, raises :class:`DemoFailed`. Whatever happens
    (failure, Ctrl-C, SIGTERM), the child processes are stopped before it returns or raises."""
    procs = Processes(workdir)
    started = time.monotonic()
    try:
        clusters = _start_clusters(procs)
        _apply_control_manifests(clusters.control, count)
        children = _start_children(procs, clusters)
        _wait_all_running(children, clusters.control, count, timeout)
        up = time.monotonic() - started
        _say(f"all {count} machines Running after {up:.1f}s")
        _apply_target_manifests(clusters.target, _node_names(clusters.target), timeout)
        manifest, other_class = pool_manifest()
        pool = Pool(clusters.control, clusters.target, manifest, timeout, alive=children.check)
        if keep:
            pool.create()
            _keep(clusters, children, procs, pool, other_class)
            return {"machines": count, "running_after_seconds": round(up, 1)}
        name, node, description = _delete_first_machine(clusters)
        seen = _watch_deletion(clusters, name, node, description, timeout)
        _check_nothing_left(clusters, name, node)
        story = pool.story(other_class)
        summary = _summarise(
            clusters, count=count, up=up, name=name, seen=seen, pool=story, total=time.monotonic() - started
        )
        clusters.close()
        return summary
    finally:
        procs.stop_all()


def _start_clusters(procs: Processes) -> _Clusters:
    _say("starting a control and a target cluster (API server emulators)")
    control_cfg = _start_emulator(procs, "control", packaged.machine_crds())
    target_cfg = _start_emulator(procs, "target", None, ["--run-pods"])
    control = load_config(str(control_cfg), qps=-1)
    target = load_config(str(target_cfg), qps=-1)
    return _Clusters(control_cfg, target_cfg, control, target)


def _apply_control_manifests(control: ClusterClient, count: int) -> None:
    objects = demo_objects(count)
    names = [o["metadata"]["name"] for _, o in objects if o["kind"] == "MachineClass"]
    kind, their = ("MachineClasses", "their") if len(names) > 1 else ("MachineClass", "its")
    _say(f"creating {kind} {', '.join(names)}, {their} Secret and {count} Machines")
    for resource, body in objects:
        control.resource(resource).create(body, namespace=NAMESPACE)


def _start_children(procs: Processes, clusters: _Clusters) -> _Children:
    """``machine-controller`` (local provider) and ``machine-controller-manager``, each serving
    ``/metrics`` on a port of its own."""
    kubeconfigs = [
        f"--control-kubeconfig={clusters.control_cfg}",
        f"--target-kubeconfig={clusters.target_cfg}",
        f"--namespace={NAMESPACE}",
        "--leader-elect=false",
        "--address=127.0.0.1",
        "--log-format=text",
    ]
    port = _free_port()
    controller_metrics = f"http://127.0.0.1:{port}/metrics"
    _say(f"running machine-controller --driver=local (metrics: {controller_metrics})")
    controller = procs.spawn(
        "machine-controller",
        [
            *(sys.executable, "-m", "mcm.app.cli", *kubeconfigs, f"--port={port}", "--driver=local"),
            *("--machine-creation-timeout=5m", "--machine-drain-timeout=2m"),
        ],
    )
    port = _free_port()
    manager_metrics = f"http://127.0.0.1:{port}/metrics"
    _say(f"running machine-controller-manager beside it (metrics: {manager_metrics})")
    manager = procs.spawn(
        "machine-controller-manager",
        [sys.executable, "-m", "mcm.app.manager.cli", *kubeconfigs, f"--port={port}"],
    )
    return _Children(procs.workdir, controller, controller_metrics, manager, manager_metrics)


def _wait_all_running(children: _Children, control: ClusterClient, count: int, timeout: float) -> None:
    """Shows the machine table until all ``count`` machines are Running; fails if the
    controller or the manager exits."""
    screen = Screen()

    def all_running() -> bool:
        children.check()
        machines = _list(control, MACHINES, NAMESPACE)
        screen.show(_table(machines))
        return _running(machines, count)

    _wait("all machines to be Running", all_running, timeout, interval=0.5)


def _apply_target_manifests(target: ClusterClient, nodes: list[str], timeout: float) -> bool:
    """Creates the workload and waits until its pods run and its budget allows a disruption;
    skips it (``False``) when a pod's Node is not among ``nodes``: ``--machines 1``."""
    objects = [(_resource_of(o), o) for o in manifests("target")]
    pods = [o for _, o in objects if o["kind"] == "Pod"]
    missing = sorted({p["spec"]["nodeName"] for p in pods} - set(nodes))
    if missing:
        _say(f"no web workload: its pods need the Nodes {', '.join(missing)} too (--machines 2 or more)")
        return False
    budgets = [o["metadata"]["name"] for _, o in objects if o["kind"] == "PodDisruptionBudget"]
    placed = ", ".join(f"{p['metadata']['name']} on {p['spec']['nodeName']}" for p in pods)
    _say(f"starting pods {placed} under PodDisruptionBudget {', '.join(budgets)}")
    for resource, body in objects:
        target.resource(resource).create(body, namespace=NAMESPACE)

    def ready() -> bool:
        phases = [(p.get("status") or {}).get("phase") for p in _list(target, PODS, NAMESPACE)]
        allowed = [
            int((b.get("status") or {}).get("disruptionsAllowed") or 0)
            for b in _list(target, POD_DISRUPTION_BUDGETS, NAMESPACE)
        ]
        return phases.count("Running") >= len(pods) and all(a > 0 for a in allowed)

    _wait("the web pods to run", ready, timeout)
    return True


def _node_names(target: ClusterClient) -> list[str]:
    return [n["metadata"]["name"] for n in _list(target, NODES)]


def _delete_first_machine(clusters: _Clusters) -> tuple[str, str, str]:
    """Deletes the first machine; returns it, its node and its lastOperation description before
    the deletion."""
    victim = sorted(_list(clusters.control, MACHINES, NAMESPACE), key=lambda m: m["metadata"]["name"])[0]
    name = victim["metadata"]["name"]
    node = (victim["metadata"].get("labels") or {}).get("node") or name
    pods = [
        p["metadata"]["name"]
        for p in _list(clusters.target, PODS, NAMESPACE)
        if p["spec"].get("nodeName") == node
    ]
    _say(f"deleting machine {name}: its node {node} runs {', '.join(pods) or 'no pods'}")
    clusters.control.resource(MACHINES).delete(name, namespace=NAMESPACE)
    return name, node, _description(victim)


def _watch_deletion(clusters: _Clusters, name: str, node: str, before: str, timeout: float) -> list[str]:
    """Prints each deletion step as it happens until the machine is gone; returns the steps seen.
    ``before`` is the machine's description before the deletion, which is not a step."""
    seen: list[str] = []
    watch = _DeletionWatch(clusters.control, clusters.target, name, node, before)

    def deleted() -> bool:
        for line in watch.changes():
            seen.append(line)
            click.echo(f"    {line}")
        return watch.machine_gone

    _wait(f"machine {name} to be deleted", deleted, timeout, interval=0.1)
    return seen


def _check_nothing_left(clusters: _Clusters, name: str, node: str) -> None:
    """Raises :class:`DemoFailed` if pods on the node, the VM or the Node outlived the machine."""
    pods_left = [
        p["metadata"]["name"]
        for p in _list(clusters.target, PODS, NAMESPACE)
        if p["spec"].get("nodeName") == node
    ]
    vm_left = _exists(clusters.control, CONFIG_MAPS, name, DEFAULT_NAMESPACE)
    node_left = _exists(clusters.target, NODES, node)
    if pods_left or vm_left or node_left:
        raise DemoFailed(f"deleting {name} left pods={pods_left} vm={vm_left} node={node_left}")


def _summarise(
    clusters: _Clusters,
    *,
    count: int,
    up: float,
    name: str,
    seen: list[str],
    pool: dict[str, Any],
    total: float,
) -> dict[str, Any]:
    """Counts what remains, prints the closing line and returns the summary."""
    vms = len(_list(clusters.control, CONFIG_MAPS, DEFAULT_NAMESPACE, VM_LABEL))
    nodes = len(_list(clusters.target, NODES))
    running = sorted(
        p["metadata"]["name"]
        for p in _list(clusters.target, PODS, NAMESPACE)
        if (p.get("status") or {}).get("phase") == "Running"
    )
    summary = {
        "machines_created": count,
        "running_after_seconds": round(up, 1),
        "deleted": name,
        "deletion_steps": seen,
        "pool": pool,
        "vms_left": vms,
        "nodes_left": nodes,
        "pods_running": running,
        "total_seconds": round(total, 1),
    }
    _say(
        f"done in {total:.1f}s: {count} machines went Running, {name} was drained and deleted; "
        f"{pool['name']} grew to {pool['replicas']}, rolled from {' to '.join(pool['rolled'])}, "
        f"replaced {pool['lost']} and went to 0; {vms} VMs and {nodes} nodes remain, pods still "
        f"running: {', '.join(running) or 'none'}"
    )
    return summary


def _keep(clusters: _Clusters, children: _Children, procs: Processes, pool: Pool, other_class: str) -> None:
    """Print where everything is and wait for Ctrl-C or SIGTERM (or a child to exit)."""
    patch = json.dumps(
        {"spec": {"template": {"spec": {"class": {"name": other_class}}}}}, separators=(",", ":")
    )
    control = f"kubectl --kubeconfig {clusters.control_cfg}"
    click.echo("")
    click.echo("Everything keeps running:")
    click.echo(f"  control cluster kubeconfig: {clusters.control_cfg}")
    click.echo(f"  target cluster kubeconfig:  {clusters.target_cfg}")
    click.echo(f"  controller metrics:         {children.controller_metrics}")
    click.echo(f"  manager metrics:            {children.manager_metrics}")
    click.echo(f"  logs:                       {procs.workdir}")
    hints = [
        f"{control} get mc,mcc",
        f"{control} get machinedeployments,machinesets",
        f"{control} get events",
        f"kubectl --kubeconfig {clusters.target_cfg} get nodes,pods,pdb",
        f"{control} delete machine demo-machine-1   # and watch its drain",
        f"{control} scale machinedeployment {pool.name} --replicas=3",
        f"{control} patch machinedeployment {pool.name} --type=merge -p '{patch}'   # a rolling update",
        f"curl -s {children.controller_metrics} | grep ^mcm_",
    ]
    keep_running(hints, procs)


# --- the command --------------------------------------------------------------------------------


@click.command()
@click.option(
    "--machines",
    "count",
    type=click.IntRange(1, 50),
    default=5,
    show_default=True,
    help="How many machines to create (the web workload needs 2: a pod on each of the first two).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Create the MachineDeployment, stop before the deletion and leave the clusters, the "
    "controller and the manager running; print the kubeconfig paths. The work directory is kept.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for kubeconfigs and logs (default: a temporary one, removed at the end unless --keep).",
)
@click.option("--timeout", type=float, default=90.0, show_default=True, help="Seconds each phase may take.")
@click.option(
    "--summary-json",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the summary as JSON here.",
)
def demo(count: int, keep: bool, workdir: str | None, timeout: float, summary_json: str | None) -> int:
    """Show mcm end to end: emulated clusters, the local provider, machines going Running, a
    drain, and a MachineDeployment scaled, rolled, healed and scaled to 0 by the manager."""
    return run_demo_command(lambda path: run_demo(count, keep, path, timeout), workdir, keep, summary_json)

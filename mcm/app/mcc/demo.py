"""``machine-config-controller demo``: a configuration rolled out over two pools, live.

Starts an API server emulator (``python -m mcm.emulator serve``) with the MachineConfig CRDs,
creates ControllerConfig ``machine-config-controller``, pools ``master`` (2 nodes,
``maxUnavailable: 1``) and ``worker`` (4 nodes, ``maxUnavailable: 2``), runs the simulated
daemons of the 6 nodes (``python -m mcm.testing.machineconfig``: drain, apply, reboot) and
``machine-config-controller`` itself as processes. It waits for the first rollout, then applies
a MachineConfig to each pool and shows a table of the nodes (current and desired config, daemon
state, readiness) as they change, checking each pool's ``maxUnavailable`` on every refresh. It
exits 0 with a summary (1 with the reason if a step does not finish in time); ``--keep`` leaves
everything running and prints the kubeconfig path for ``kubectl get machinepools``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from mcm import packaged
from mcm.app.demokit import (
    DemoFailed,
    Processes,
    Screen,
    _free_port,
    _start_emulator,
    _wait,
    keep_running,
    run_demo_command,
)
from mcm.machineconfig import api
from mcm.machineconfig.ignition import data_url
from mcm.machineconfig.nodes import is_unavailable, node_phase
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import ApiError, ConnectionFailed
from mcm.runtime.client.resources import NODES

__all__ = ["demo"]

POOLS = {"master": (2, 1), "worker": (4, 2)}
"""pool → (nodes, maxUnavailable)."""
ROOT_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmRlbW8KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="


@dataclass
class _Rollout:
    """What the demo saw of one pool during the rollout."""

    limit: int
    started: float = 0.0
    finished: float = 0.0
    max_unavailable: int = 0
    target: str = ""
    history: list[str] = field(default_factory=list)


def _say(text: str) -> None:
    click.echo(click.style(f"==> {text}", bold=True))


def _objects() -> list[tuple[Any, dict[str, Any]]]:
    controller_config = {
        "apiVersion": api.API_VERSION,
        "kind": "ControllerConfig",
        "metadata": {"name": api.CONTROLLER_CONFIG_NAME},
        "spec": {"clusterDNSIP": "10.96.0.10", "rootCAData": ROOT_CA, "osImageURL": "registry.local/os:1.0"},
    }
    objects: list[tuple[Any, dict[str, Any]]] = [(api.CONTROLLER_CONFIGS, controller_config)]
    for pool, (count, limit) in POOLS.items():
        role = {f"node-role.kubernetes.io/{pool}": ""}
        objects.append(
            (
                api.MACHINE_POOLS,
                {
                    "apiVersion": api.API_VERSION,
                    "kind": "MachinePool",
                    "metadata": {"name": pool, "labels": {"pool": pool}},
                    "spec": {
                        "machineConfigSelector": {"matchLabels": {api.ROLE_LABEL: pool}},
                        "machineSelector": {"matchLabels": role},
                        "maxUnavailable": limit,
                    },
                },
            )
        )
        for index in range(count):
            objects.append((NODES, _node(f"{pool}-{index}", role)))
    return objects


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"conditions": [ready], "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }


def _motd(pool: str) -> dict[str, Any]:
    text = f"Welcome to a {pool} of the mcm demo, configured by machine-config-controller.\n"
    return {
        "apiVersion": api.API_VERSION,
        "kind": "MachineConfig",
        "metadata": {"name": f"50-{pool}-motd", "labels": {api.ROLE_LABEL: pool}},
        "spec": {
            "config": {
                "ignition": {"version": "3.2.0"},
                "storage": {
                    "files": [{"path": "/etc/motd", "mode": 420, "contents": {"source": data_url(text)}}]
                },
            },
            "kernelArguments": ["audit=1"],
        },
    }


def _short(config: str) -> str:
    return config[:22] if config else "-"


def _pool_of(node: dict[str, Any]) -> str:
    return next((p for p in POOLS if f"node-role.kubernetes.io/{p}" in api.labels_of(node)), "-")


def _table(nodes: list[dict[str, Any]], pools: dict[str, dict[str, Any]]) -> list[str]:
    rows = [("NODE", "POOL", "CURRENT", "DESIRED", "STATE", "READY", "SCHED")]
    for node in sorted(nodes, key=lambda n: (_pool_of(n), api.name_of(n))):
        notes = api.annotations_of(node)
        ready = next(
            (
                c.get("status")
                for c in api.status_of(node).get("conditions") or []
                if c.get("type") == "Ready"
            ),
            "?",
        )
        rows.append(
            (
                api.name_of(node),
                _pool_of(node),
                _short(notes.get(api.CURRENT_CONFIG_ANNOTATION, "")),
                _short(notes.get(api.DESIRED_CONFIG_ANNOTATION, "")),
                notes.get(api.STATE_ANNOTATION, "-"),
                "Ready" if ready == "True" else "NotReady",
                "no" if api.spec_of(node).get("unschedulable") else "yes",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    for name, pool in sorted(pools.items()):
        status = api.status_of(pool)
        lines.append(
            f"pool {name}: config {_short(str(status.get('currentMachineConfig') or ''))} "
            f"updated {status.get('updatingMachines', 0)}/{status.get('machineCount', 0)}, "
            f"unavailable {status.get('unavailableMachines', 0)} (max {POOLS[name][1]})"
        )
    return lines


def _snapshot(client: ClusterClient) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    try:
        nodes = client.resource(NODES).list()["items"]
        pools = {api.name_of(p): p for p in client.resource(api.MACHINE_POOLS).list()["items"]}
    except (ApiError, ConnectionFailed):
        return [], {}
    return nodes, pools


def _all_updated(pools: dict[str, dict[str, Any]], targets: dict[str, str]) -> bool:
    for name, (count, _) in POOLS.items():
        status = api.status_of(pools.get(name) or {})
        if targets.get(name) and status.get("currentMachineConfig") != targets[name]:
            return False
        updated = any(
            c.get("type") == api.POOL_UPDATED and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if not updated or status.get("updatingMachines") != count or not status.get("currentMachineConfig"):
            return False
    return True


class _Watcher:
    """Refreshes the table and records per pool the unavailable nodes seen on each refresh."""

    def __init__(self, client: ClusterClient, controller: Any, workdir: Path) -> None:
        self.client, self.controller, self.workdir = client, controller, workdir
        self.screen = Screen()
        self.rollouts = {name: _Rollout(limit) for name, (_, limit) in POOLS.items()}

    def until_updated(self, targets: dict[str, str], timeout: float) -> dict[str, dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}

        def check() -> bool:
            if self.controller.poll() is not None:
                raise DemoFailed(
                    f"machine-config-controller exited; see {self.workdir / 'machine-config-controller.log'}"
                )
            nodes, pools = _snapshot(self.client)
            self.screen.show(_table(nodes, pools))
            self._record(nodes)
            seen.update(pools)
            return _all_updated(pools, targets)

        _wait("the pools to be updated", check, timeout, interval=0.25)
        return seen

    def _record(self, nodes: list[dict[str, Any]]) -> None:
        for name, rollout in self.rollouts.items():
            mine = [n for n in nodes if _pool_of(n) == name]
            down = sum(1 for n in mine if is_unavailable(n, node_phase(n, "")))
            rollout.max_unavailable = max(rollout.max_unavailable, down)
            if down > rollout.limit:
                raise DemoFailed(
                    f"pool {name} had {down} nodes unavailable, more than maxUnavailable {rollout.limit}"
                )


def run_demo(keep: bool, workdir: Path, timeout: float) -> dict[str, Any]:
    """The demo's steps; returns the summary, raises :class:`DemoFailed`."""
    procs = Processes(workdir)
    started = time.monotonic()
    try:
        _say("starting an API server emulator with the MachineConfig CRDs")
        kubeconfig = _start_emulator(procs, "cluster", packaged.machineconfig_crds())
        client = load_config(str(kubeconfig), qps=-1)
        _say(
            "creating ControllerConfig machine-config-controller, pools master (2 nodes) and worker (4 nodes)"
        )
        for resource, body in _objects():
            client.resource(resource).create(body)
        _start_daemons(procs, kubeconfig)
        controller = _start_controller(procs, kubeconfig)
        watcher = _Watcher(client, controller, workdir)
        _say("waiting for the first rollout (templates rendered, every node configured)")
        first = watcher.until_updated({}, timeout)
        before = {name: str(api.status_of(pool).get("currentMachineConfig")) for name, pool in first.items()}
        watcher.rollouts = {name: _Rollout(limit) for name, (_, limit) in POOLS.items()}
        _say("applying MachineConfigs 50-master-motd and 50-worker-motd (/etc/motd, kernel argument audit=1)")
        applied = time.monotonic()
        for pool in POOLS:
            client.resource(api.MACHINE_CONFIGS).create(_motd(pool))
        targets = _wait_new_targets(client, before, timeout)
        watcher.until_updated(targets, timeout)
        rollout_seconds = time.monotonic() - applied
        summary = _summary(watcher, targets, rollout_seconds, time.monotonic() - started)
        if keep:
            _keep(kubeconfig, workdir, procs)
        client.close()
        return summary
    finally:
        _stop_clients_first(procs)
        procs.stop_all()


CLIENTS = ("machine-config-controller", "machine-config-daemons")
"""The demo's processes that talk to the API server, stopped (in this order) before it."""
_INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop_clients_first(procs: Processes) -> None:
    """SIGTERM the controller, then the daemons, each waited for, with interrupts held back: the
    controller releases its Lease and the daemons end their watches while the API server still
    answers (stopping everything at once ended every run with ``failed_to_release_lock``)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        for wanted in CLIENTS:
            for name, child in procs.children:
                if name != wanted or child.poll() is not None:
                    continue
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(20)
                except subprocess.TimeoutExpired:
                    log_hint = procs.workdir / f"{name}.log"
                    click.echo(f"warning: {name} did not stop within 20s (see {log_hint})", err=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _start_daemons(procs: Processes, kubeconfig: Path) -> None:
    _say("starting the simulated machine-config daemons (drain, apply 1.5 s, reboot 1 s)")
    ready = procs.workdir / "daemons.ready"
    ready.unlink(missing_ok=True)
    args = [sys.executable, "-m", "mcm.testing.machineconfig", "--kubeconfig", str(kubeconfig)]
    args += ["--apply-seconds", "1.5", "--reboot-seconds", "1", "--ready-file", str(ready)]
    child = procs.spawn("machine-config-daemons", args)
    _wait("the daemons", lambda: ready.exists() or child.poll() is not None, 30)
    if child.poll() is not None:
        raise DemoFailed(f"the daemons exited; see {procs.workdir / 'machine-config-daemons.log'}")


def _start_controller(procs: Processes, kubeconfig: Path) -> Any:
    _say("running machine-config-controller")
    return procs.spawn(
        "machine-config-controller",
        [
            sys.executable,
            "-m",
            "mcm.app.mcc.cli",
            f"--kubeconfig={kubeconfig}",
            "--address=127.0.0.1",
            f"--port={_free_port()}",
            "--render-delay=1s",
            "--log-format=text",
        ],
    )


def _wait_new_targets(client: ClusterClient, before: dict[str, str], timeout: float) -> dict[str, str]:
    targets: dict[str, str] = {}

    def rendered() -> bool:
        for name, pool in _snapshot(client)[1].items():
            target = str(api.status_of(pool).get("currentMachineConfig") or "")
            if target and target != before.get(name):
                if name not in targets:
                    click.echo(f"    pool {name} now targets {target}")
                targets[name] = target
        return set(targets) == set(POOLS)

    _wait("the new rendered configs", rendered, timeout)
    return targets


def _summary(watcher: _Watcher, targets: dict[str, str], rollout: float, total: float) -> dict[str, Any]:
    pools = {
        name: {
            "nodes": POOLS[name][0],
            "maxUnavailable": r.limit,
            "maxUnavailableSeen": r.max_unavailable,
            "config": targets[name],
        }
        for name, r in watcher.rollouts.items()
    }
    for name, info in pools.items():
        click.echo(
            f"    {name}: {info['nodes']} nodes on {info['config']}, at most {info['maxUnavailableSeen']} "
            f"unavailable at once (maxUnavailable {info['maxUnavailable']})"
        )
    _say(f"done in {total:.1f}s: the new configs reached all 6 nodes in {rollout:.1f}s within maxUnavailable")
    return {"pools": pools, "rollout_seconds": round(rollout, 1), "total_seconds": round(total, 1)}


def _keep(kubeconfig: Path, workdir: Path, procs: Processes) -> None:
    """Print where everything is and wait for Ctrl-C or SIGTERM (or a child to exit)."""
    click.echo("")
    click.echo("Everything keeps running:")
    click.echo(f"  kubeconfig: {kubeconfig}")
    click.echo(f"  logs:       {workdir}")
    keep_running([f"kubectl --kubeconfig {kubeconfig} get machinepools,machineconfigs,nodes"], procs)


@click.command()
@click.option("--keep", is_flag=True, help="Leave the emulator, daemons and controller running.")
@click.option(
    "--workdir", type=click.Path(file_okay=False), default=None, help="Directory for the kubeconfig and logs."
)
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds each phase may take.")
@click.option(
    "--summary-json", type=click.Path(dir_okay=False), default=None, help="Also write the summary as JSON."
)
def demo(keep: bool, workdir: str | None, timeout: float, summary_json: str | None) -> int:
    """Show a MachineConfig rolled out over 6 simulated nodes in 2 pools, within maxUnavailable."""
    return run_demo_command(lambda path: run_demo(keep, path, timeout), workdir, keep, summary_json)

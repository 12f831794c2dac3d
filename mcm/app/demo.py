"""``machine-controller demo``: mcm working end to end on a fresh machine, in under a minute.

Starts a control and a target API server emulator (``python -m mcm.emulator serve`` processes),
installs the Machine CRDs, creates a MachineClass of the local provider, its Secret and N
Machines, runs ``machine-controller --driver=local`` as a process, and shows a live table of the
machines until all are Running. Then it puts pods on one machine's node, deletes that machine and
shows its drain, the VM deletion and the Node removal, and exits 0 with a summary (1 with the
reason if a step does not finish in time). ``--keep`` leaves everything running until Ctrl-C or
SIGTERM and prints the kubeconfig paths and the controller's ``/metrics`` URL.

Everything runs as child processes of the demo and stops with it, on success, failure, Ctrl-C,
SIGTERM or SIGHUP; logs go to ``--workdir``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import click

from mcm import packaged
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.apis.machine.v1alpha1 import API_VERSION
from mcm.driver.local import DEFAULT_NAMESPACE, VM_LABEL
from mcm.runtime.client import ClusterClient, ListOptions, load_config
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.client.resources import CONFIG_MAPS, NODES, PODS, SECRETS

__all__ = ["DemoFailed", "Processes", "Screen", "demo", "keep_running"]

NAMESPACE = "default"
CLASS_NAME = "local-small"


@dataclass
class Processes:
    """Child processes, stopped in reverse order on exit."""

    workdir: Path
    children: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a child and register it; an interrupt meanwhile is acted on once it is
        registered, so :meth:`stop_all` always sees every child that was started."""
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop_all
        self.logs.append(log)
        with _interrupts_deferred():
            child = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
            self.children.append((name, child))
        return child

    def stop_all(self) -> None:
        """SIGTERM every child, wait for each (SIGKILL after 15 s); a second Ctrl-C or SIGTERM
        meanwhile is held back until all are gone, so none is left running."""
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            for _, child in reversed(self.children):
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for _, child in reversed(self.children):
                try:
                    child.wait(15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            for log in self.logs:
                log.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back for the block: the first that arrives is raised
    again, to its own handler, when the block ends (main thread only). Without it, an interrupt
    while ``Popen`` waits for the exec leaves the new child running, unknown to the demo."""
    arrived: list[int] = []

    def remember(signum: int, _frame: FrameType | None) -> None:
        arrived.append(signum)

    previous = _set_handlers(dict.fromkeys(_INTERRUPTS, remember))
    try:
        yield
    finally:
        _set_handlers(previous)
    if arrived:
        signal.raise_signal(arrived[0])


def _set_handlers(handlers: dict[signal.Signals, Any]) -> dict[signal.Signals, Any]:
    """Install ``handlers`` with the signals blocked meanwhile; returns the ones replaced."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        replaced = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    # None: a handler not installed from Python, which cannot be put back; the default is.
    return {sig: signal.SIG_DFL if handler is None else handler for sig, handler in replaced.items()}


class DemoFailed(Exception):
    """A step did not finish; the message says which and where the logs are."""


def _wait(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise DemoFailed(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _start_emulator(procs: Processes, name: str, crds: Path | None) -> Path:
    kubeconfig = procs.workdir / f"{name}.kubeconfig"
    ready = procs.workdir / f"{name}.ready.json"
    ready.unlink(missing_ok=True)
    args = [sys.executable, "-m", "mcm.emulator", "serve", "--name", name, "--kubeconfig", str(kubeconfig)]
    args += ["--ready-file", str(ready), "--admin-port", "-1"]
    if crds is not None:
        args += ["--crds", str(crds)]
    child = procs.spawn(f"{name}-emulator", args)
    _wait(f"the {name} emulator", lambda: ready.exists() or child.poll() is not None, 30)
    if child.poll() is not None:
        raise DemoFailed(f"the {name} emulator exited; see {procs.workdir / f'{name}-emulator.log'}")
    return kubeconfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_objects(count: int, boot_delay: float) -> list[tuple[Any, dict[str, Any]]]:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "local-userdata", "namespace": NAMESPACE},
        "stringData": {"userData": "#!/bin/sh\necho hello from the local provider\n"},
    }
    machine_class = {
        "apiVersion": API_VERSION,
        "kind": "MachineClass",
        "metadata": {"name": CLASS_NAME, "namespace": NAMESPACE},
        "provider": "local",
        "providerSpec": {"bootDelaySeconds": boot_delay},
        "nodeTemplate": {
            "capacity": {"cpu": "2", "gpu": "0", "memory": "4Gi", "pods": "110"},
            "instanceType": "local.small",
            "region": "local",
            "zone": "local-a",
        },
        "secretRef": {"name": "local-userdata", "namespace": NAMESPACE},
    }
    machines = [
        {
            "apiVersion": API_VERSION,
            "kind": "Machine",
            "metadata": {"name": f"demo-machine-{i}", "namespace": NAMESPACE},
            "spec": {"class": {"kind": "MachineClass", "name": CLASS_NAME}},
        }
        for i in range(1, count + 1)
    ]
    return [(SECRETS, secret), (MACHINE_CLASSES, machine_class), *((MACHINES, m) for m in machines)]


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


class Screen:
    """Redraws the table in place on a terminal; elsewhere prints it when a row changes (ages
    aside). Lines are never cut: on a terminal, a line wider than it takes several rows and the
    redraw moves up by rows, not lines."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.last: list[str] = []
        self.last_key: list[str] = []
        self.rows = 0

    def show(self, lines: list[str]) -> None:
        key = [re.sub(r"\s\d+s\s", " ", line) for line in lines]
        if lines == self.last or (not self.tty and key == self.last_key):
            return
        if self.tty and self.last:
            sys.stdout.write(f"\x1b[{self.rows}F\x1b[J")
        elif self.last:
            sys.stdout.write("\n")
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        width = max(1, shutil.get_terminal_size().columns)
        self.rows = sum(max(1, -(-len(line) // width)) for line in lines)
        self.last, self.last_key = lines, key


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


def _pods_for(node: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"web-{i}", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "web", "image": "nginx"}],
            },
        }
        for i in (1, 2)
    ]


@contextlib.contextmanager
def _workdir(path: str | None, keep: bool) -> Iterator[Path]:
    """The given directory, or a temporary one removed after a successful run without ``--keep``."""
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path)
        return
    tmp = Path(tempfile.mkdtemp(prefix="mcm-demo-"))
    yield tmp
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)


def _say(text: str) -> None:
    click.echo(click.style(f"==> {text}", bold=True))


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


def run_demo(count: int, keep: bool, workdir: Path, timeout: float) -> dict[str, Any]:
    """The demo's steps; returns the summary, raises :class:`DemoFailed`. Whatever happens
    (failure, Ctrl-C, SIGTERM), the child processes are stopped before it returns or raises."""
    procs = Processes(workdir)
    started = time.monotonic()
    try:
        clusters = _start_clusters(procs)
        _create_demo_objects(clusters.control, count)
        controller, metrics_url = _start_controller(procs, clusters)
        _wait_all_running(controller, clusters.control, count, workdir, timeout)
        up = time.monotonic() - started
        _say(f"all {count} machines Running after {up:.1f}s")
        if keep:
            _keep(clusters, metrics_url, workdir, procs)
            return {"machines": count, "running_after_seconds": round(up, 1)}
        name, node, description = _delete_first_machine(clusters)
        seen = _watch_deletion(clusters, name, node, description, timeout)
        _check_nothing_left(clusters, name, node)
        summary = _summarise(
            clusters, count=count, up=up, name=name, seen=seen, total=time.monotonic() - started
        )
        clusters.close()
        return summary
    finally:
        procs.stop_all()


def _start_clusters(procs: Processes) -> _Clusters:
    _say("starting a control and a target cluster (API server emulators)")
    control_cfg = _start_emulator(procs, "control", packaged.machine_crds())
    target_cfg = _start_emulator(procs, "target", None)
    control = load_config(str(control_cfg), qps=-1)
    target = load_config(str(target_cfg), qps=-1)
    return _Clusters(control_cfg, target_cfg, control, target)


def _create_demo_objects(control: ClusterClient, count: int) -> None:
    _say(f"creating MachineClass {CLASS_NAME}, its Secret and {count} Machines")
    for resource, body in demo_objects(count, boot_delay=2.0):
        control.resource(resource).create(body, namespace=NAMESPACE)


def _start_controller(procs: Processes, clusters: _Clusters) -> tuple[subprocess.Popen[bytes], str]:
    """The controller process and the URL of its ``/metrics``."""
    port = _free_port()
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    _say(f"running machine-controller --driver=local (metrics: {metrics_url})")
    child = procs.spawn(
        "machine-controller",
        [
            sys.executable,
            "-m",
            "mcm.app.cli",
            f"--control-kubeconfig={clusters.control_cfg}",
            f"--target-kubeconfig={clusters.target_cfg}",
            f"--namespace={NAMESPACE}",
            "--driver=local",
            "--leader-elect=false",
            "--address=127.0.0.1",
            f"--port={port}",
            "--log-format=text",
            "--machine-creation-timeout=5m",
            "--machine-drain-timeout=2m",
        ],
    )
    return child, metrics_url


def _wait_all_running(
    controller: subprocess.Popen[bytes], control: ClusterClient, count: int, workdir: Path, timeout: float
) -> None:
    """Shows the machine table until all ``count`` machines are Running; fails if the controller exits."""
    screen = Screen()

    def all_running() -> bool:
        if controller.poll() is not None:
            raise DemoFailed(f"machine-controller exited; see {workdir / 'machine-controller.log'}")
        machines = _list(control, MACHINES, NAMESPACE)
        screen.show(_table(machines))
        return _running(machines, count)

    _wait("all machines to be Running", all_running, timeout, interval=0.5)


def _delete_first_machine(clusters: _Clusters) -> tuple[str, str, str]:
    """Puts two pods on the first machine's node and deletes that machine; returns the machine,
    its node and its lastOperation description before the deletion."""
    victim = sorted(_list(clusters.control, MACHINES, NAMESPACE), key=lambda m: m["metadata"]["name"])[0]
    name = victim["metadata"]["name"]
    node = (victim["metadata"].get("labels") or {}).get("node") or name
    _say(f"node {node} runs pods web-1 and web-2; deleting machine {name}")
    for pod in _pods_for(node):
        clusters.target.resource(PODS).create(pod, namespace="default")
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
        for p in _list(clusters.target, PODS, "default")
        if p["spec"].get("nodeName") == node
    ]
    vm_left = _exists(clusters.control, CONFIG_MAPS, name, DEFAULT_NAMESPACE)
    node_left = _exists(clusters.target, NODES, node)
    if pods_left or vm_left or node_left:
        raise DemoFailed(f"deleting {name} left pods={pods_left} vm={vm_left} node={node_left}")


def _summarise(
    clusters: _Clusters, *, count: int, up: float, name: str, seen: list[str], total: float
) -> dict[str, Any]:
    """Counts what remains, prints the closing line and returns the summary."""
    vms = len(_list(clusters.control, CONFIG_MAPS, DEFAULT_NAMESPACE, VM_LABEL))
    nodes = len(_list(clusters.target, NODES))
    summary = {
        "machines_created": count,
        "running_after_seconds": round(up, 1),
        "deleted": name,
        "deletion_steps": seen,
        "vms_left": vms,
        "nodes_left": nodes,
        "total_seconds": round(total, 1),
    }
    _say(
        f"done in {total:.1f}s: {count} machines went Running, {name} was drained and deleted, "
        f"{vms} VMs and {nodes} nodes remain"
    )
    return summary


def _keep(clusters: _Clusters, metrics_url: str, workdir: Path, procs: Processes) -> None:
    """Print where everything is and wait for Ctrl-C or SIGTERM (or a child to exit)."""
    click.echo("")
    click.echo("Everything keeps running:")
    click.echo(f"  control cluster kubeconfig: {clusters.control_cfg}")
    click.echo(f"  target cluster kubeconfig:  {clusters.target_cfg}")
    click.echo(f"  controller metrics:         {metrics_url}")
    click.echo(f"  logs:                       {workdir}")
    hints = [
        f"kubectl --kubeconfig {clusters.control_cfg} get mc,mcc",
        f"kubectl --kubeconfig {clusters.control_cfg} get events",
        f"kubectl --kubeconfig {clusters.target_cfg} get nodes",
        f"curl -s {metrics_url} | grep ^mcm_",
    ]
    keep_running(hints, procs)


def keep_running(hints: list[str], procs: Processes) -> None:
    """``--keep``: print what to try from another terminal, then wait for Ctrl-C or SIGTERM (or a
    child to exit); the caller stops the children."""
    click.echo("From another terminal:")
    for hint in hints:
        click.echo(f"  {hint}")
    click.echo("Press Ctrl-C to stop.")
    try:
        while all(child.poll() is None for _, child in procs.children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: the demo stops as on Ctrl-C, stopping its child processes."""


def _stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP interrupt the demo like Ctrl-C (the default would end it at once,
    leaving its emulators and controller running)."""

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        raise Terminated(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


@click.command()
@click.option(
    "--machines",
    "count",
    type=click.IntRange(1, 50),
    default=5,
    show_default=True,
    help="How many machines to create.",
)
@click.option(
    "--keep", is_flag=True, help="Leave the clusters and the controller running; print the kubeconfig paths."
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for kubeconfigs and logs (default: a temporary one).",
)
@click.option("--timeout", type=float, default=90.0, show_default=True, help="Seconds each phase may take.")
@click.option(
    "--summary-json",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the summary as JSON here.",
)
def demo(count: int, keep: bool, workdir: str | None, timeout: float, summary_json: str | None) -> int:
    """Show mcm end to end: emulated clusters, the local provider, machines going Running, a drain."""
    _stop_on_signals()
    with _workdir(workdir, keep) as path:
        try:
            summary = run_demo(count, keep, path, timeout)
        except (DemoFailed, ApiError, ConnectionFailed) as exc:
            click.echo(f"error: {exc} (logs in {path})", err=True)
            raise SystemExit(1) from None
    if summary_json:
        Path(summary_json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0

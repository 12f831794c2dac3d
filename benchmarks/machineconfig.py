"""MachineConfigController benchmark: ``benchmarks/machineconfig.py [--nodes 1000] [--smoke]``.

One pool of N nodes (default 1,000) with ``maxUnavailable`` N/10 (100), simulated daemons that
apply a config in 1 s (no drain work, no reboot), and one new MachineConfig: how long until every
node runs the new rendered config, against the ideal of 10 waves of 1 s (10 s). Three processes:
the API server emulator (with a request log), the daemons (``python -m mcm.testing.machineconfig
--no-events``) and ``machine-config-controller`` itself (``--render-delay=0s``,
``--leader-elect=false``, ``--kube-api-qps=500 --kube-api-burst=1000``: at 100 nodes a second the
default 20 qps would be the bottleneck). The nodes start updated to the pool's first rendered
config, so the measured rollout is the only one.

Figures: rollout time (from the MachineConfig's creation until the pool reports all nodes
updated) beside the ideal, and beside a same-run yardstick: a minimal controller in this process
(watch the nodes, patch ``desiredConfig`` of as many as ``maxUnavailable`` allows; no pools, no
status, no Events) rolling the same nodes out with the same daemons after the controller stopped,
which shows how much of the time is the controller's and how much the loaded machine's; the
controller's CPU seconds and share of one core during the rollout, and the emulator's and the
daemons' (from ``/proc``: an emulator near one core is a saturated harness, since it serves
every request on one interpreter); the controller's API writes per node (POST/PUT/PATCH/DELETE
with its user agent in the emulator's request log, Events included), with the breakdown; and the
most nodes seen unavailable at once by a watch in this process (must not exceed
``maxUnavailable``; the watch runs through the yardstick's rollout too, so both pay for it).
Targets: rollout within 1.5x the ideal and at most 3 controller writes per node.

``--profile DIR`` attaches ``py-spy`` to the controller, the emulator and the daemons during the
rollout (collapsed stacks of the thread holding the GIL, ``DIR/<process>.txt``; summarise them
with ``benchmarks/profile_summary.py``).
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from _report import Report, at_most, equals, ratio_at_most  # noqa: E402

from mcm import packaged  # noqa: E402
from mcm.machineconfig import api  # noqa: E402
from mcm.machineconfig.ignition import data_url  # noqa: E402
from mcm.machineconfig.nodes import UNAVAILABLE_PHASES, node_phase  # noqa: E402
from mcm.runtime import logs  # noqa: E402
from mcm.runtime.client import ClusterClient, load_config  # noqa: E402
from mcm.runtime.client.resources import NODES  # noqa: E402
from mcm.testing.machineconfig import controller_config, node_manifest  # noqa: E402

CRDS = packaged.machineconfig_crds()
ROLE = {"node-role.kubernetes.io/worker": ""}
CONTROLLER_AGENT = "machine-config-controller"
MINIMAL_AGENT = "mcc-benchmark-yardstick"
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
STEP_PARTS = {
    "react": "slot freed -> next desiredConfig patch",
    "daemon_start": "desiredConfig patch -> daemon working",
    "daemon_apply": "daemon working -> done (apply time included)",
}
_PATH = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/([^/?]+)(?:/[^/?]+)?(?:/([^/?]+))?")
Obj = dict[str, Any]


class Children:
    """Child processes, terminated in reverse order."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("wb")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait(what: str, check: Any, timeout: float, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Unavailable:
    """A node watch that records the most pool nodes unavailable at once, after every event."""

    def __init__(self, client: ClusterClient) -> None:
        listing = client.resource(NODES).list()
        self.nodes = {n["metadata"]["name"]: n for n in listing["items"]}
        self.down = {name for name, n in self.nodes.items() if node_phase(n, "") in UNAVAILABLE_PHASES}
        self.max_seen = len(self.down)
        self.stream = client.resource(NODES).watch(resource_version=listing["metadata"]["resourceVersion"])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for event in self.stream:
            name = event.object["metadata"]["name"]
            if event.type != "DELETED" and node_phase(event.object, "") in UNAVAILABLE_PHASES:
                self.down.add(name)
            else:
                self.down.discard(name)
            self.max_seen = max(self.max_seen, len(self.down))

    def close(self) -> None:
        self.stream.stop()
        self.thread.join(5)


class MinimalController:
    """The same-run yardstick: the least a rollout controller can do. It watches the nodes, keeps
    the unavailable and outdated ones in sets, and after every event hands as many outdated nodes
    (by name) as ``maxUnavailable`` allows to 16 threads that patch ``desiredConfig``; no pools,
    no status, no Events."""

    def __init__(self, client: ClusterClient, target: str, limit: int) -> None:
        self.client, self.target, self.limit = client, target, limit
        self.body = {"metadata": {"annotations": {api.DESIRED_CONFIG_ANNOTATION: target}}}
        listing = client.resource(NODES).list()
        self.total = len(listing["items"])
        self.down: set[str] = set()
        self.pending: set[str] = set()
        self.outdated: list[str] = []
        self.updated: set[str] = set()
        for node in listing["items"]:
            self._classify(node)
        heapq.heapify(self.outdated)
        self.executor = ThreadPoolExecutor(16)
        self.finished = threading.Event()
        self._start_more()
        self.stream = client.resource(NODES).watch(resource_version=listing["metadata"]["resourceVersion"])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _classify(self, node: Obj) -> None:
        name, notes = node["metadata"]["name"], api.annotations_of(node)
        if notes.get(api.DESIRED_CONFIG_ANNOTATION) == self.target:
            self.pending.discard(name)
        unavailable = node_phase(node, "") in UNAVAILABLE_PHASES
        (self.down.add if unavailable else self.down.discard)(name)
        if notes.get(api.CURRENT_CONFIG_ANNOTATION) == self.target and not unavailable:
            self.updated.add(name)
        elif notes.get(api.DESIRED_CONFIG_ANNOTATION) != self.target and not unavailable:
            heapq.heappush(self.outdated, name)

    def _run(self) -> None:
        for event in self.stream:
            self._classify(event.object)
            self._start_more()
            if len(self.updated) == self.total:
                self.finished.set()

    def _start_more(self) -> None:
        while self.outdated and len(self.down | self.pending) < self.limit:
            name = heapq.heappop(self.outdated)
            if name in self.pending or name in self.updated or name in self.down:
                continue
            self.pending.add(name)
            self.executor.submit(self.client.resource(NODES).patch, name, self.body)

    def close(self) -> None:
        self.stream.stop()
        self.thread.join(5)
        self.executor.shutdown()


def profile(proc: subprocess.Popen[bytes], output: Path) -> subprocess.Popen[bytes]:
    """``py-spy record`` of ``proc`` (collapsed stacks of the thread holding the GIL) into
    ``output`` until interrupted with SIGINT; ``py-spy`` comes with the ``bench`` extra."""
    output.parent.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).with_name("py-spy")
    command = [
        str(py_spy),
        "record",
        "--pid",
        str(proc.pid),
        "--format",
        "raw",
        "--gil",
        "--output",
        str(output),
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_emulator(children: Children, workdir: Path, request_log: Path) -> Path:
    kubeconfig, ready = workdir / "cluster.kubeconfig", workdir / "cluster.ready.json"
    args = [
        "-m",
        "mcm.emulator",
        "serve",
        "--port",
        "0",
        "--admin-port",
        "-1",
        "--kubeconfig",
        str(kubeconfig),
    ]
    args += ["--ready-file", str(ready), "--crds", str(CRDS), "--request-log", str(request_log)]
    args += ["--history-size", "50000"]
    proc = children.spawn("emulator", args)
    wait("the emulator", lambda: ready.exists() or proc.poll() is not None, 60)
    if proc.poll() is not None:
        raise RuntimeError(f"the emulator exited; see {workdir / 'emulator.log'}")
    return kubeconfig


def pool(limit: int) -> Obj:
    return {
        "apiVersion": api.API_VERSION,
        "kind": "MachinePool",
        "metadata": {"name": "worker", "labels": {"pool": "worker"}},
        "spec": {
            "machineConfigSelector": {"matchLabels": {api.ROLE_LABEL: "worker"}},
            "machineSelector": {"matchLabels": ROLE},
            "maxUnavailable": limit,
        },
    }


def new_config() -> Obj:
    source = data_url("benchmark\n")
    return {
        "apiVersion": api.API_VERSION,
        "kind": "MachineConfig",
        "metadata": {"name": "50-worker-bench", "labels": {api.ROLE_LABEL: "worker"}},
        "spec": {
            "config": {
                "ignition": {"version": "3.2.0"},
                "storage": {"files": [{"path": "/etc/bench", "mode": 420, "contents": {"source": source}}]},
            }
        },
    }


def status(client: ClusterClient) -> dict[str, Any]:
    return api.status_of(client.resource(api.MACHINE_POOLS).get("worker"))


def create_updated_nodes(client: ClusterClient, count: int, target: str) -> None:
    """Nodes that already run ``target`` (as if the first rollout had happened)."""
    nodes = client.resource(NODES)

    def create(index: int) -> None:
        body = node_manifest(f"worker-{index:05d}", ROLE)
        body["metadata"]["annotations"] = {
            api.CURRENT_CONFIG_ANNOTATION: target,
            api.DESIRED_CONFIG_ANNOTATION: target,
            api.STATE_ANNOTATION: api.STATE_DONE,
        }
        nodes.create(body)

    with ThreadPoolExecutor(16) as executor:
        list(executor.map(create, range(count)))


def _node_patches(request_log: Path, since: float, until: float) -> list[tuple[float, str, str]]:
    """``(start time, node, user agent)`` of every node PATCH in the window, by start time (the
    log is written in order of completion)."""
    patches = []
    with request_log.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.endswith("\n"):
                break
            entry = json.loads(line)
            if entry["method"] == "PATCH" and since <= entry["time"] <= until and "/nodes/" in entry["path"]:
                node = entry["path"].split("/nodes/", 1)[1].split("/", 1)[0]
                patches.append((entry["time"], node, entry["user_agent"]))
    return sorted(patches)


def step_latencies(request_log: Path, since: float, until: float, agent: str, limit: int) -> dict[str, float]:
    """Where a rollout step goes beyond the apply time, in mean seconds, from the request log:
    ``react``: a slot freed (a daemon's ``done`` patch) → the controller's next ``desiredConfig``
    patch (the controller's share; for the N-th done, the patch of the N+limit-th node);
    ``daemon_start``: that patch → the daemon's ``working`` patch; ``daemon_apply``: ``working`` →
    ``done`` (the apply time plus cordon, drain and the daemon's timer: the harness's share)."""
    targeted: dict[str, float] = {}
    daemon: dict[str, list[float]] = {}
    for at, node, user_agent in _node_patches(request_log, since, until):
        if agent in user_agent:
            targeted.setdefault(node, at)
        elif "machine-config-daemon" in user_agent and node in targeted:
            daemon.setdefault(node, []).append(at)
    start, apply, done = [], [], []
    for node, at in targeted.items():
        steps = daemon.get(node, [])
        if len(steps) >= 2:  # working, done (then the uncordon)
            start.append(steps[0] - at)
            apply.append(steps[1] - steps[0])
            done.append(steps[1])
    patched, done = sorted(targeted.values()), sorted(done)
    react = [patched[i + limit] - done[i] for i in range(len(done)) if i + limit < len(patched)]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    return {"react": mean(react), "daemon_start": mean(start), "daemon_apply": mean(apply)}


def controller_writes(request_log: Path, since: float, until: float) -> Counter[str]:
    # The log is line-buffered JSON; a partly written last line is skipped.
    """The controller's writes in the window, by ``METHOD resource`` (from the request log)."""
    counts: Counter[str] = Counter()
    with request_log.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.endswith("\n"):
                break
            entry = json.loads(line)
            if CONTROLLER_AGENT not in entry["user_agent"] or entry["method"] not in WRITES:
                continue
            if not since <= entry["time"] <= until:
                continue
            match = _PATH.match(entry["path"])
            resource = (match[1] + (f"/{match[2]}" if match[2] else "")) if match else entry["path"]
            counts[f"{entry['method']} {resource}"] += 1
    return counts


def wait_for_events(request_log: Path, since: float, count: int, quiet: float) -> Counter[str]:
    """The controller's writes since ``since``, once its Event backlog is written (one
    ``SetDesiredConfig`` Event per node) or its writes stop growing for ``quiet`` seconds."""
    deadline, last, quiet_since = time.monotonic() + 120, -1, time.monotonic()
    while True:
        writes = controller_writes(request_log, since, time.time())
        total = sum(writes.values())
        if total != last:
            last, quiet_since = total, time.monotonic()
        if (
            writes["POST events"] >= count
            or time.monotonic() - quiet_since > 3
            or time.monotonic() > deadline
        ):
            return writes
        time.sleep(0.5)


def run(args: argparse.Namespace, report: Report, workdir: Path) -> None:
    count, limit, apply = args.nodes, max(1, args.nodes // 10), args.apply_seconds
    request_log = workdir / "requests.jsonl"
    request_log.unlink(missing_ok=True)
    children = Children(workdir)
    try:
        kubeconfig = start_emulator(children, workdir, request_log)
        client = load_config(str(kubeconfig), qps=-1, burst=0)
        client.resource(api.CONTROLLER_CONFIGS).create(controller_config())
        client.resource(api.MACHINE_POOLS).create(pool(limit))
        controller_args = ["-m", "mcm.app.mcc.cli", f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
        controller_args += ["--address=127.0.0.1", "--port=0", "--render-delay=0s", "--concurrent-syncs=5"]
        controller_args += ["--kube-api-qps=500", "--kube-api-burst=1000"]
        controller = children.spawn("controller", controller_args)
        ready = workdir / "daemons.ready"
        ready.unlink(missing_ok=True)
        daemon_args = ["-m", "mcm.testing.machineconfig", "--kubeconfig", str(kubeconfig)]
        daemon_args += [
            "--apply-seconds",
            str(apply),
            "--workers",
            "32",
            "--ready-file",
            str(ready),
            "--no-events",
        ]
        daemons = children.spawn("daemons", daemon_args)  # nodes created updated give it no work
        wait("the first rendered config", lambda: status(client).get("currentMachineConfig"), 60)
        first = str(status(client)["currentMachineConfig"])
        create_updated_nodes(client, count, first)
        wait("the pool to count its nodes", lambda: status(client).get("updatingMachines") == count, 120)
        wait("the daemons", ready.exists, 120)
        monitor = Unavailable(client)
        emulator = children.procs[0]
        processes = {"controller": controller, "emulator": emulator, "daemons": daemons}
        profilers = [profile(p, args.profile / f"{n}.txt") for n, p in processes.items() if args.profile]
        harness0 = {n: cpu_seconds(p.pid) for n, p in processes.items()}
        cpu0, wall0, started = cpu_seconds(controller.pid), time.time(), time.monotonic()
        client.resource(api.MACHINE_CONFIGS).create(new_config())

        def done() -> bool:
            current = status(client)
            return bool(
                current.get("currentMachineConfig") not in (None, first)
                and current.get("updatingMachines") == count
                and current.get("machineCount") == count
            )

        wait("the rollout", done, args.timeout, interval=0.1)
        elapsed, cpu = time.monotonic() - started, cpu_seconds(controller.pid) - cpu0
        harness = {n: cpu_seconds(p.pid) - harness0[n] for n, p in processes.items()}
        for profiler in profilers:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(30)
        most_down = monitor.max_seen
        drained = time.monotonic()
        writes = wait_for_events(request_log, wall0, count, quiet=1.0 if args.smoke else 3.0)
        drain = time.monotonic() - drained
        controller.terminate()
        controller.wait(15)
        monitor.max_seen = len(monitor.down)  # the watch runs on: the yardstick pays for it too
        minimal_started, minimal_wall0 = time.monotonic(), time.time()
        yardstick_client = load_config(str(kubeconfig), qps=-1, burst=0, user_agent_suffix=MINIMAL_AGENT)
        minimal = MinimalController(yardstick_client, "yardstick-config", limit)
        wait("the yardstick rollout", minimal.finished.is_set, args.timeout, interval=0.1)
        minimal_elapsed = time.monotonic() - minimal_started
        minimal.close()
        yardstick_client.close()
        monitor.close()
        ideal = report.yardstick("ideal: 10 waves x apply time", 10 * apply, "s")
        same_run = report.yardstick("minimal controller, same run", minimal_elapsed, "s")
        report.figure("rollout time", elapsed, "s", yardstick=ideal, target=ratio_at_most(1.5, sized=True))
        report.figure("rollout time vs a minimal controller", elapsed, "s", yardstick=same_run)
        report.figure("controller CPU during the rollout", cpu, "s")
        report.figure("controller CPU share of one core", 100 * cpu / elapsed, "%")
        report.figure("emulator CPU during the rollout", harness["emulator"], "s")
        report.figure("daemons CPU during the rollout", harness["daemons"], "s")
        report.figure("controller API writes per node", sum(writes.values()) / count, "", target=at_most(3.0))
        for kind, number in writes.most_common():
            report.figure(f"  of which {kind}", number / count, "per node")
        report.figure("Event backlog written after the rollout in", drain, "s")
        ours = step_latencies(request_log, wall0, minimal_wall0, CONTROLLER_AGENT, limit)
        theirs = step_latencies(request_log, minimal_wall0, time.time(), MINIMAL_AGENT, limit)
        for key, what in STEP_PARTS.items():
            yardstick = report.yardstick(f"minimal controller: {what}", 1000 * theirs[key], "ms")
            report.figure(f"per step: {what}", 1000 * ours[key], "ms", yardstick=yardstick)
        report.figure("most nodes unavailable at once (watch)", most_down, "", target=at_most(limit))
        report.figure("  the same for the minimal controller", monitor.max_seen, "")
        report.figure("maxUnavailable", limit, "", target=equals(limit))
        report.figure("machine load average (1 min, 2 cores)", os.getloadavg()[0], "")
        client.close()
    finally:
        children.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--apply-seconds", type=float, default=1.0)
    parser.add_argument("--smoke", action="store_true", help="100 nodes applying in 0.2 s")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy each process during the rollout (DIR/<name>.txt)",
    )
    parser.add_argument("--workdir", default=None, help="keep logs here (default: a temporary directory)")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.apply_seconds = 100, 0.2
    logs.configure("console", level=logging.WARNING)
    report = Report(f"machine-config-controller benchmark ({args.nodes} nodes)", full_size=not args.smoke)
    with tempfile.TemporaryDirectory(prefix="mcc-bench-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        run(args, report, workdir)
    return 1 if report.print() else 0


if __name__ == "__main__":
    sys.exit(main())

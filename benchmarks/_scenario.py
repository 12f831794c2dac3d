"""The machine-controller scenario shared by the controller benchmarks.

Pieces, each usable alone:

- :func:`node_simulator`: a child process playing the kubelets. It watches Machines on the control
  cluster and registers a Ready Node on the target for every machine that has a
  ``spec.providerID`` and a ``node`` label, whatever controller (mcm or upstream's Go one) wrote
  them. It needs nothing from the driver, so both controllers are measured against the same one.
- :class:`Observer`: informers in the benchmark process that note, per machine, when each stage
  of its life was first visible (created, finalizer, providerID, Pending, Node registered,
  Running, gone). Every stage is observed the same way for every controller.
- :class:`ControllerProcess`: the controller under test in its own process (``machine-controller``
  of this repository, or upstream's binary), with its CPU seconds and peak RSS from ``/proc``.
- :func:`read_requests` / :class:`Requests`: the emulators' request logs, split by who sent each
  request (the benchmark's own clients carry the ``bench`` user agent suffix).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from mcm.runtime.objects import Obj

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcm.apis.machine import constants as c  # noqa: E402
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES  # noqa: E402
from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedInformerFactory  # noqa: E402
from mcm.runtime.client import ClusterClient, load_config  # noqa: E402
from mcm.runtime.client.errors import AlreadyExists, ApiError, ConnectionFailed, NotFound  # noqa: E402
from mcm.runtime.client.resources import NODES, SECRETS  # noqa: E402

NS = "default"
BENCH_AGENT = "bench"
"""User-agent suffix of every client of the benchmark itself (loader, observer, node simulator)."""

LIMIT_OFF = (1e6, 1_000_000)
"""``--kube-api-qps``/``--kube-api-burst`` for "client limits off": mcm validates QPS > 0 as
upstream's HEAD does, so both controllers get a bucket that never runs dry."""

WARM_UP = "warm-up"
"""A machine made Running before the measured ones and left in place: the class then has machines
(upstream's and mcm's class loops drop the class finalizer while none refers to it, and the first
machines of a burst would otherwise wait for it), and the controller's workers are known to run."""


STAGES = ("created", "finalizer", "provider_id", "pending", "node", "running")
"""A machine's stages, as the observer sees them (the Node registers as soon as the providerID is
written, so ``pending`` and ``node`` race)."""

STAGE_SPANS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("create → first controller write (event seen, finalizer)", ("created",), "finalizer"),
    ("finalizer → providerID written (driver calls)", ("finalizer",), "provider_id"),
    ("providerID → Pending written", ("provider_id",), "pending"),
    ("providerID → Node registered (node simulator)", ("provider_id",), "node"),
    ("Pending and Node → Running written", ("pending", "node"), "running"),
)
"""Label, the stages whose latest marks the start, and the stage that ends the span."""


def quiet() -> None:
    """Silence logging in this process (benchmarks print their own table)."""
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


def bench_client(kubeconfig: str | Path, suffix: str = BENCH_AGENT) -> ClusterClient:
    """An unthrottled client whose requests the request log attributes to the benchmark."""
    return load_config(str(kubeconfig), qps=-1, burst=0, user_agent_suffix=suffix)


_ALPHABET = "0123456789bcdfghjklmnpqrstvwxz"


def machine_names(n: int) -> list[str]:
    """Names like a MachineSet's (``<set>-<5 characters>``) whose bootstrap-token IDs differ.

    Both controllers name a machine's bootstrap token after the first three of its last five
    characters, so sequential names (``m-00001``, ``m-00002``) would share tokens and fight over
    them. Here those three characters count up in base 30 (27,000 names), the last two vary.
    """
    base = len(_ALPHABET)
    if n > base**3:
        raise ValueError(f"at most {base**3} machine names")
    names = []
    for i in range(n):
        head = "".join(_ALPHABET[(i // base**k) % base] for k in (2, 1, 0))
        tail = _ALPHABET[(i * 7) % base] + _ALPHABET[(i * 13 + 5) % base]
        names.append(f"bench-worker-z1-5d8f7-{head}{tail}")
    return names


def machine(name: str) -> Obj:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": NS, "labels": {"name": "bench"}},
        "spec": {"class": {"kind": "MachineClass", "name": "bench"}},
    }


def install_class(control: ClusterClient) -> None:
    """The Secret and MachineClass every benchmark machine uses (the class with the finalizers
    of both mcm and upstream's v0.47 machine controller, so neither waits for its own)."""
    control.resource(SECRETS).create(
        {"metadata": {"name": "bench", "namespace": NS}, "data": {"userData": "I2Nsb3VkLWNvbmZpZw=="}},
        namespace=NS,
    )
    control.resource(MACHINE_CLASSES).create(
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "MachineClass",
            "metadata": {
                "name": "bench",
                "namespace": NS,
                "finalizers": [c.MCM_FINALIZER, c.MC_FINALIZER],
            },
            "providerSpec": {},
            "secretRef": {"name": "bench", "namespace": NS},
            "provider": "fake",
        },
        namespace=NS,
    )


# --- the node simulator (child process) --------------------------------------------------------


def _node(name: str, provider_id: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"providerID": provider_id},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"},
                {
                    "type": "DiskPressure",
                    "status": "False",
                    "reason": "KubeletHasNoDiskPressure",
                    "message": "",
                },
            ],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        },
    }


def node_simulator(control_kubeconfig: str, target_kubeconfig: str, stop: Any) -> None:
    """Child process: a Ready Node for every machine with a providerID and a node label."""
    quiet()
    control = bench_client(control_kubeconfig, f"{BENCH_AGENT}-nodesim")
    nodes = bench_client(target_kubeconfig, f"{BENCH_AGENT}-nodesim").resource(NODES)
    registered: set[str] = set()
    lock = threading.Lock()
    pool = ThreadPoolExecutor(8)

    def register(node: str, provider_id: str) -> None:
        try:
            nodes.create(_node(node, provider_id))
        except AlreadyExists:
            pass
        except ApiError:
            with lock:
                registered.discard(node)

    def seen(obj: Obj) -> None:
        node = ((obj.get("metadata") or {}).get("labels") or {}).get(c.LABEL_NODE)
        provider_id = (obj.get("spec") or {}).get("providerID")
        if not node or not provider_id or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        with lock:
            if node in registered:
                return
            registered.add(node)
        pool.submit(register, node, provider_id)

    factory = SharedInformerFactory(control, NS)
    factory.informer_for(MACHINES).add_event_handler(
        ResourceEventHandlerFuncs(on_add=seen, on_update=lambda _old, new: seen(new))
    )
    halt = threading.Event()
    factory.start(halt)
    stop.wait()
    halt.set()
    pool.shutdown(wait=False)


class NodeSimulator:
    """The running :func:`node_simulator` process: call it to stop it; ``pid`` for its CPU."""

    def __init__(self, process: Any, stop: Any) -> None:
        self._process = process
        self._stop = stop
        self.pid: int = process.pid

    def __call__(self) -> None:
        self._stop.set()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()


def start_node_simulator(control_kubeconfig: str | Path, target_kubeconfig: str | Path) -> NodeSimulator:
    """Start :func:`node_simulator` in a spawned process."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    sim = ctx.Process(
        target=node_simulator, args=(str(control_kubeconfig), str(target_kubeconfig), stop), daemon=True
    )
    sim.start()
    return NodeSimulator(sim, stop)


# --- the observer -----------------------------------------------------------------------------


@dataclass
class Timeline:
    """Monotonic times at which one machine's stages were first observed."""

    at: dict[str, float] = field(default_factory=dict)

    def mark(self, stage: str, when: float) -> None:
        self.at.setdefault(stage, when)

    def span(self, first: Sequence[str], last: str) -> float | None:
        """From the latest of ``first`` to ``last``; ``None`` unless all were seen."""
        if last not in self.at or any(stage not in self.at for stage in first):
            return None
        return self.at[last] - max(self.at[stage] for stage in first)


class Observer:
    """Stage times per machine, from watches on the control (Machines) and target (Nodes)."""

    def __init__(self, control: ClusterClient, target: ClusterClient) -> None:
        self.lock = threading.Lock()
        self.timelines: dict[str, Timeline] = {}
        self.gone: dict[str, float] = {}
        self.running = 0
        self._stop = threading.Event()
        self._control = SharedInformerFactory(control, NS)
        self._target = SharedInformerFactory(target, None)
        self._control.informer_for(MACHINES).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self._machine, on_update=lambda _o, n: self._machine(n), on_delete=self._deleted
            )
        )
        self._target.informer_for(NODES).add_event_handler(
            ResourceEventHandlerFuncs(on_add=self._node, on_update=lambda _o, n: self._node(n))
        )

    def start(self) -> None:
        for factory in (self._control, self._target):
            factory.start(self._stop)
            factory.wait_for_cache_sync(self._stop, timeout=30)

    def stop(self) -> None:
        self._stop.set()

    def created(self, name: str, when: float) -> None:
        with self.lock:
            self.timelines.setdefault(name, Timeline()).mark("created", when)

    def _timeline(self, name: str) -> Timeline:
        return self.timelines.setdefault(name, Timeline())

    def _machine(self, obj: Obj) -> None:
        now = time.monotonic()
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        phase = ((obj.get("status") or {}).get("currentStatus") or {}).get("phase")
        with self.lock:
            line = self._timeline(name)
            if c.MCM_FINALIZER in (meta.get("finalizers") or []):
                line.mark("finalizer", now)
            if (obj.get("spec") or {}).get("providerID"):
                line.mark("provider_id", now)
            if phase in ("Pending", "Running"):
                line.mark("pending", now)
            if phase == "Running" and "running" not in line.at:
                line.mark("running", now)
                self.running += name != WARM_UP

    def _deleted(self, obj: Any) -> None:
        now = time.monotonic()
        name = ((getattr(obj, "obj", obj) or {}).get("metadata") or {}).get("name", "")
        with self.lock:
            self.gone.setdefault(name, now)

    def _node(self, obj: Obj) -> None:
        now = time.monotonic()
        with self.lock:
            self._timeline((obj.get("metadata") or {}).get("name", "")).mark("node", now)

    def wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Poll ``done`` (under the lock) every 20 ms until true or ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if done():
                    return True
            time.sleep(0.02)
        return False


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def stage_breakdown(timelines: Iterable[Timeline]) -> dict[str, tuple[float, float]]:
    """Stage name → (p50, p99) seconds over the machines that went through it."""
    lines = list(timelines)
    result: dict[str, tuple[float, float]] = {}
    for label, first, last in STAGE_SPANS:
        spans = [s for s in (line.span(first, last) for line in lines) if s is not None]
        result[label] = (percentile(spans, 0.5), percentile(spans, 0.99))
    return result


# --- loading ----------------------------------------------------------------------------------


def create_machines(
    client: ClusterClient, names: Sequence[str], observer: Observer, rate: float | None
) -> None:
    """Create the machines all at once (``rate`` None: 16 threads) or ``rate`` per second."""
    machines = client.resource(MACHINES)

    def create(name: str) -> None:
        observer.created(name, time.monotonic())
        _once_more_if_cut(lambda: machines.create(machine(name), namespace=NS), AlreadyExists)

    with ThreadPoolExecutor(16) as pool:
        if rate is None:
            list(pool.map(create, names))
            return
        start = time.monotonic()
        futures = []
        for i, name in enumerate(names):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(create, name))
        for future in futures:
            future.result()


def delete_machines(client: ClusterClient, names: Sequence[str]) -> None:
    machines = client.resource(MACHINES)

    def delete(name: str) -> None:
        _once_more_if_cut(lambda: machines.delete(name, namespace=NS), NotFound)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(delete, names))


def _once_more_if_cut(request: Callable[[], object], done_already: type[ApiError]) -> None:
    """Send ``request``; once more if the connection broke before its answer (an emulator under
    a 20,000-machine burst may close a kept-alive connection), where ``done_already`` from the
    second means the first went through."""
    try:
        request()
    except ConnectionFailed:
        try:
            request()
        except done_already:
            pass


# --- the controller process -------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ControllerProcess:
    """A controller in its own process; CPU and peak RSS read from ``/proc`` before it stops."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.command = command
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        self.cpu = 0.0
        self.system_cpu = 0.0
        self.peak_rss_mib = 0.0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU seconds so far (``system_cpu``: the system part)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return self.cpu
        ticks = os.sysconf("SC_CLK_TCK")
        self.cpu = (int(fields[11]) + int(fields[12])) / ticks
        self.system_cpu = int(fields[12]) / ticks
        return self.cpu

    def rss_mib(self, key: str = "VmRSS") -> float:
        """``VmRSS`` (now) or ``VmHWM`` (peak) in MiB."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def profile(self, output: Path) -> subprocess.Popen[bytes]:
        """Attach ``py-spy record`` (collapsed stacks of the thread holding the GIL, so the
        samples show where Python spends CPU) until it is interrupted; ``py-spy`` comes with the
        ``bench`` extra."""
        py_spy = Path(sys.executable).with_name("py-spy")
        command = [str(py_spy), "record", "--pid", str(self.proc.pid), "--format", "raw", "--gil"]
        return subprocess.Popen(
            [*command, "--output", str(output)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop(self) -> None:
        """Read the final CPU and peak RSS, then SIGTERM (SIGKILL after 15 s)."""
        if self.alive():
            self.cpu_seconds()
            self.peak_rss_mib = self.rss_mib("VmHWM")
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def mcm_command(
    control: Path,
    target: Path,
    *,
    qps: float,
    burst: int,
    port: int,
    extra: Sequence[str] = (),
    driver: Sequence[str] = ("--driver=fake",),
) -> list[str]:
    """``machine-controller`` of this repository; ``driver``: its driver flags (default the
    in-memory driver, ``--driver=fake``; :func:`sidecar_command` serves the same one over gRPC)."""
    return [
        sys.executable,
        "-c",
        "import sys; from mcm.app.cli import main; sys.exit(main())",
        f"--control-kubeconfig={control}",
        f"--target-kubeconfig={target}",
        f"--namespace={NS}",
        *driver,
        "--leader-elect=false",
        f"--kube-api-qps={qps:g}",
        f"--kube-api-burst={burst}",
        f"--port={port}",
        *extra,
    ]


SIDECAR_WORKERS = 128
"""``--max-workers`` and ``--max-queued`` of the benchmark's sidecar: more than the controller's
machine and termination workers together (50 each), so no call is refused with
``RESOURCE_EXHAUSTED`` (the default of 16 + 16 is sized for a cloud API, not for 100 workers)."""


def sidecar_command(socket: Path) -> list[str]:
    """The gRPC driver sidecar serving the in-memory driver of ``--driver=fake`` (no call log) on
    the unix socket ``socket``: ``--driver-endpoint=unix://<socket>`` for the controller."""
    return [
        sys.executable,
        "-m",
        "mcm.driver.grpc",
        "--driver=mcm.driver.fake:unrecorded",
        f"--endpoint=unix://{socket}",
        f"--max-workers={SIDECAR_WORKERS}",
        f"--max-queued={SIDECAR_WORKERS}",
    ]


def wait_for_line(path: Path, text: str, timeout: float, alive: Callable[[], bool]) -> bool:
    """Wait until the log file ``path`` holds ``text`` (False: timeout or the process ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``nan`` once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this (the benchmark's) process so far: the observer and the loaders."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds of the scenario's processes between :meth:`start` and :meth:`read`, by role."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._start: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {role: process_cpu(pid) for role, pid in self._pids.items()}
        now["benchmark (observer, loader)"] = own_cpu()
        return now

    def start(self) -> None:
        self._start = self._now()

    def read(self) -> dict[str, float]:
        return {role: seconds - self._start.get(role, 0.0) for role, seconds in self._now().items()}


def go_command(binary: Path, control: Path, target: Path, *, qps: float, burst: int, port: int) -> list[str]:
    """Upstream's machine controller built by ``hack/upstream-mcm.sh`` (in-memory driver)."""
    return [
        str(binary),
        f"--control-kubeconfig={control}",
        f"--target-kubeconfig={target}",
        f"--namespace={NS}",
        "--leader-elect=false",
        f"--kube-api-qps={qps:g}",
        f"--kube-api-burst={burst}",
        f"--port={port}",
        "--address=127.0.0.1",
    ]


# --- request logs -----------------------------------------------------------------------------

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@dataclass
class Requests:
    """The requests one emulator answered, from its request log."""

    entries: list[Obj]

    def controller(self, since: float = 0.0) -> list[Obj]:
        """Requests sent by the controller (not by the benchmark's own clients) after ``since``."""
        return [e for e in self.entries if e["time"] >= since and not _is_bench(e.get("user_agent", ""))]

    def writes(self, since: float = 0.0, *, exclude: Sequence[str] = ("events", "leases")) -> list[Obj]:
        return [
            e
            for e in self.controller(since)
            if e["verb"] in WRITE_VERBS and _resource(e["path"]) not in exclude
        ]

    def count(self, since: float = 0.0, *, verb: str | None = None, resource: str | None = None) -> int:
        return sum(
            1
            for e in self.controller(since)
            if (verb is None or e["verb"] == verb) and (resource is None or _resource(e["path"]) == resource)
        )

    def by_verb_resource(self, since: float = 0.0) -> Counter[str]:
        counts: Counter[str] = Counter()
        for e in self.controller(since):
            if e["verb"] == "nonresource":
                continue
            counts[request_label(e)] += 1
        return counts


def request_label(entry: Obj) -> str:
    """``verb resource[/subresource] code`` of a request log entry."""
    return f"{entry['verb']} {_resource(entry['path'])}{_subresource(entry['path'])} {entry['code']}"


def _is_bench(agent: str) -> bool:
    return agent.rsplit("/", 1)[-1].startswith(BENCH_AGENT)


_CLUSTER_SCOPED = ("nodes", "persistentvolumes", "volumeattachments", "namespaces")


def _parts(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    return parts


def _resource(path: str) -> str:
    parts = _parts(path)
    return parts[0] if parts else ""


def _subresource(path: str) -> str:
    parts = _parts(path)
    return f"/{parts[2]}" if len(parts) > 2 else ""


def read_requests(path: Path) -> Requests:
    entries: list[Obj] = []
    if path.exists():
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    continue
    return Requests(entries)


def warm_up(client: ClusterClient, observer: Observer, timeout: float, alive: Callable[[], bool]) -> bool:
    """Create :data:`WARM_UP` and wait until it is Running (False: timeout or the controller died)."""
    create_machines(client, [WARM_UP], observer, None)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        with observer.lock:
            if "running" in observer.timelines[WARM_UP].at:
                return True
        time.sleep(0.05)
    return False


def tear_down(process: Any, observer: Any, stop_sim: Callable[[], None] | None, pair: Any) -> None:
    """Stop what a measured run started (each may be ``None`` when start-up failed part way)."""
    if process is not None:
        process.stop()
    if observer is not None:
        observer.stop()
    if stop_sim is not None:
        stop_sim()
    pair.close()

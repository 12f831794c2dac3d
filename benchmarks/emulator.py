"""Emulator benchmark: six parts with raw HTTP clients against a subprocess emulator: P1 request
rate and round trip, P2 lists, P3 watch fan-out under writes, P4 memory with idle watches and
history, P5 start and stop, P6 a machine scale-up and -down.

Usage: ``python benchmarks/emulator.py [--smoke] [--only P3 ...] [sizes]`` (``--smoke`` runs 3 %
of the sizes; ``--only`` picks parts; ``--help`` lists the size options). P3 runs its watchers in a
separate process and paces its writers open-loop over several keep-alive connections, so the
client side does not cap the write rate.

Each figure is printed beside a yardstick measured in the same run, mostly a stdlib
``http.server.ThreadingHTTPServer`` in its own process that answers every request with a fixed
body of the same size (the floor for a Python HTTP/1.1 server on this machine), and beside its
target (the emulator's performance goal, given with each figure below) and whether it is met.
Size-dependent targets are judged only at full size.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "benchmarks"))

from _report import Report, Yardstick, at_least, at_most, equals  # noqa: E402

from mcm import packaged  # noqa: E402  (after the path insert)
from mcm.emulator.process import spawn  # noqa: E402

CRDS = packaged.machine_crds()
NS = "/api/v1/namespaces/default"
PAYLOAD = "x" * 1800  # ~2 KiB objects


class Conn:
    """One keep-alive connection."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        self.conn.request(method, path, body=data, headers={"Content-Type": ctype})
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def close(self) -> None:
        self.conn.close()


@contextmanager
def emulator_process(tmp: Path) -> Iterator[tuple[int, int, float]]:
    """Start ``python -m mcm.emulator serve`` with the MCM CRDs; yield (port, pid, seconds to ready)."""
    start = time.perf_counter()
    with spawn(tmp, "bench", crds=CRDS) as process:
        yield process.port, process.pid, time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


REPORT = Report("emulator benchmark")
BASE: dict[str, Yardstick] = {}
"""Yardsticks measured against the stdlib server at the start of the run, by name."""

BASELINE_SERVER = """
import http.server, json
BODY = json.dumps({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"},
                   "data": {"payload": "x" * 1800}}).encode()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def log_message(self, *args):
        pass

    def answer(self, code):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"x" * int(self.path.split("/")[2]) if self.path.startswith("/bytes/") else BODY
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(200)

    do_PUT = do_PATCH = do_GET

    def do_POST(self):
        self.answer(201)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextmanager
def baseline_server() -> Iterator[tuple[int, int]]:
    """The yardstick server in its own process; yield (port, pid)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BASELINE_SERVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline()), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def timed_get(port: int, path: str, repeat: int = 3) -> float:
    """Best seconds for one GET of ``path`` on a keep-alive connection."""
    conn = Conn(port)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        code, _ = conn.call("GET", path)
        best = min(best, time.perf_counter() - t)
        assert code == 200
    conn.close()
    return best


def measure_baseline(port: int, pid: int, n: int) -> None:
    """P1's request pattern against the stdlib server: the yardsticks of P1, P3 and P6."""
    cpu_before = cpu_seconds(pid)
    figures = p1_requests(port, n)
    cpu = cpu_seconds(pid) - cpu_before
    BASE["rps"] = Yardstick("stdlib server", figures["rps"], "/s")
    BASE["rps4"] = Yardstick("stdlib server", figures["rps4"], "/s")
    for verb in ("create", "get", "update", "patch"):
        BASE[verb] = Yardstick("stdlib server", figures[verb] * 1000, "ms")
    BASE["cpu_per_request"] = Yardstick("stdlib server", cpu / (8 * n) * 1000, "ms")


def python_startup() -> float:
    """Best seconds for ``python -c pass``: the floor of any subprocess start."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def stdlib_start_stop() -> tuple[float, float]:
    """Seconds to start and to stop a stdlib ThreadingHTTPServer in process (polling every 50 ms)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    start = time.perf_counter()
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    started = time.perf_counter() - start
    start = time.perf_counter()
    server.shutdown()
    server.server_close()
    thread.join()
    return started, time.perf_counter() - start


def cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": {"payload": PAYLOAD}}


# ---------------------------------------------------------------------------- P1


def p1_requests(port: int, n: int) -> dict[str, float]:
    """Sequential create/get/update/patch on one connection, then GETs over 4 connections."""
    conn = Conn(port)
    latencies: dict[str, list[float]] = {"create": [], "get": [], "update": [], "patch": []}
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        code, body = conn.call("POST", f"{NS}/configmaps", cm(f"p1-{i}"))
        latencies["create"].append(time.perf_counter() - t)
        assert code == 201, body
        t = time.perf_counter()
        code, body = conn.call("GET", f"{NS}/configmaps/p1-{i}")
        latencies["get"].append(time.perf_counter() - t)
        obj = json.loads(body)
        obj["data"]["k"] = "v"
        t = time.perf_counter()
        code, _ = conn.call("PUT", f"{NS}/configmaps/p1-{i}", obj)
        latencies["update"].append(time.perf_counter() - t)
        t = time.perf_counter()
        code, _ = conn.call(
            "PATCH", f"{NS}/configmaps/p1-{i}", {"data": {"k2": "v"}}, "application/merge-patch+json"
        )
        latencies["patch"].append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    conn.close()
    figures = {"rps": 4 * n / elapsed}
    for verb, values in latencies.items():
        figures[verb] = statistics.median(values)

    def worker(k: int, count: int) -> None:
        c = Conn(port)
        for i in range(count):
            c.call("GET", f"{NS}/configmaps/p1-{(i * 7 + k) % n}")
        c.close()

    threads = [threading.Thread(target=worker, args=(k, n)) for k in range(4)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    figures["rps4"] = 4 * n / (time.perf_counter() - start)
    return figures


def p1(port: int, n: int) -> None:
    figures = p1_requests(port, n)
    REPORT.figure(
        "P1 sequential requests/s, one connection",
        figures["rps"],
        "/s",
        yardstick=BASE["rps"],
        target=at_least(1_000, "/s"),
    )
    for verb in ("create", "get", "update", "patch"):
        REPORT.figure(
            f"P1 median round trip {verb}",
            figures[verb] * 1000,
            "ms",
            yardstick=BASE[verb],
            target=at_most(1, "ms"),
        )
    REPORT.figure(
        "P1 GET requests/s over 4 connections",
        figures["rps4"],
        "/s",
        yardstick=BASE["rps4"],
        target=at_least(1_500, "/s"),
    )


# ---------------------------------------------------------------------------- P2


def fill(port: int, prefix: str, count: int, connections: int = 4) -> None:
    def worker(k: int) -> None:
        c = Conn(port)
        for i in range(k, count, connections):
            labels = {"sel": "yes"} if i % 100 == 0 else {"sel": "no"}
            code, body = c.call("POST", f"{NS}/configmaps", cm(f"{prefix}-{i:06d}", labels))
            assert code == 201, body
        c.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def timed_list(port: int, query: str = "", repeat: int = 3) -> tuple[float, int]:
    conn = Conn(port)
    best = float("inf")
    size = 0
    for _ in range(repeat):
        t = time.perf_counter()
        code, body = conn.call("GET", f"{NS}/configmaps{query}")
        best = min(best, time.perf_counter() - t)
        assert code == 200
        size = len(body)
    conn.close()
    return best, size


def p2(port: int, baseline_port: int, small: int, large: int) -> None:
    fill(port, "p2a", small)
    seconds, size = timed_list(port, "?labelSelector=bench%3Dnone")
    del seconds, size
    fill(port, "p2b", large - small)
    seconds, size = timed_list(port)
    full_list = REPORT.yardstick(f"unfiltered list of {large:,}", seconds * 1000, "ms")
    REPORT.figure(
        f"P2 list {large:,} objects (~2 KiB) incl. transfer",
        seconds * 1000,
        "ms",
        yardstick=REPORT.yardstick(
            f"stdlib server, {size:,}-byte body", timed_get(baseline_port, f"/bytes/{size}") * 1000, "ms"
        ),
        target=at_most(600, "ms", sized=True),
    )
    seconds, _ = timed_list(port, "?labelSelector=sel%3Dyes")
    REPORT.figure(
        f"P2 list with label selector over {large:,} (1 % match)",
        seconds * 1000,
        "ms",
        yardstick=full_list,
        target=at_most(100, "ms", sized=True),
    )


def p2_small(port: int, baseline_port: int, count: int) -> None:
    conn = Conn(port)
    conn.call("POST", "/api/v1/namespaces", {"metadata": {"name": "p2small"}})
    for i in range(count):
        conn.call("POST", "/api/v1/namespaces/p2small/configmaps", cm(f"s{i}"))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        conn.call("GET", "/api/v1/namespaces/p2small/configmaps")
        best = min(best, time.perf_counter() - t)
    _, body = conn.call("GET", "/api/v1/namespaces/p2small/configmaps")
    conn.close()
    REPORT.figure(
        f"P2 list {count:,} objects (~2 KiB) incl. transfer",
        best * 1000,
        "ms",
        yardstick=REPORT.yardstick(
            f"stdlib server, {len(body):,}-byte body",
            timed_get(baseline_port, f"/bytes/{len(body)}") * 1000,
            "ms",
        ),
        target=at_most(60, "ms", sized=True),
    )


# ---------------------------------------------------------------------------- P3

WATCH_READY_TIMEOUT = 30.0


def _open_watch(port: int, path: str) -> tuple[socket.socket, bytes]:
    """A raw watch connection past its response headers; returns the socket and bytes read ahead."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise RuntimeError("watch closed before its headers")
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"watch refused: {head[:200]!r}")
    return sock, rest


def _chunks(buffer: bytearray) -> Iterator[bytes]:
    """Pop every complete chunk (``size CRLF data CRLF``) off ``buffer``; the 0-size chunk ends it."""
    while True:
        end = buffer.find(b"\r\n")
        if end < 0:
            return
        size = int(buffer[:end].split(b";")[0], 16)
        if size == 0:
            raise EOFError
        if len(buffer) < end + 2 + size + 2:
            return
        data = bytes(buffer[end + 2 : end + 2 + size])
        del buffer[: end + 2 + size + 2]
        yield data


def _watch_latencies(
    port: int, path: str, expected: int, opened: threading.Barrier, out: list[float]
) -> None:
    """Follow one watch until ``expected`` events arrived; append send->receive seconds to ``out``."""
    sock, rest = _open_watch(port, path)
    opened.wait()
    buffer = bytearray(rest)
    pending = b""
    now = time.time()
    try:
        while True:
            for data in _chunks(buffer):
                pending += data
                while b"\n" in pending:
                    line, _, pending = pending.partition(b"\n")
                    event = json.loads(line)
                    out.append(now - float(event["object"]["metadata"]["annotations"]["sent"]))
            if len(out) >= expected:
                return
            more = sock.recv(262144)
            if not more:
                return
            now = time.time()
            buffer += more
    except EOFError:
        return
    finally:
        sock.close()


def p3_watch_process(port: int, path: str, watchers: int, expected: int, ready: Any, results: Any) -> None:
    """Run in its own process: ``watchers`` watch threads; set ``ready`` once all are open, then send
    each watcher's latency list through the ``results`` pipe."""
    latencies: list[list[float]] = [[] for _ in range(watchers)]
    opened = threading.Barrier(watchers, action=ready.set)
    threads = [
        threading.Thread(target=_watch_latencies, args=(port, path, expected, opened, latencies[k]))
        for k in range(watchers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.send(latencies)
    results.close()


def _paced_writes(port: int, first: int, step: int, writes: int, rate: float, start: float) -> float:
    """Open-loop writer: create #i at ``start + i / rate`` (or at once when behind); return the end time."""
    conn = Conn(port)
    for i in range(first, writes, step):
        pause = start + i / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        body = {"metadata": {"name": f"w{i}", "annotations": {"sent": repr(time.time())}}, "data": {"a": "b"}}
        code, reply = conn.call("POST", "/api/v1/namespaces/p3/configmaps", body)
        assert code == 201, reply[:200]
    conn.close()
    return time.perf_counter()


def p3(port: int, pid: int, writes: int, watchers: int, rate: float, writer_threads: int = 4) -> None:
    """``writes`` creates offered at ``rate``/s by ``writer_threads`` keep-alive connections while
    ``watchers`` watches, in a separate process, measure send->receive delivery latency."""
    conn = Conn(port)
    conn.call("POST", "/api/v1/namespaces", {"metadata": {"name": "p3"}})
    _, body = conn.call("GET", "/api/v1/namespaces/p3/configmaps")
    conn.close()
    rv = json.loads(body)["metadata"]["resourceVersion"]
    timeout = int(writes / rate) + 120
    path = f"/api/v1/namespaces/p3/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds={timeout}"
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=p3_watch_process, args=(port, path, watchers, writes, ready, sender))
    child.start()
    sender.close()
    if not ready.wait(WATCH_READY_TIMEOUT):
        child.kill()
        raise RuntimeError("P3 watchers did not open")
    cpu_before = cpu_seconds(pid)
    start = time.perf_counter() + 0.05
    ends: list[float] = []

    def writer(k: int) -> None:
        ends.append(_paced_writes(port, k, writer_threads, writes, rate, start))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(writer_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    achieved = writes / (max(ends) - start)
    if not receiver.poll(60):
        child.kill()
        raise RuntimeError("P3 watchers did not finish")
    latencies: list[list[float]] = receiver.recv()
    cpu = cpu_seconds(pid) - cpu_before
    child.join(timeout=10)
    flat = sorted(x for lat in latencies for x in lat)
    complete = all(len(lat) == writes for lat in latencies)
    REPORT.figure(
        f"P3 writes/s achieved with {watchers} watchers ({writer_threads} writers)",
        achieved,
        "/s",
        yardstick=REPORT.yardstick("offered", rate, "/s"),
    )
    round_trip = Yardstick("stdlib server GET round trip", BASE["get"].value, "ms")
    REPORT.figure(
        "P3 delivery latency p50 (send->receive)",
        flat[len(flat) // 2] * 1000,
        "ms",
        yardstick=round_trip,
        target=at_most(5, "ms"),
    )
    REPORT.figure(
        "P3 delivery latency p99 (send->receive)",
        flat[int(len(flat) * 0.99)] * 1000,
        "ms",
        yardstick=round_trip,
        target=at_most(50, "ms"),
    )
    REPORT.figure("P3 delivery latency max", flat[-1] * 1000, "ms", yardstick=round_trip)
    REPORT.figure("P3 watchers that missed an event", float(not complete), "", target=equals(0))
    REPORT.figure(
        "P3 emulator CPU per write (incl. fan-out)",
        cpu / writes * 1000,
        "ms",
        yardstick=Yardstick("stdlib server CPU per request", BASE["cpu_per_request"].value, "ms"),
    )


# ---------------------------------------------------------------------------- P4


def p4(port: int, pid: int, watches: int, objects: int, events: int, idle_rss: float) -> None:
    conns = []
    for _ in range(watches):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/api/v1/nodes?watch=true&timeoutSeconds=300")
        c.getresponse()
        conns.append(c)
    errors = [0]

    def worker(k: int) -> None:
        c = Conn(port)
        for _ in range(50):
            code, _ = c.call("GET", f"{NS}/configmaps?limit=5&labelSelector=sel%3Dyes")
            if code != 200:
                errors[0] += 1
        del k
        c.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    REPORT.figure(f"P4 {watches} watches + 16 request connections: errors", errors[0], "", target=equals(0))
    for c in conns:
        c.close()
    fill(port, "p4", objects, connections=8)
    updates = max(0, events - objects)

    def updater(k: int) -> None:
        c = Conn(port)
        for i in range(k, updates, 8):
            c.call(
                "PATCH",
                f"{NS}/configmaps/p4-{i % objects:06d}",
                {"data": {"n": str(i)}},
                "application/merge-patch+json",
            )
        c.close()

    threads = [threading.Thread(target=updater, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    REPORT.figure(
        f"P4 RSS with +{objects:,} objects and {events:,} history events",
        rss_mb(pid),
        "MB",
        yardstick=REPORT.yardstick("the same emulator when ready", idle_rss, "MB"),
        target=at_most(300, "MB", sized=True),
    )


# ---------------------------------------------------------------------------- P5


def p5_in_process() -> None:
    from mcm.emulator import Emulator

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        emu = Emulator()
        emu.start()
        emu.install_crds(sorted(CRDS.glob("*.yaml")))
        best = min(best, time.perf_counter() - start)
        t = time.perf_counter()
        emu.close()
        stop = time.perf_counter() - t
    started, stopped = stdlib_start_stop()
    REPORT.figure(
        "P5 start + 4 MCM CRDs, in process",
        best * 1000,
        "ms",
        yardstick=REPORT.yardstick("stdlib server start", started * 1000, "ms"),
        target=at_most(300, "ms"),
    )
    REPORT.figure(
        "P5 stop, in process",
        stop * 1000,
        "ms",
        yardstick=REPORT.yardstick("stdlib server shutdown", stopped * 1000, "ms"),
        target=at_most(1_000, "ms"),
    )


# ---------------------------------------------------------------------------- P6


def p6(control: int, target: int, control_pid: int, target_pid: int, machines: int) -> None:
    cpu_before = cpu_seconds(control_pid) + cpu_seconds(target_pid)
    calls = [0]
    mpath = "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machines"
    lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases"

    def worker(k: int, workers: int) -> None:
        c, t = Conn(control), Conn(target)

        def call(conn: Conn, *args: Any) -> bytes:
            calls[0] += 1
            code, body = conn.call(*args)
            assert code < 300, (args[0], args[1], code, body[:200])
            return body

        for i in range(k, machines, workers):
            name = f"m{i:05d}"
            call(
                c,
                "POST",
                mpath,
                {
                    "apiVersion": "machine.sapcloud.io/v1alpha1",
                    "kind": "Machine",
                    "metadata": {"name": name, "labels": {"pool": "a"}},
                    "spec": {"class": {"kind": "MachineClass", "name": "c"}},
                },
            )
            call(
                c,
                "PATCH",
                f"{mpath}/{name}",
                {"metadata": {"finalizers": ["machine.sapcloud.io/machine-controller"]}},
                "application/merge-patch+json",
            )
            for phase in ("Pending", "Running"):
                call(
                    c,
                    "PATCH",
                    f"{mpath}/{name}/status",
                    {"status": {"currentStatus": {"phase": phase}}},
                    "application/merge-patch+json",
                )
            call(
                t,
                "POST",
                "/api/v1/nodes",
                {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            )
            for _ in range(3):
                call(t, "GET", f"/api/v1/nodes/{name}")
                call(
                    t,
                    "PATCH",
                    f"/api/v1/nodes/{name}/status",
                    {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                    "application/strategic-merge-patch+json",
                )
            call(
                c,
                "POST",
                "/api/v1/namespaces/default/events",
                {
                    "metadata": {"name": f"{name}.{i}"},
                    "involvedObject": {"kind": "Machine", "name": name},
                    "reason": "Created",
                    "message": "created",
                    "type": "Normal",
                },
            )
            if i % 10 == 0:
                call(c, "GET", lease)
        for i in range(k, machines, workers):
            name = f"m{i:05d}"
            call(
                t,
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"spec": {"unschedulable": True}},
                "application/strategic-merge-patch+json",
            )
            call(t, "GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{name}")
            call(t, "DELETE", f"/api/v1/nodes/{name}")
            call(c, "DELETE", f"{mpath}/{name}")
            call(
                c,
                "PATCH",
                f"{mpath}/{name}/status",
                {"status": {"currentStatus": {"phase": "Terminating"}}},
                "application/merge-patch+json",
            )
            call(
                c,
                "PATCH",
                f"{mpath}/{name}",
                {"metadata": {"finalizers": None}},
                "application/merge-patch+json",
            )
        c.close()
        t.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k, 8)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - start
    cpu = cpu_seconds(control_pid) + cpu_seconds(target_pid) - cpu_before
    REPORT.figure(f"P6 {machines:,}-machine up/down: API calls", calls[0], "")
    REPORT.figure(
        "P6 emulator CPU (both clusters)",
        cpu,
        "s",
        yardstick=REPORT.yardstick(
            "stdlib server CPU for as many requests", calls[0] * BASE["cpu_per_request"].value / 1000, "s"
        ),
        target=at_most(15, "s", sized=True),
    )
    REPORT.figure("P6 wall time", wall, "s")


PARTS = ("P1", "P2", "P3", "P4", "P5", "P6")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="3 %% of every size (CI)")
    parser.add_argument(
        "--only", action="append", choices=PARTS, help="run only these parts (repeatable; default: all)"
    )
    parser.add_argument("--p1-requests", type=int, help="P1 create/get/update/patch rounds (2,000)")
    parser.add_argument("--p2-objects", type=int, help="P2 objects in the large list (10,000)")
    parser.add_argument("--p3-writes", type=int, help="P3 writes (5,000)")
    parser.add_argument("--p3-watchers", type=int, default=10, help="P3 watchers (10)")
    parser.add_argument(
        "--p3-rate", type=float, default=1000.0, help="writes/s offered in P3 (default 1,000)"
    )
    parser.add_argument("--p4-watches", type=int, help="P4 idle watches (200)")
    parser.add_argument("--p4-objects", type=int, help="P4 extra objects (20,000)")
    parser.add_argument("--p4-events", type=int, help="P4 history events (100,000)")
    parser.add_argument("--p6-machines", type=int, help="P6 machines (1,000)")
    args = parser.parse_args()
    only = set(args.only or PARTS)
    scale = 0.03 if args.smoke else 1.0
    p1_requests_n = args.p1_requests or int(2000 * scale)
    large = args.p2_objects or int(10_000 * scale)
    small = min(large, int(1000 * scale) or 100)
    writes = args.p3_writes or int(5000 * scale)
    watches = args.p4_watches or (50 if args.smoke else 200)
    p4_objects = args.p4_objects or int(20_000 * scale)
    p4_events = args.p4_events or int(100_000 * scale)
    machines = args.p6_machines or int(1000 * scale)
    sizes = (args.p1_requests, args.p2_objects, args.p3_writes, args.p4_watches, args.p4_objects)
    full = not args.smoke and not any((*sizes, args.p4_events, args.p6_machines))
    global REPORT
    REPORT = Report(
        f"emulator benchmark ({'smoke' if args.smoke else 'full'}), python {sys.version.split()[0]}",
        full_size=full,
    )
    print(REPORT.title)
    with tempfile.TemporaryDirectory() as tmp, baseline_server() as (baseline_port, baseline_pid):
        base = Path(tmp)
        for sub in ("a", "b", "c"):
            (base / sub).mkdir()
        measure_baseline(baseline_port, baseline_pid, p1_requests_n)
        if only & {"P1", "P2", "P3", "P4", "P5"}:
            with emulator_process(base / "a") as (port, pid, ready_seconds):
                idle_rss = rss_mb(pid)
                if "P5" in only:
                    REPORT.figure(
                        "P5 start + 4 MCM CRDs, subprocess (to ready file)",
                        ready_seconds * 1000,
                        "ms",
                        yardstick=REPORT.yardstick("python -c pass", python_startup() * 1000, "ms"),
                        target=at_most(1_500, "ms"),
                    )
                if "P1" in only:
                    p1(port, p1_requests_n)
                if "P2" in only:
                    p2_small(port, baseline_port, small)
                    p2(port, baseline_port, small, large)
                if "P3" in only:
                    p3(port, pid, writes, args.p3_watchers, args.p3_rate)
                if "P4" in only:
                    p4(port, pid, watches, p4_objects, p4_events, idle_rss)
        if "P5" in only:
            p5_in_process()
        if "P6" in only:
            with (
                emulator_process(base / "b") as (control, control_pid, _),
                emulator_process(base / "c") as (target_port, target_pid, _),
            ):
                p6(control, target_port, control_pid, target_pid, machines)
    REPORT.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

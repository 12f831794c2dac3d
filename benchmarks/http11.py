"""Client CPU per plain request: ``.venv/bin/python benchmarks/http11.py [--smoke] [--requests N]``.

A loopback server in a child process answers every request with the same ~1 KB JSON answer (a
Machine-sized GET); this process sends GETs and measures the CPU time of its own thread per
request (``time.thread_time``, so the server's work is not counted), best of ``--repeat`` runs:

- the lean pool (``HTTP11Pool.request``) beside urllib3's ``HTTPConnectionPool.urlopen`` with the
  same headers (target: the lean pool costs at most a third);
- a whole ``ClusterClient.get_bytes`` (rate limiter, headers, error mapping) on the lean pool,
  beside the same client with the lean pool turned off (urllib3).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import urllib3
import yaml
from _report import Report, ratio_at_most

from mcm.runtime.client import load_config
from mcm.runtime.client.http11 import HTTP11Pool

REQUESTS = 3000
REPEAT = 7
PATH = "/apis/machine.sapcloud.io/v1alpha1/namespaces/shoot--bench/machines/shoot--bench-worker-00001"
HEADERS = {
    "Accept": "application/json",
    "User-Agent": "mcm/0.0.0 (linux/x86_64) kubernetes/python/bench",
    "Authorization": "Bearer abcdefghijklmnopqrstuvwxyz0123456789",
}

SERVER = r"""
import socket, sys, threading
body = b'{"kind":"Machine","metadata":{"name":"x"}' + b" " * 950 + b"}"
answer = (
    b"HTTP/1.1 200 OK\r\nAudit-Id: 5b0ad1a1\r\nCache-Control: no-cache, private\r\n"
    b"Content-Type: application/json\r\nDate: Mon, 07 Dec 2026 17:52:10 GMT\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
)
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)

def serve(sock):
    pending = b""
    while data := sock.recv(65536):
        pending += data
        while b"\r\n\r\n" in pending:
            _, _, pending = pending.partition(b"\r\n\r\n")
            sock.sendall(answer)

while True:
    sock, _ = listener.accept()
    threading.Thread(target=serve, args=(sock,), daemon=True).start()
"""


def cpu_per_call(call: Callable[[], object], requests: int, repeat: int) -> float:
    """Thread CPU µs per call, best of ``repeat`` runs of ``requests`` calls."""
    call()
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        for _ in range(requests):
            call()
        best = min(best, (time.thread_time() - started) / requests * 1e6)
    return best


def kubeconfig(directory: str, port: int) -> str:
    path = os.path.join(directory, "kubeconfig")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "abcdefghijklmnopqrstuvwxyz0123456789"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            },
            f,
        )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="few requests (targets not judged)")
    parser.add_argument("--requests", type=int, help=f"requests per run (default {REQUESTS:,})")
    parser.add_argument("--repeat", type=int, help=f"runs; the best counts (default {REPEAT})")
    args = parser.parse_args()
    requests = args.requests or (200 if args.smoke else REQUESTS)
    repeat = args.repeat or (2 if args.smoke else REPEAT)
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        report = Report("lean HTTP/1.1 client benchmark", full_size=not args.smoke)
        lean = HTTP11Pool("http", "127.0.0.1", port)
        plain = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=4)
        timeout = urllib3.Timeout(connect=10, read=10)
        urllib3_cost = cpu_per_call(
            lambda: plain.urlopen("GET", PATH, headers=HEADERS, retries=False, timeout=timeout).data,
            requests,
            repeat,
        )
        report.figure(
            "HTTP11Pool.request",
            cpu_per_call(lambda: lean.request("GET", PATH, HEADERS, timeout=10), requests, repeat),
            "µs CPU",
            yardstick=report.yardstick("urllib3 HTTPConnectionPool.urlopen", urllib3_cost, "µs CPU"),
            target=ratio_at_most(0.34, sized=True),
        )
        with tempfile.TemporaryDirectory() as directory:
            path = kubeconfig(directory, port)
            client, without = load_config(path, qps=-1), load_config(path, qps=-1)
            without.transport.connection.http11 = None
            baseline = cpu_per_call(lambda: without.get_bytes(PATH), requests, repeat)
            report.figure(
                "ClusterClient.get_bytes, lean pool",
                cpu_per_call(lambda: client.get_bytes(PATH), requests, repeat),
                "µs CPU",
                yardstick=report.yardstick("the same on urllib3", baseline, "µs CPU"),
                target=ratio_at_most(0.34, sized=True),
            )
        return report.print()
    finally:
        server.kill()


if __name__ == "__main__":
    sys.exit(main())

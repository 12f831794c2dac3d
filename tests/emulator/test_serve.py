"""``python -m mcm.emulator serve`` as a tool: line-buffered request log, graceful SIGTERM (watch
streams end with their terminating chunk, exit 0), files removed on exit unless ``--keep-files``,
and the admin listener on loopback unless ``--insecure``."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcm.emulator.__main__ import _parser, admin_host
from mcm.emulator.kubeconfig import tls_available

ROOT = Path(__file__).resolve().parents[2]


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], info: dict[str, str], tmp: Path) -> None:
        self.proc, self.info, self.tmp = proc, info, tmp

    def connection(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.info["url"])
        return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)


def _serve(tmp: Path, *extra: str, controllers: bool = False) -> Served:
    ready = tmp / "ready.json"
    command = [sys.executable, "-m", "mcm.emulator", "serve", "--kubeconfig", str(tmp / "kubeconfig")]
    command += ["--ready-file", str(ready), *([] if controllers else ["--no-controllers"]), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the emulator did not become ready")
        time.sleep(0.02)
    return Served(proc, json.loads(ready.read_text(encoding="utf-8")), tmp)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = _serve(tmp_path, "--request-log", str(tmp_path / "requests.jsonl"))
    yield server
    if server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait()


def test_request_log_is_line_buffered(served: Served) -> None:
    conn = served.connection()
    conn.request("GET", "/api/v1/namespaces/default")
    assert conn.getresponse().read()
    lines = (served.tmp / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    assert any(json.loads(line)["path"] == "/api/v1/namespaces/default" for line in lines)


def test_sigterm_ends_watches_cleanly_exits_0_and_removes_its_files(served: Served) -> None:
    conn = served.connection()
    conn.request("GET", "/api/v1/namespaces?watch=true")
    response = conn.getresponse()
    assert response.status == 200
    first = response.readline()  # the ADDED event of a seeded namespace: the stream is live
    assert b'"ADDED"' in first
    served.proc.send_signal(signal.SIGTERM)
    rest = response.read()  # raises IncompleteRead if the stream is cut without its final chunk
    assert b"ERROR" not in rest
    assert served.proc.wait(timeout=15) == 0
    assert not (served.tmp / "ready.json").exists()
    assert not (served.tmp / "kubeconfig").exists()


def test_keep_files_keeps_the_ready_file_and_kubeconfig(tmp_path: Path) -> None:
    server = _serve(tmp_path, "--keep-files")
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=15) == 0
    assert (tmp_path / "ready.json").exists() and (tmp_path / "kubeconfig").exists()


@pytest.mark.skipif(not tls_available(), reason="TLS material needs the openssl command")
def test_tls_material_is_removed_on_exit_unless_kept(tmp_path: Path) -> None:
    for keep in (False, True):
        run = tmp_path / ("kept" if keep else "removed")
        run.mkdir()
        server = _serve(run, "--tls", *(["--keep-files"] if keep else []))
        assert (run / "emulator-tls").is_dir()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=15) == 0
        assert (run / "emulator-tls").exists() is keep


def test_admin_listener_is_loopback_only_unless_insecure() -> None:
    args = _parser().parse_args(["serve", "--kubeconfig", "k", "--host", "0.0.0.0", "--tls"])
    assert admin_host(args) == "127.0.0.1"
    plain = _parser().parse_args(["serve", "--kubeconfig", "k", "--host", "0.0.0.0"])
    assert admin_host(plain) == "127.0.0.1"
    insecure = _parser().parse_args(["serve", "--kubeconfig", "k", "--host", "0.0.0.0", "--insecure"])
    assert admin_host(insecure) == "0.0.0.0"


def test_missing_crds_path_is_a_clear_error(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mcm.emulator", "serve", "--kubeconfig", str(tmp_path / "k")]
    result = subprocess.run(
        [*command, "--crds", str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def _call(served: Served, method: str, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
    conn = served.connection()
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    answer: dict[str, object] = json.loads(response.read())
    assert response.status < 300, answer
    return answer


def test_run_pods_starts_the_pods_bound_to_an_existing_node(tmp_path: Path) -> None:
    server = _serve(tmp_path, "--run-pods", controllers=True)
    try:
        _call(server, "POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
        pod = {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "web", "image": "nginx"}]},
        }
        _call(server, "POST", "/api/v1/namespaces/default/pods", pod)
        deadline = time.monotonic() + 30
        while (_call(server, "GET", "/api/v1/namespaces/default/pods/web").get("status") or {}).get(
            "phase"
        ) != "Running":
            assert time.monotonic() < deadline, "the pod was not started"
            time.sleep(0.05)
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=15) == 0


def test_run_pods_without_the_controllers_is_a_clear_error(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mcm.emulator", "serve", "--kubeconfig", str(tmp_path / "k")]
    result = subprocess.run(
        [*command, "--run-pods", "--no-controllers"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "--run-pods needs the simulated controllers" in result.stderr

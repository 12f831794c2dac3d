"""``/metrics`` of both commands, scraped from real processes: no ``*_created`` series.

prometheus-client adds a ``<name>_created`` gauge to every counter, summary and histogram by
default; upstream's Go client exposes none, and dashboards written for upstream expect none.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from mcm.emulator import ClusterPair, Emulator

REPO = Path(__file__).resolve().parents[2]
MCC_CRDS = sorted((REPO / "charts" / "machine-config-controller" / "crds").glob("*.yaml"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError as exc:
        return 0, str(exc)


def _scrape_when_ready(args: list[str], port: int, log_path: Path) -> str:
    """Start the command, wait for ``/readyz``, return one ``/metrics`` body; stop it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while _get(f"http://127.0.0.1:{port}/readyz")[0] != 200:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "not ready in 60s"
            time.sleep(0.1)
        status, body = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        return body
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def _series(body: str) -> set[str]:
    return {match.group(1) for match in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", body, re.MULTILINE)}


def test_machine_controller_serves_no_created_series(tmp_path: Path) -> None:
    port = _free_port()
    with ClusterPair.start(tmp_path) as pair:
        body = _scrape_when_ready(
            [
                sys.executable,
                "-m",
                "mcm.app.cli",
                f"--control-kubeconfig={pair.control_kubeconfig}",
                f"--target-kubeconfig={pair.target_kubeconfig}",
                "--driver=fake",
                "--leader-elect=false",
                "--address=127.0.0.1",
                f"--port={port}",
            ],
            port,
            tmp_path / "mc.log",
        )
    series = _series(body)
    assert "mcm_workqueue_adds_total" in series  # counters are there ...
    assert "mcm_workqueue_queue_duration_seconds_bucket" in series  # ... and histograms
    assert sorted(s for s in series if s.endswith("_created")) == []


def test_machine_config_controller_serves_no_created_series(tmp_path: Path) -> None:
    port = _free_port()
    with Emulator() as emulator:
        emulator.install_crds(MCC_CRDS)
        kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
        body = _scrape_when_ready(
            [
                sys.executable,
                "-m",
                "mcm.app.mcc.cli",
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--address=127.0.0.1",
                f"--port={port}",
            ],
            port,
            tmp_path / "mcc.log",
        )
    series = _series(body)
    assert "workqueue_adds_total" in series
    assert sorted(s for s in series if s.endswith("_created")) == []

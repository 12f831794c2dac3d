"""The ``machine-config-controller`` command: flags, start-up errors, leader election on Lease
``machine-config-controller``, /metrics /healthz /readyz, JSON logs, and the demo."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mcm.app.mcc import runner
from mcm.app.mcc.cli import machine_config_controller, main
from mcm.app.mcc.options import MccOptions
from mcm.machineconfig import api
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import LEASES
from mcm.testing.machineconfig import controller_config

from .fixtures import REPO, eventually, pool_manifest

if TYPE_CHECKING:
    from mcm.emulator import Emulator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError as exc:
        return 0, str(exc)


def _options(kubeconfig: Path, **changes: Any) -> MccOptions:
    return MccOptions(
        kubeconfig=str(kubeconfig),
        address="127.0.0.1",
        port=_free_port(),
        render_delay=0.1,
        leader_elect_lease_duration=2.0,
        leader_elect_renew_deadline=1.5,
        leader_elect_retry_period=0.2,
        shutdown_grace_period=5.0,
    ).replace(**changes)


class Running:
    def __init__(self, options: MccOptions) -> None:
        self.stop = threading.Event()
        self.code: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.code.append(runner.run(options, stop=self.stop, really_crash=False))
        )
        self.thread.start()

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive()
        return self.code[0]


def _lease(client: ClusterClient) -> dict[str, Any] | None:
    try:
        lease: dict[str, Any] = client.resource(LEASES).get(api.LEASE_NAME, namespace="default")
    except NotFound:
        return None
    return lease


def test_leads_on_its_lease_serves_endpoints_rolls_out_and_releases_the_lease(
    mcc_emulator: Emulator, client: ClusterClient, tmp_path: Path
) -> None:
    kubeconfig = mcc_emulator.write_kubeconfig(tmp_path / "kc")
    client.resource(api.CONTROLLER_CONFIGS).create(controller_config())
    client.resource(api.MACHINE_POOLS).create(pool_manifest("worker", 1))
    options = _options(kubeconfig)
    running = Running(options)
    base = f"http://127.0.0.1:{options.port}"
    eventually(lambda: _get(f"{base}/readyz") == (200, "ok"), what="ready")
    lease = _lease(client)
    assert lease is not None and lease["spec"]["holderIdentity"].startswith(socket.gethostname())
    assert _get(f"{base}/healthz") == (200, "ok")
    eventually(
        lambda: api.status_of(client.resource(api.MACHINE_POOLS).get("worker")).get("currentMachineConfig")
    )
    status, metrics = _get(f"{base}/metrics")
    assert status == 200
    assert 'leader_election_master_status{name="machine-config-controller"} 1.0' in metrics
    assert 'workqueue_adds_total{name="machineconfigcontroller-rendercontroller"}' in metrics
    assert 'mcc_machinepool_machines{pool="worker",state="total"} 0.0' in metrics
    assert "mcc_machinepool_rollout_duration_seconds" in metrics
    assert running.finish() == 0
    released = _lease(client)
    assert released is not None and not released["spec"].get("holderIdentity")


def test_without_leader_election_it_runs_at_once_and_takes_no_lease(
    mcc_emulator: Emulator, client: ClusterClient, tmp_path: Path
) -> None:
    options = _options(mcc_emulator.write_kubeconfig(tmp_path / "kc"), leader_elect=False)
    running = Running(options)
    eventually(lambda: _get(f"http://127.0.0.1:{options.port}/readyz") == (200, "ok"), what="ready")
    assert _lease(client) is None
    assert running.finish() == 0


def test_an_api_server_that_does_not_answer_yet_is_waited_for_not_an_exit(
    mcc_emulator: Emulator, tmp_path: Path
) -> None:
    """A network blip at start-up must not end the process (it would crash-loop in a cluster):
    the endpoints are served, /readyz says what start-up waits for, SIGTERM exits 0."""
    kubeconfig = mcc_emulator.write_kubeconfig(tmp_path / "kc")
    dead = f"https://127.0.0.1:{_free_port()}"
    text = kubeconfig.read_text()
    server = next(line.split("server:", 1)[1].strip() for line in text.splitlines() if "server:" in line)
    kubeconfig.write_text(text.replace(server, dead))
    options = _options(kubeconfig)
    running = Running(options)
    base = f"http://127.0.0.1:{options.port}"
    try:
        eventually(lambda: _get(f"{base}/readyz") == (500, "waiting for the API server"), what="waiting")
        assert _get(f"{base}/healthz") == (200, "ok")
        assert running.thread.is_alive()
    finally:
        code = running.finish()
    assert code == 0


def test_missing_crds_and_bad_kubeconfig_are_one_line_startup_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcm.emulator import Emulator

    with Emulator() as bare:
        options = _options(bare.write_kubeconfig(tmp_path / "kc"))
        assert runner.run(options, stop=threading.Event(), really_crash=False) == 1
    error = capsys.readouterr().err
    assert "does not serve machineconfiguration.openshift.io/v1 machineconfigs, machinepools" in error
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    assert runner.run(_options(broken), stop=threading.Event(), really_crash=False) == 1
    second = capsys.readouterr().err.strip()
    assert second.startswith("error: ") and "\n" not in second


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--render-delay=soon"], "--render-delay"),
        (["--leader-elect-renew-deadline=20s"], "--leader-elect-lease-duration must be greater"),
        (["--concurrent-syncs=0"], "--concurrent-syncs must be at least 1"),
        (["--no-such-flag"], "No such option"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_flags_parse_as_pflag_does() -> None:
    args = [
        "--leader-elect=false",
        "--render_delay=1m30s",
        "--kube-api-qps=50",
        "--leader-elect-retry-period",
        "3s",
    ]
    with machine_config_controller.make_context("machine-config-controller", args) as ctx:
        options = MccOptions(**ctx.params)
    assert (options.leader_elect, options.render_delay, options.kube_api_qps) == (False, 90.0, 50.0)
    assert options.leader_elect_retry_period == 3.0 and options.port == 10260
    assert 'machine-config-controller = "mcm.app.mcc.cli:main"' in (REPO / "pyproject.toml").read_text()


def test_logs_are_json_lines(mcc_emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = mcc_emulator.write_kubeconfig(tmp_path / "kc")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcm.app.mcc.cli",
            f"--kubeconfig={kubeconfig}",
            "--address=127.0.0.1",
            f"--port={_free_port()}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "campaigning_for_leadership" in line:
            break
    process.terminate()
    assert process.wait(20) == 0
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert records and all("ts" in r and "msg" in r for r in records)
    campaign = next(r for r in records if r["msg"] == "campaigning_for_leadership")
    assert campaign["lease"] == "default/machine-config-controller"


@pytest.mark.slow
def test_demo_rolls_out_over_two_pools_and_exits_0(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcm.app.mcc.cli",
            "demo",
            "--workdir",
            str(tmp_path / "w"),
            "--summary-json",
            str(summary),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(summary.read_text())
    assert set(report["pools"]) == {"master", "worker"}
    for pool in report["pools"].values():
        assert 1 <= pool["maxUnavailableSeen"] <= pool["maxUnavailable"]
    assert "CURRENT" in result.stdout and "DESIRED" in result.stdout and "STATE" in result.stdout
    controller_log = (tmp_path / "w" / "machine-config-controller.log").read_text()
    assert "stopped_leading" in controller_log
    assert "failed_to_release_lock" not in controller_log, "the controller stops before the API server"

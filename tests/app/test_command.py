"""The ``machine-controller`` command as a subprocess against emulated clusters (ClusterPair)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.apis.machine.resources import MACHINES
from mcm.app.demo import demo_objects
from mcm.emulator import ClusterPair, Emulator
from mcm.emulator.kubeconfig import issue_client_cert, make_tls_material, tls_available
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, LEASES

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcm.app.cli", *args]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*args), capture_output=True, text=True, timeout=timeout, env=_env(), check=False
    )


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0]


# --- bad input ----------------------------------------------------------------------------------


def test_missing_kubeconfig(tmp_path: Path) -> None:
    result = _run(f"--target-kubeconfig={tmp_path / 'nope'}", "--driver=fake")
    _assert_one_line_error(result, "does not exist")
    assert result.returncode == 1


def test_garbled_kubeconfig(tmp_path: Path) -> None:
    garbled = tmp_path / "kubeconfig"
    garbled.write_text("clusters: [oops\n")
    _assert_one_line_error(_run(f"--target-kubeconfig={garbled}", "--driver=fake"), "kubeconfig")


def test_cluster_without_the_crds(tmp_path: Path) -> None:
    with Emulator() as bare:
        path = bare.write_kubeconfig(tmp_path / "bare")
        result = _run(f"--target-kubeconfig={path}", "--driver=fake", f"--port={_free_port()}")
    _assert_one_line_error(result, "machine.sapcloud.io/v1alpha1", "CRDs")
    assert result.returncode == 1


@pytest.mark.parametrize("entry", ["client-certificate", "client-key", "certificate-authority", "tokenFile"])
def test_a_missing_credential_file_is_a_one_line_error_not_a_wait(tmp_path: Path, entry: str) -> None:
    """A file the kubeconfig names that does not exist is a configuration error at start-up, as
    client-go's is (exit 1, the file named); only network faults are waited for."""
    server = f"https://127.0.0.1:{_free_port()}"
    cluster: dict[str, Any] = {"server": server, "insecure-skip-tls-verify": True}
    user: dict[str, Any] = {}
    if entry == "certificate-authority":
        cluster = {"server": server, "certificate-authority": "missing"}
        user = {"token": "t"}
    elif entry == "tokenFile":
        user = {"tokenFile": "missing"}
    else:  # the other file of the pair exists, so the missing one is the only problem
        (tmp_path / "present").write_text("")
        user = {"client-certificate": "present", "client-key": "present", entry: "missing"}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    result = _run(f"--target-kubeconfig={kubeconfig}", "--driver=fake", f"--port={_free_port()}", timeout=45)
    missing = tmp_path / "missing"
    _assert_one_line_error(result, "target cluster", f"{entry} '{missing}' cannot be read", "No such file")
    assert result.returncode == 1


def test_an_unreachable_api_server_is_waited_for_until_a_signal(tmp_path: Path) -> None:
    """A network blip at start-up never ends the process (upstream exits after 10 s): it
    retries, serving /healthz, until SIGTERM, and then exits 0."""
    with Emulator() as gone:
        path = gone.write_kubeconfig(tmp_path / "gone")
    log_path = tmp_path / "controller.log"
    port = _free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            _command(
                f"--target-kubeconfig={path}",
                "--driver=fake",
                "--address=127.0.0.1",
                f"--port={port}",
                "--log-format=json",
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
        try:
            _wait("a logged failed attempt", lambda: '"cluster_not_reachable"' in log_path.read_text())
            assert process.poll() is None
            assert _http_status(port, "/healthz") == 200
            assert _http_status(port, "/readyz") == 500
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(30)
    assert code == 0
    assert "Traceback" not in log_path.read_text()


def _http_status(port: int, path: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_invalid_duration() -> None:
    result = _run("--machine-creation-timeout=20")
    _assert_one_line_error(result, "--machine-creation-timeout", "missing unit")
    assert result.returncode == 2


def test_driver_module_that_does_not_import(tmp_path: Path) -> None:
    (tmp_path / "broken_driver.py").write_text("import does_not_exist\n")
    env = {**_env(), "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"}
    result = subprocess.run(
        _command("--driver=broken_driver:Driver"),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    _assert_one_line_error(result, "broken_driver", "does_not_exist")


# --- the controller at work ---------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ClusterPair]:
    with ClusterPair.start(tmp_path) as pair:
        yield pair


@pytest.fixture
def control(pair: ClusterPair) -> Iterator[ClusterClient]:
    client = load_config(str(pair.control_kubeconfig), qps=-1)
    yield client
    client.close()


class Controller:
    """A machine-controller process with its log in a file."""

    def __init__(self, tmp_path: Path, pair: ClusterPair, name: str, *extra: str) -> None:
        self.log_path = tmp_path / f"{name}.log"
        self.port = _free_port()
        args = [
            f"--control-kubeconfig={pair.control_kubeconfig}",
            f"--target-kubeconfig={pair.target_kubeconfig}",
            "--address=127.0.0.1",
            f"--port={self.port}",
            "--log-format=json",
            *extra,
        ]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            _command(*args), stdout=self._log, stderr=subprocess.STDOUT, env=_env()
        )

    def log(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                lines.append({"msg": line})
        return lines

    def logged(self, msg: str) -> bool:
        return any(entry.get("msg") == msg for entry in self.log())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            self._log.close()


def _wait(what: str, check: Callable[[], bool], timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _phases(control: ClusterClient) -> dict[str, str]:
    items = control.resource(MACHINES).list(namespace="default").get("items") or []
    return {
        m["metadata"]["name"]: ((m.get("status") or {}).get("currentStatus") or {}).get("phase", "")
        for m in items
    }


def _create_machines(control: ClusterClient, count: int, first: int = 1) -> None:
    for resource, body in demo_objects(count + first - 1, boot_delay=0.2):
        name = body["metadata"]["name"]
        if resource == MACHINES and int(name.rsplit("-", 1)[1]) < first:
            continue
        try:
            control.resource(resource).create(body, namespace="default")
        except Exception as exc:  # the class and secret already exist on later calls
            if "already exists" not in str(exc):
                raise


def _all_running(control: ClusterClient, count: int) -> Callable[[], bool]:
    return lambda: list(_phases(control).values()).count("Running") == count


def _lease_holder(control: ClusterClient) -> str:
    try:
        lease = control.resource(LEASES).get("machine-controller", namespace="default")
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def test_machines_go_running_with_the_local_driver(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    _create_machines(control, 3)
    controller = Controller(tmp_path, pair, "mc", "--driver=local")
    try:
        _wait("3 Running machines", _all_running(control, 3))
    finally:
        assert controller.stop() == 0
    messages = [entry.get("msg") for entry in controller.log()]
    assert messages.count("start_up_heap_frozen") == 1
    assert messages.index("start_up_heap_frozen") < messages.index("starting_machine_controller")


def _sidecar_tls(tmp_path: Path, transport: str) -> tuple[list[str], list[str]]:
    """The sidecar's endpoint and TLS flags, and the controller's matching driver flags."""
    if transport == "unix socket":
        socket_path = tmp_path / "driver.sock"
        return ["--endpoint", f"unix:{socket_path}"], [f"--driver-endpoint=unix://{socket_path}"]
    if not tls_available():
        pytest.skip("TLS needs the openssl command")
    pki = make_tls_material(tmp_path / "pki")
    sidecar = ["--endpoint", "127.0.0.1:0", "--tls-cert-file", str(pki.server_cert)]
    sidecar += ["--tls-key-file", str(pki.server_key)]
    controller = [f"--driver-ca-file={pki.ca_cert}"]
    if transport == "mutual TLS on loopback":
        issue_client_cert(pki, "controller", "machine-controller")
        sidecar += ["--tls-client-ca-file", str(pki.ca_cert)]
        controller += [
            f"--driver-cert-file={pki.directory / 'controller.crt'}",
            f"--driver-key-file={pki.directory / 'controller.key'}",
        ]
    return sidecar, controller


UPSTREAM_MANIFEST_ARGS = [
    # The machine-controller container of machine-controller-manager-provider-aws's
    # kubernetes/deployment.yaml (v0.4.0), kubeconfig paths aside ...
    "--control-kubeconfig={control}",
    "--target-kubeconfig={target}",
    "--machine-creation-timeout=20m",
    "--machine-drain-timeout=5m",
    "--machine-health-timeout=10m",
    "--machine-safety-orphan-vms-period=30m",
    "--node-conditions=ReadonlyFilesystem,KernelDeadlock,DiskPressure",
    "--v=3",
    # ... and klog flags as other Kubernetes components' manifests pass them.
    "--logtostderr=true",
    "--alsologtostderr",
    "--log_dir=/var/log",
    "--stderrthreshold=info",
    "--vmodule=controller=4",
    "--add_dir_header",
    "-v=3",
]


def test_an_upstream_manifests_args_start_the_controller_unchanged(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    args = [
        a.format(control=pair.control_kubeconfig, target=pair.target_kubeconfig)
        for a in UPSTREAM_MANIFEST_ARGS
    ]
    _create_machines(control, 1)
    controller = Controller(tmp_path, pair, "mc", *args, "--driver=local")
    try:
        _wait("a Running machine", _all_running(control, 1))
        warned = {e["flag"]: e["reason"] for e in controller.log() if e.get("msg") == "flag_has_no_effect"}
        assert warned == {
            "--alsologtostderr": "--logtostderr is true (as in klog)",
            "--log-dir": "--logtostderr is true (as in klog)",
            "--stderrthreshold": "--logtostderr is true (as in klog)",
            "--vmodule": "one verbosity (--v) applies to all code",
            "--add-dir-header": "mcm's log lines have no klog header",
        }
    finally:
        assert controller.stop() == 0


@pytest.mark.parametrize("transport", ["unix socket", "TLS on loopback", "mutual TLS on loopback"])
def test_machines_go_running_with_the_local_driver_over_grpc(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient, transport: str
) -> None:
    """Both ends as users run them: the sidecar command and ``machine-controller`` with the
    ``--driver-*`` flags (issue 26 #4: TLS and mutual TLS to a driver off the pod)."""
    sidecar_flags, controller_flags = _sidecar_tls(tmp_path, transport)
    env = {
        **_env(),
        "MCM_LOCAL_CONTROL_KUBECONFIG": str(pair.control_kubeconfig),
        "MCM_LOCAL_TARGET_KUBECONFIG": str(pair.target_kubeconfig),
    }
    sidecar = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcm.driver.grpc",
            "--driver",
            "mcm.driver.local:from_environment",
            *sidecar_flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert sidecar.stdout is not None
        serving = sidecar.stdout.readline().split()
        assert serving[:1] == ["serving"], serving
        if transport != "unix socket":
            controller_flags.append(f"--driver-endpoint={serving[1]}")
        _create_machines(control, 2)
        controller = Controller(tmp_path, pair, "mc", *controller_flags)
        try:
            _wait("2 Running machines", _all_running(control, 2))
        finally:
            assert controller.stop() == 0
        if transport != "unix socket":
            started = [e for e in controller.log() if e.get("msg") == "driver_client_started"]
            assert [e.get("transport") for e in started] == ["tls"], started
    finally:
        sidecar.send_signal(signal.SIGTERM)
        sidecar.wait(30)


def _events(control: ClusterClient) -> list[dict[str, Any]]:
    return list(control.resource(EVENTS).list(namespace="default").get("items") or [])


def test_retried_conflicts_are_no_warning_events(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    """A 409 on a Machine write is routine (the next pass writes from fresh data): the machines
    go Running and are deleted with Normal Events only, no ``StatusUpdateFailed`` Warning."""
    status = pair.control.faults.add(
        code=409, times=4, verb="update", resource="machines", subresource="status"
    )
    _create_machines(control, 2)
    controller = Controller(tmp_path, pair, "mc", "--driver=local")
    try:
        _wait("2 Running machines", _all_running(control, 2))
        control.resource(MACHINES).delete("demo-machine-1", namespace="default")
        _wait("the deleted machine gone", lambda: "demo-machine-1" not in _phases(control))
        _wait(
            "the Running events of both machines",
            lambda: sum(e["reason"] == "MachineRunning" for e in _events(control)) == 2,
        )
    finally:
        assert controller.stop() == 0
    assert status.hits == 4
    warnings = [(e["reason"], e["message"]) for e in _events(control) if e["type"] == "Warning"]
    assert warnings == []


def test_a_class_applied_with_its_machines_gives_no_warning_and_the_machines_go_running(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    """Applied at once to a running controller, the machines are reconciled before the class loop
    has put its finalizer on the class: routine, a log line and a short retry, no Warning Event
    ``ClassNotReady`` on every Machine."""
    controller = Controller(tmp_path, pair, "mc", "--driver=local")
    # Hold the class loop's finalizer write back until the machines have met the class without
    # it, so the race the test is about happens on every run, however loaded the machine.
    held = pair.control.faults.add(code=500, times=None, verb="update", resource="machineclasses")
    try:
        _wait("the controller to lead", lambda: _lease_holder(control) != "")
        _create_machines(control, 3)
        _wait(
            "a machine to meet the class without its finalizer",
            lambda: controller.logged("machine_class_not_ready"),
        )
        held.remove()
        _wait("3 Running machines", _all_running(control, 3))
    finally:
        assert controller.stop() == 0
    warnings = [(e["reason"], e["message"]) for e in _events(control) if e["type"] == "Warning"]
    assert warnings == []


def test_sigterm_mid_flight_releases_the_lease_and_exits_0(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    controller = Controller(tmp_path, pair, "mc", "--driver=local", "--shutdown-grace-period=10s")
    _wait("the lease", lambda: _lease_holder(control) != "")
    _create_machines(control, 5)
    _wait("a machine in flight", lambda: any(_phases(control).values()))
    started = time.monotonic()
    assert controller.stop(signal.SIGTERM, timeout=20) == 0
    assert time.monotonic() - started < 15
    assert _lease_holder(control) == ""


def test_two_replicas_one_leads_the_other_takes_over(
    tmp_path: Path, pair: ClusterPair, control: ClusterClient
) -> None:
    election = [
        "--driver=local",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
    ]
    first = Controller(tmp_path, pair, "first", *election)
    _wait("the first replica to lead", lambda: first.logged("became_leader"))
    second = Controller(tmp_path, pair, "second", *election)
    try:
        _wait("the second replica to campaign", lambda: second.logged("campaigning_for_leadership"))
        _create_machines(control, 2)
        _wait("2 Running machines", _all_running(control, 2))
        assert not second.logged("starting_machine_controller"), "only the leader reconciles"
        first.stop(signal.SIGKILL)
        _wait("the second replica to take over", lambda: second.logged("became_leader"), timeout=30)
        _create_machines(control, 1, first=3)
        _wait("the new machine to run", _all_running(control, 3))
    finally:
        first.stop(signal.SIGKILL)
        assert second.stop() == 0


@pytest.mark.slow
def test_demo_runs_to_the_end_with_its_machine_deployment(tmp_path: Path) -> None:
    """The whole story: machines, a drain, then the MachineDeployment created, scaled up, rolled
    to the other class, healed after a lost Node and scaled to 0 (about a minute on an idle
    machine; the bound only catches a hang)."""
    summary = tmp_path / "summary.json"
    result = subprocess.run(
        _command(
            "demo", "--machines", "3", "--workdir", str(tmp_path / "work"), "--summary-json", str(summary)
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(summary.read_text())
    assert report["machines_created"] == 3
    assert report["vms_left"] == 2 and report["nodes_left"] == 2  # the pool's are gone with it
    assert not any("joined" in step for step in report["deletion_steps"]), report["deletion_steps"]
    pool = report["pool"]
    assert (pool["name"], pool["replicas"], pool["rolled"]) == (
        "demo-pool",
        3,
        ["local-small", "local-large"],
    )
    assert pool["lost"].startswith("demo-pool-") and pool["replacement"].startswith("demo-pool-")
    assert pool["lost"] != pool["replacement"]
    assert list(pool["step_seconds"]) == ["create", "scale", "roll", "heal", "scale_to_zero"]
    for header in ("READY  DESIRED  UP-TO-DATE  AVAILABLE  AGE", "DESIRED  CURRENT  READY  AGE  CLASS"):
        assert header in result.stdout

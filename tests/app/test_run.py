"""``mcm.app.run``: start-up checks, HTTP endpoints, leader election and shutdown, in process.

The controller is replaced by a stand-in through ``new_controller`` (the one place the app
builds it), so these tests pin the app's own sequence.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.app import runner as app_run
from mcm.app.options import Options
from mcm.app.runner import LEASE_NAME, Clients, StartupError, build_clients, check_control_cluster
from mcm.driver import FakeDriver
from mcm.emulator import ClusterPair, Emulator
from mcm.runtime.client import load_config
from mcm.runtime.client.errors import Conflict
from mcm.runtime.client.resources import LEASES


class StandIn:
    """Runs until stopped; records what it was given."""

    def __init__(self, options: Options, driver: Any, clients: Clients) -> None:
        self.clients = clients
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.synced = False

    def run(self, workers: int, stop: threading.Event) -> None:
        self.synced = True
        self.started.set()
        stop.wait()
        self.stopped.set()

    def has_synced(self) -> bool:
        return self.synced


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ClusterPair]:
    with ClusterPair.start(tmp_path) as pair:
        yield pair


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> list[StandIn]:
    made: list[StandIn] = []

    def new_controller(options: Options, driver: Any, clients: Clients, recorder: Any = None) -> StandIn:
        made.append(StandIn(options, driver, clients))
        return made[-1]

    monkeypatch.setattr(app_run, "new_controller", new_controller)
    return made


def _options(pair: ClusterPair, **changes: Any) -> Options:
    base: dict[str, Any] = {
        "control_kubeconfig": str(pair.control_kubeconfig),
        "target_kubeconfig": str(pair.target_kubeconfig),
        "address": "127.0.0.1",
        "port": _free_port(),
        "leader_elect_lease_duration": 2.0,
        "leader_elect_renew_deadline": 1.5,
        "leader_elect_retry_period": 0.2,
        "shutdown_grace_period": 5.0,
    }
    base.update(changes)
    return Options.defaults(**base)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Running:
    def __init__(self, options: Options) -> None:
        self.stop = threading.Event()
        self.code: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.code.append(
                app_run.run(options, FakeDriver(), stop=self.stop, really_crash=False)
            )
        )
        self.thread.start()

    def finish(self, timeout: float = 15.0) -> int:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        return self.code[0]


def _lease(pair: ClusterPair) -> dict[str, Any] | None:
    obj: dict[str, Any] | None = pair.control.get("leases.coordination.k8s.io", "default", LEASE_NAME)
    return obj


def test_leads_serves_endpoints_and_releases_the_lease_on_stop(
    pair: ClusterPair, stand_ins: list[StandIn]
) -> None:
    options = _options(pair)
    running = Running(options)
    assert pair.control.wait_for(lambda: bool(stand_ins) and stand_ins[0].started.is_set(), 15)
    lease = _lease(pair)
    assert lease is not None and lease["spec"]["holderIdentity"]
    base = f"http://127.0.0.1:{options.port}"
    assert _get(f"{base}/healthz") == (200, "ok")
    assert _get(f"{base}/readyz") == (200, "ok")
    status, metrics = _get(f"{base}/metrics")
    assert status == 200 and "python_info" in metrics
    assert 'leader_election_master_status{name="machine-controller"} 1.0' in metrics
    assert _get(f"{base}/configz") == (200, "{}")
    assert stand_ins[0].clients.target is not None
    assert "machine-leader-election" in stand_ins[0].clients.leader_election.user_agent

    assert running.finish() == 0
    assert stand_ins[0].stopped.is_set()
    released = _lease(pair)
    assert released is not None and not released["spec"].get("holderIdentity")


def test_a_lost_lease_exits_non_zero(pair: ClusterPair, stand_ins: list[StandIn]) -> None:
    running = Running(_options(pair))
    assert pair.control.wait_for(lambda: bool(stand_ins) and stand_ins[0].started.is_set(), 15)
    client = load_config(str(pair.control_kubeconfig))
    leases = client.resource(LEASES)
    for _ in range(50):  # the leader renews every 0.2 s: retry on conflicts
        stolen = leases.get(LEASE_NAME, namespace="default")
        stolen["spec"]["holderIdentity"] = "someone-else"
        stolen["spec"]["leaseDurationSeconds"] = 3600
        try:
            leases.update(stolen)
            break
        except Conflict:
            continue
    running.thread.join(15)
    assert running.code == [1]
    assert stand_ins[0].stopped.is_set()
    client.close()


def test_without_leader_election_the_controller_runs_at_once(
    pair: ClusterPair, stand_ins: list[StandIn]
) -> None:
    running = Running(_options(pair, leader_elect=False))
    assert pair.control.wait_for(lambda: bool(stand_ins) and stand_ins[0].started.is_set(), 15)
    assert _lease(pair) is None
    assert running.finish() == 0


def _lonely_namespace() -> str:
    """A namespace no other process on this host campaigns in (tests run in parallel)."""
    import uuid

    return f"ns-{uuid.uuid4().hex[:12]}"


def test_second_process_on_the_host_gets_a_suffixed_identity(pair: ClusterPair) -> None:
    clients = build_clients(_options(pair))
    namespace = _lonely_namespace()
    with (
        app_run.leader_identity(clients, namespace) as first,
        app_run.leader_identity(clients, namespace) as second,
    ):
        assert "_" not in first
        assert second.startswith(first + "_")
    clients.close()


def test_replicas_reaching_the_cluster_at_different_addresses_get_distinct_identities(
    pair: ClusterPair, tmp_path: Path
) -> None:
    """Found by the chaos suite: two replicas on one host, each through its own address (a proxy,
    ``localhost`` versus ``127.0.0.1``), both campaigned as the bare hostname and both led."""
    from mcm.emulator.kubeconfig import write_kubeconfig

    url = str(pair.control.url).replace("127.0.0.1", "localhost")
    other = write_kubeconfig(tmp_path / "other", "other", url)
    first_clients = build_clients(_options(pair))
    second_clients = build_clients(_options(pair, control_kubeconfig=str(other)))
    assert first_clients.control.host != second_clients.control.host
    namespace = _lonely_namespace()
    with (
        app_run.leader_identity(first_clients, namespace) as first,
        app_run.leader_identity(second_clients, namespace) as second,
    ):
        assert first != second
    first_clients.close()
    second_clients.close()


def test_the_target_cluster_check_retries_until_the_discovery_timeout(pair: ClusterPair) -> None:
    """Found by the chaos suite: one refused connection to the target at start-up ended the
    process (exit 1), although the control cluster gets the discovery timeout to answer."""
    clients = build_clients(_options(pair))
    assert clients.target is not None
    target = pair.target

    def refused() -> int:
        return int(target.stats.count("nonresource", "/version", code=503))

    def resume_after_two_refusals() -> None:
        deadline = time.monotonic() + 10
        while refused() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        target.resume()

    target.pause("error")
    helper = threading.Thread(target=resume_after_two_refusals)
    helper.start()
    app_run.check_target_cluster(clients.target, timeout=8.0)
    helper.join()
    assert refused() == 2
    target.pause("error")
    with pytest.raises(StartupError, match=r"target cluster .* is not reachable"):
        app_run.check_target_cluster(clients.target, timeout=0.5)
    target.resume()
    clients.close()


def test_a_failed_discovery_request_is_retried_like_healthz(
    pair: ClusterPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the chaos suite: /healthz answered, then the discovery GET was reset, and the
    process ended (exit 1) instead of asking again within the discovery timeout."""
    from mcm.runtime.client.discovery import DiscoveryClient
    from mcm.runtime.client.errors import ConnectionFailed

    real = DiscoveryClient.has_resource
    failures = [ConnectionFailed("GET /apis/machine.sapcloud.io/v1alpha1: connection reset")]

    def flaky(self: DiscoveryClient, group_version: str, resource: str, kind: str | None = None) -> bool:
        if failures:
            raise failures.pop()
        return real(self, group_version, resource, kind)

    monkeypatch.setattr(DiscoveryClient, "has_resource", flaky)
    client = load_config(str(pair.control_kubeconfig))
    check_control_cluster(client, timeout=5.0)
    assert failures == []
    client.close()


def test_empty_control_kubeconfig_reuses_the_target_cluster(pair: ClusterPair) -> None:
    clients = build_clients(_options(pair, control_kubeconfig=""))
    assert clients.control.host == clients.target.host if clients.target else False
    clients.close()


def test_missing_crds_and_unreachable_cluster_are_one_line_errors(tmp_path: Path) -> None:
    with Emulator() as bare:
        bare.write_kubeconfig(tmp_path / "bare")
        client = load_config(str(tmp_path / "bare"))
        with pytest.raises(StartupError, match=r"does not serve machine\.sapcloud\.io/v1alpha1 machines"):
            check_control_cluster(client)
        client.close()
    client = load_config(str(tmp_path / "bare"), max_retries=0)
    with pytest.raises(StartupError, match="not reachable"):
        check_control_cluster(client, timeout=0.5)
    client.close()


def test_bad_kubeconfig_is_a_startup_error(tmp_path: Path) -> None:
    garbled = tmp_path / "garbled"
    garbled.write_text("{not: [yaml")
    with pytest.raises(StartupError, match="target cluster"):
        build_clients(Options.defaults(target_kubeconfig=str(garbled)))
    with pytest.raises(StartupError, match="does not exist"):
        build_clients(Options.defaults(target_kubeconfig=str(tmp_path / "missing")))


def test_a_busy_port_is_a_one_line_startup_error(pair: ClusterPair, stand_ins: list[StandIn]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        options = _options(pair, port=busy.getsockname()[1])
        assert app_run.run(options, FakeDriver(), stop=threading.Event(), really_crash=False) == 1
    assert stand_ins == []


def test_a_controller_that_cannot_start_exits_1(pair: ClusterPair, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> StandIn:
        raise StartupError("no controller today")

    monkeypatch.setattr(app_run, "new_controller", broken)
    for leader_elect in (False, True):
        code = app_run.run(_options(pair, leader_elect=leader_elect), FakeDriver(), really_crash=False)
        assert code == 1

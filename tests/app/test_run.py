"""``mcm.app.run``: start-up checks, HTTP endpoints, leader election and shutdown, in process.

The controller is replaced by a stand-in through ``new_controller`` (the one place the app
builds it), so these tests pin the app's own sequence.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from mcm.app import runner as app_run
from mcm.app import startup
from mcm.app.heap import freeze_start_up_heap
from mcm.app.options import Options
from mcm.app.runner import LEASE_NAME, Clients, StartupError, build_clients, check_control_cluster
from mcm.driver import FakeDriver
from mcm.emulator import ClusterPair, Emulator
from mcm.runtime.client import load_config
from mcm.runtime.client.errors import Conflict
from mcm.runtime.client.resources import LEASES
from mcm.runtime.clock import FakeClock

TIMEOUT = 10.0


class StandIn:
    """Runs until stopped; records what it was given."""

    def __init__(
        self,
        options: Options,
        driver: Any,
        clients: Clients,
        holds_lease: Callable[[], bool] | None = None,
        after_sync: Callable[[], None] | None = None,
    ) -> None:
        self.clients = clients
        self.holds_lease = holds_lease
        self.after_sync = after_sync
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

    def new_controller(
        options: Options,
        driver: Any,
        clients: Clients,
        recorder: Any = None,
        metrics: Any = None,
        *,
        holds_lease: Callable[[], bool] | None = None,
        after_sync: Callable[[], None] | None = None,
    ) -> StandIn:
        made.append(StandIn(options, driver, clients, holds_lease, after_sync))
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
            ),
            daemon=True,  # a failed test must not keep pytest from exiting
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
    holds_lease = stand_ins[0].holds_lease
    assert holds_lease is not None and holds_lease()  # the fence of VM-changing driver calls

    assert running.finish() == 0
    assert stand_ins[0].stopped.is_set()
    assert not holds_lease()
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


def test_an_in_process_run_leaves_the_collector_alone(pair: ClusterPair, stand_ins: list[StandIn]) -> None:
    """Only the console command freezes its start-up heap: an in-process caller (a test, a tool
    that runs several controllers in one process) keeps the default collector."""
    running = Running(_options(pair, leader_elect=False))
    assert pair.control.wait_for(lambda: bool(stand_ins) and stand_ins[0].started.is_set(), 15)
    assert stand_ins[0].after_sync is None
    assert running.finish() == 0


def test_the_console_command_freezes_its_start_up_heap_once_the_caches_synced(
    pair: ClusterPair, stand_ins: list[StandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_run, "configure_logging", lambda *_args, **_kw: None)
    stop = threading.Event()
    real_run = app_run.run
    monkeypatch.setattr(
        app_run, "run", lambda *a, **kw: real_run(*a, **{**kw, "stop": stop, "really_crash": False})
    )
    options = _options(pair, leader_elect=False, driver="fake")
    code: list[int] = []
    thread = threading.Thread(target=lambda: code.append(app_run.main_with_options(options)), daemon=True)
    thread.start()
    try:
        assert pair.control.wait_for(lambda: bool(stand_ins) and stand_ins[0].started.is_set(), 15)
        assert stand_ins[0].after_sync is freeze_start_up_heap
    finally:
        stop.set()
        thread.join(15)
    assert code == [0]


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


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up checks against a live emulator retry after 10 ms instead of 1 s."""
    monkeypatch.setattr(startup, "STARTUP_RETRY_INITIAL", 0.01)


def test_the_target_cluster_check_retries_until_the_cluster_answers(
    pair: ClusterPair, quick_retries: None
) -> None:
    """Found by the chaos suite: one refused connection to the target at start-up ended the
    process (exit 1)."""
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
    assert app_run.check_target_cluster(clients.target, threading.Event())
    helper.join()
    assert refused() >= 2  # the helper resumes after two; a loaded machine may fit in a third
    clients.close()


def test_a_failed_discovery_request_is_retried_like_healthz(
    pair: ClusterPair, monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    """Found by the chaos suite: /healthz answered, then the discovery GET was reset, and the
    process ended (exit 1) instead of asking again."""
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
    assert check_control_cluster(client, threading.Event())
    assert failures == []
    client.close()


class RecordingClock(FakeClock):
    """A fake clock that remembers how long each ``wait`` was asked to last."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        self.waits.append(seconds)
        return super().wait(event, seconds)


def test_an_unreachable_control_cluster_is_retried_with_capped_back_off_until_stopped(
    tmp_path: Path,
) -> None:
    """Found by the chaos suite: a restarted controller exited 1 when a proxy fault outlasted
    the 10 s discovery timeout. Now the check retries (1 s doubling to 30 s), logging each
    failure once, for as long as it takes; only a stop ends it."""
    with Emulator() as gone:
        gone.write_kubeconfig(tmp_path / "gone")
    client = load_config(str(tmp_path / "gone"), max_retries=0)
    clock = RecordingClock()
    stop = threading.Event()
    outcome: list[bool] = []
    with structlog.testing.capture_logs() as logs:
        thread = threading.Thread(
            target=lambda: outcome.append(check_control_cluster(client, stop, clock=clock))
        )
        thread.start()
        for attempt, delay in enumerate([1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0], start=1):
            clock.block_until_waiters()
            assert clock.waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0][:attempt]
            clock.step(delay)
        clock.block_until_waiters()
        assert thread.is_alive()
        stop.set()
        thread.join(TIMEOUT)
    assert outcome == [False]
    failures = [entry for entry in logs if entry["event"] == "cluster_not_reachable"]
    assert [entry["attempt"] for entry in failures] == list(range(1, 10))
    assert all(entry["log_level"] == "warning" and entry["reason"] for entry in failures)
    client.close()


def test_the_process_serves_healthz_while_it_waits_for_the_control_cluster_then_leads(
    pair: ClusterPair, stand_ins: list[StandIn], quick_retries: None
) -> None:
    """A network blip at start-up never ends the process: /healthz is ok, /readyz says what it
    waits for, and once the control cluster answers the process campaigns and leads."""
    options = _options(pair)
    base = f"http://127.0.0.1:{options.port}"
    pair.control.pause("error")  # every request fails; /healthz answers 500
    running = Running(options)
    try:
        assert pair.control.wait_for(
            lambda: pair.control.stats.count("nonresource", "/healthz", code=500) >= 3, 15
        )
        assert running.thread.is_alive()
        assert _get(f"{base}/healthz") == (200, "ok")
        assert _get(f"{base}/readyz") == (500, "waiting for the control cluster")
        assert not stand_ins
        pair.control.resume()
        assert pair.control.wait_for(lambda: bool(stand_ins) and stand_ins[0].started.is_set(), 15)
        assert _get(f"{base}/readyz") == (200, "ok")
    finally:
        pair.control.resume()
        code = running.finish()
    assert code == 0


def test_empty_control_kubeconfig_reuses_the_target_cluster(pair: ClusterPair) -> None:
    clients = build_clients(_options(pair, control_kubeconfig=""))
    assert clients.control.host == clients.target.host if clients.target else False
    clients.close()


def test_missing_crds_are_a_one_line_error(tmp_path: Path) -> None:
    with Emulator() as bare:
        bare.write_kubeconfig(tmp_path / "bare")
        client = load_config(str(tmp_path / "bare"))
        with pytest.raises(StartupError, match=r"does not serve machine\.sapcloud\.io/v1alpha1 machines"):
            check_control_cluster(client, threading.Event())
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
    def broken(*args: Any, **kwargs: Any) -> StandIn:
        raise StartupError("no controller today")

    monkeypatch.setattr(app_run, "new_controller", broken)
    for leader_elect in (False, True):
        code = app_run.run(_options(pair, leader_elect=leader_elect), FakeDriver(), really_crash=False)
        assert code == 1

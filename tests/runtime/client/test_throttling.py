"""Every request of a cluster client, whatever the resource, takes a token from one bucket."""

from __future__ import annotations

import threading
from pathlib import Path

from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.ratelimit import TokenBucketRateLimiter
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.clock import FakeClock
from tests.runtime.client.stub_server import Reply, StubServer


def test_requests_of_all_resources_share_the_cluster_bucket(stub: StubServer, tmp_path: Path) -> None:
    stub.handler = lambda r: Reply(200, {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=2.0, burst=2, clock=clock)
    client.resource(NODES).list()
    client.resource(PODS).list()
    done = threading.Event()

    def third() -> None:
        client.resource(PODS).get("p", namespace="ns")
        done.set()

    thread = threading.Thread(target=third, daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    assert len(stub.requests) == 2
    clock.step(0.4)
    assert not done.wait(0.05)
    clock.step(0.1)
    assert done.wait(5)
    thread.join(5)
    assert len(stub.requests) == 3


def test_watches_are_throttled_too(stub: StubServer, tmp_path: Path) -> None:
    stub.handler = lambda r: Reply(200, chunks=[])
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=1.0, burst=1, clock=clock)
    list(client.resource(NODES).watch())
    opened = threading.Event()

    def second() -> None:
        list(client.resource(NODES).watch())
        opened.set()

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    assert len(stub.requests) == 1
    clock.step(1.0)
    assert opened.wait(5)
    thread.join(5)


def test_sibling_clients_have_their_own_bucket(stub: StubServer, tmp_path: Path) -> None:
    stub.handler = lambda r: Reply(200, {"kind": "Node"})
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=1.0, burst=1, clock=clock)
    client.resource(NODES).get("a")
    client.with_user_agent("machine-leader-election").resource(NODES).get("b")
    assert len(stub.requests) == 2


def test_clients_given_one_rate_limiter_share_its_budget(stub: StubServer, tmp_path: Path) -> None:
    """A rate limiter handed to several clients (client-go's ``rest.Config.RateLimiter``) is one
    budget for all of them: the second client waits for the token the first one took."""
    stub.handler = lambda r: Reply(200, {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})
    clock = FakeClock()
    shared = TokenBucketRateLimiter(1.0, 1, clock=clock)
    base = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock)
    first = ClusterClient(base.connection, clock=clock, rate_limiter=shared)
    second = ClusterClient(base.connection, clock=clock, rate_limiter=shared)
    first.resource(NODES).list()
    done = threading.Event()

    def list_pods() -> None:
        second.resource(PODS).list()
        done.set()

    thread = threading.Thread(target=list_pods, daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    assert len(stub.requests) == 1
    clock.step(1.0)
    assert done.wait(5)
    thread.join(5)
    assert len(stub.requests) == 2

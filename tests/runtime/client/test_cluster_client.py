"""A cluster client's siblings and how it shows itself."""

from __future__ import annotations

from pathlib import Path

from mcm.runtime.client import load_config
from mcm.runtime.client.transport import default_user_agent
from tests.runtime.client.stub_server import StubServer


def test_a_client_shows_its_host_and_limits(stub: StubServer, tmp_path: Path) -> None:
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=7, burst=9)
    try:
        assert repr(client) == f"ClusterClient(host={stub.url!r}, qps=7, burst=9)"
    finally:
        client.close()


def test_a_sibling_shares_the_connection_and_settings_but_not_the_bucket(
    stub: StubServer, tmp_path: Path
) -> None:
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=7, burst=9, max_retries=3, timeout=12)
    try:
        sibling = client.with_user_agent("node-drain")
        assert sibling.connection is client.connection
        assert sibling.user_agent == default_user_agent("node-drain")
        assert (sibling.qps, sibling.burst, sibling.namespace) == (7, 9, client.namespace)
        assert (sibling.transport.max_retries, sibling.transport.timeout) == (3, 12)
        assert sibling.transport.stop is client.transport.stop
        assert sibling.rate_limiter is not client.rate_limiter
    finally:
        client.close()

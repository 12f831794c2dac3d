"""Fixtures for client tests: a scripted stub server and a client pointing at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.emulator.kubeconfig import TlsMaterial, issue_client_cert, make_tls_material, tls_available
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.clock import FakeClock
from tests.runtime.client.raw_server import RawServer, Script
from tests.runtime.client.stub_server import StubServer


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stub_client(stub: StubServer, tmp_path: Path, fake_clock: FakeClock) -> Iterator[ClusterClient]:
    """A client for the stub with Retry-After retries off (tests that want them turn them on)."""
    client = load_config(stub.write_kubeconfig(tmp_path / "kubeconfig"), clock=fake_clock, max_retries=0)
    yield client
    client.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    """Start loopback servers sending crafted bytes (stopped after the test)."""
    servers: list[RawServer] = []

    def start(script: Script | None = None, **kwargs: Any) -> RawServer:
        server = RawServer(script, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    """A CA, a server certificate (127.0.0.1, localhost) and a client certificate ``client.crt``
    / ``client.key`` in the material's directory, made once per session."""
    if not tls_available():
        pytest.skip("needs the openssl command")
    material = make_tls_material(tmp_path_factory.mktemp("pki"))
    issue_client_cert(material, "client", "user")
    return material

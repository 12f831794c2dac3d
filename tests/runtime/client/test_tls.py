"""HTTPS with a kubeconfig CA: requests, tokens, certificate checks and watch stop over TLS."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.runtime.client import WatchEvent, errors, load_config
from mcm.runtime.client.resources import NODES
from tests.runtime.client.stub_server import Reply, StubServer, make_tls


@pytest.fixture(scope="module")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, bytes]:
    material = make_tls(tmp_path_factory.mktemp("tls"))
    if material is None:
        pytest.skip("openssl is not available")
    return material


@pytest.fixture
def tls_stub(tls_material: tuple[object, bytes]) -> Iterator[StubServer]:
    context, ca_pem = tls_material
    with StubServer(tls=context, ca_pem=ca_pem) as server:  # type: ignore[arg-type]
        yield server


def test_https_with_ca_data_and_token(tls_stub: StubServer, tmp_path: Path) -> None:
    tls_stub.handler = lambda r: Reply(200, {"kind": "Node", "metadata": {"name": "n"}})
    client = load_config(tls_stub.write_kubeconfig(tmp_path / "kc", token="tls-token"))
    assert client.host.startswith("https://127.0.0.1:")
    assert client.resource(NODES).get("n") == {"kind": "Node", "metadata": {"name": "n"}}
    assert tls_stub.requests[-1].headers["authorization"] == "Bearer tls-token"


def test_unknown_certificate_authority_is_a_connection_failure(tls_stub: StubServer, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{tls_stub.url}'}}}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    client = load_config(str(kubeconfig))
    with pytest.raises(errors.ConnectionFailed) as info:
        client.resource(NODES).get("n")
    assert not info.value.refused
    assert "SSL" in str(info.value) or "certificate" in str(info.value)


def test_watch_stop_over_tls_wakes_a_blocked_reader(tls_stub: StubServer, tmp_path: Path) -> None:
    line = json.dumps(
        {"type": "ADDED", "object": {"metadata": {"name": "n", "resourceVersion": "3"}}}
    ).encode()
    reply = Reply(200, chunks=[line + b"\n", None])
    tls_stub.handler = lambda r: reply
    client = load_config(tls_stub.write_kubeconfig(tmp_path / "kc"))
    stream = client.resource(NODES).watch()
    events: list[WatchEvent] = []
    failures: list[BaseException] = []
    first = threading.Event()

    def consume() -> None:
        try:
            for event in stream:
                events.append(event)
                first.set()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        assert first.wait(10)
        stream.stop()
        thread.join(5)
        assert not thread.is_alive()
        assert failures == []
        assert [e.object["metadata"]["name"] for e in events] == ["n"]
        assert stream.resource_version == "3"
    finally:
        reply.hold.set()

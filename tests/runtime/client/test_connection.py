"""Connections built from a kubeconfig entry, the pod's service account or a ``kubernetes``
ApiClient: their credentials, TCP keep-alive, trust store and which pool they use."""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mcm.emulator.kubeconfig import TlsMaterial
from mcm.runtime.client.connection import (
    Connection,
    in_cluster_connection,
    keepalive_socket_options,
    kubeconfig_connection,
)
from tests.runtime.client.raw_server import RawServer, fixed, read_head

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def connect(tmp_path: Path, user: dict[str, Any], **cluster: Any) -> Connection:
    cluster.setdefault("server", "http://127.0.0.1:1")
    return kubeconfig_connection(cluster, user, cluster_dir=str(tmp_path), user_dir=str(tmp_path))


def basic(pair: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


# --- credentials ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "headers"),
    [
        ({}, {}),
        ({"token": "abc"}, {"Authorization": "Bearer abc"}),
        ({"token": "abc", "username": "u", "password": "p"}, {"Authorization": "Bearer abc"}),
        ({"username": "u", "password": "p"}, basic("u:p")),
        ({"username": "u"}, basic("u:")),
        ({"password": "p"}, basic(":p")),
        ({"tokenFile": "token"}, {"Authorization": "Bearer from-file"}),
    ],
)
def test_the_users_credentials_become_headers(
    tmp_path: Path, user: dict[str, Any], headers: dict[str, str]
) -> None:
    (tmp_path / "token").write_text("from-file\n")
    assert connect(tmp_path, user).auth_headers() == headers


@pytest.mark.parametrize("field", ["client-certificate-data", "client-key-data"])
def test_half_a_client_identity_is_a_configuration_error(
    tmp_path: Path, pki: TlsMaterial, field: str
) -> None:
    source = pki.directory / ("client.crt" if field == "client-certificate-data" else "client.key")
    user = {field: base64.b64encode(source.read_bytes()).decode()}
    with pytest.raises(ValueError, match="go together"):
        connect(tmp_path, user, server="https://127.0.0.1:1")


def test_an_api_clients_header_credentials_with_a_value_are_used() -> None:
    settings = {
        "BearerToken": {"in": "header", "key": "authorization", "value": "Bearer abc"},
        "Empty": {"in": "header", "key": "x-empty", "value": ""},
        "Query": {"in": "query", "key": "token", "value": "q"},
    }
    configuration = SimpleNamespace(
        host="https://kube.example", ssl_ca_cert=None, auth_settings=lambda: settings
    )
    api_client = SimpleNamespace(configuration=configuration, rest_client=SimpleNamespace(pool_manager=None))
    connection = Connection.from_api_client(api_client)
    assert connection.auth_headers() == {"authorization": "Bearer abc"}
    assert connection.host == "https://kube.example"


# --- the service account -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "environ",
    [{}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT": "443"}],
)
def test_in_cluster_needs_both_host_and_port(tmp_path: Path, environ: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"):
        in_cluster_connection(str(tmp_path), environ)


# --- the pools -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "lean"),
    [
        ("http://kube.example", True),
        ("https://kube.example:6443", True),
        ("ftp://kube.example", False),
        ("https://", False),
    ],
)
def test_the_lean_pool_serves_http_and_https_servers_with_a_host(
    tmp_path: Path, server: str, lean: bool
) -> None:
    assert (connect(tmp_path, {}, server=server).http11 is not None) is lean


def test_keep_alive_has_client_gos_timing_on_every_socket(tmp_path: Path) -> None:
    assert keepalive_socket_options()[-4:] == [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30),
        (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 15),
        (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 9),
    ]
    server = RawServer(fixed(OK))
    try:
        connection = connect(tmp_path, {}, server=f"http://127.0.0.1:{server.port}")
        assert connection.http11 is not None
        assert connection.http11.request("GET", "/", {}, timeout=5).status == 200
        sock = connection.http11._idle[-1].sock
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 15
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 9
        connection.close()
    finally:
        server.stop()


# --- the trust store with a client identity ------------------------------------------------------


def _identity(pki: TlsMaterial) -> dict[str, str]:
    return {
        "client-certificate-data": base64.b64encode((pki.directory / "client.crt").read_bytes()).decode(),
        "client-key-data": base64.b64encode((pki.directory / "client.key").read_bytes()).decode(),
    }


@pytest.mark.skipif(not ssl.create_default_context().get_ca_certs(), reason="no system CA bundle")
@pytest.mark.parametrize("ca", ["file", "data", "none"])
def test_a_configured_ca_replaces_the_system_roots(tmp_path: Path, pki: TlsMaterial, ca: str) -> None:
    """With a client identity the urllib3 pool gets a context of ours: it trusts the system's
    roots only when the kubeconfig names no CA (urllib3 adds a configured one per connection)."""
    cluster: dict[str, Any] = {"server": "https://127.0.0.1:1"}
    if ca == "file":
        cluster["certificate-authority"] = str(pki.ca_cert)
    elif ca == "data":
        cluster["certificate-authority-data"] = base64.b64encode(pki.ca_cert.read_bytes()).decode()
    connection = connect(tmp_path, _identity(pki), **cluster)
    context = connection.pool.connection_pool_kw["ssl_context"]
    assert bool(context.get_ca_certs()) is (ca == "none")


def test_closing_a_connection_closes_the_idle_sockets_of_its_urllib3_pools(tmp_path: Path) -> None:
    """urllib3 2's ``PoolManager.clear`` forgets its pools without closing them, so a watch's
    idle keep-alive socket stayed open after the client was closed."""
    ended = threading.Event()

    def answer_then_wait_for_the_end(sock: socket.socket) -> None:
        read_head(sock)
        sock.sendall(OK)
        sock.settimeout(10)
        if sock.recv(1) == b"":
            ended.set()

    server = RawServer(handler=answer_then_wait_for_the_end)
    try:
        connection = connect(tmp_path, {}, server=f"http://127.0.0.1:{server.port}")
        response = connection.pool.request("GET", f"http://127.0.0.1:{server.port}/", preload_content=False)
        assert response.read() == b"{}"
        response.release_conn()  # back to the pool, idle and open
        connection.close()
        assert ended.wait(5), "the idle socket was left open"
    finally:
        server.stop()

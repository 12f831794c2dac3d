"""Proxies as client-go picks them: the kubeconfig's ``proxy-url``, else ``HTTPS_PROXY`` /
``HTTP_PROXY`` / ``NO_PROXY`` (Go's ``http.ProxyFromEnvironment``), on every path of the client."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from mcm.emulator.kubeconfig import TlsMaterial, make_tls_material, tls_available
from mcm.runtime.client import ClusterClient, ConfigError, load_config
from mcm.runtime.client.config import new_configuration
from mcm.runtime.client.connection import in_cluster_connection
from mcm.runtime.client.proxy import proxy_from_environment
from tests.runtime.client.raw_server import ConnectProxy, RawServer, fixed

Serve = Callable[..., RawServer]

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PROXY_VARIABLES, "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def proxy_for() -> Iterator[Callable[[RawServer], ConnectProxy]]:
    proxies: list[ConnectProxy] = []

    def start(server: RawServer) -> ConnectProxy:
        proxies.append(ConnectProxy(server.port))
        return proxies[-1]

    yield start
    for proxy in proxies:
        proxy.stop()


# --- Go's rules ---------------------------------------------------------------------------------

# golang.org/x/net/http/httpproxy proxy_test.go, TestUseProxy: every host is asked for on port 80.
NO_PROXY = (
    "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, "
    "10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, 2002:db8:a::45/64"
)


@pytest.mark.parametrize(
    ("host", "proxied"),
    [
        ("localhost", False),
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("[::1]", False),
        ("[::ffff:127.0.0.1]", False),
        ("[::2]", True),
        ("192.168.1.1", False),
        ("192.168.1.2", True),
        ("192.168.1.3", False),
        ("192.168.1.4", True),
        ("10.0.0.2", False),
        ("[2001:db8::52:0:1]", False),
        ("[2001:db8::52:0:2]", True),
        ("[2001:db8::52:0:3]", False),
        ("[2002:db8:a::123]", False),
        ("[fe80::424b:c8be:1643:a1b6]", True),
        ("barbaz.net", True),
        ("www.barbaz.net", False),
        ("foobar.com", False),
        ("www.foobar.com", False),
        ("foofoobar.com", True),
        ("baz.com", True),
        ("localhost.net", True),
        ("local.localhost", True),
        ("barbarbaz.net", True),
        ("wildcard.io", True),
        ("nested.wildcard.io", False),
        ("awildcard.io", True),
    ],
)
def test_no_proxy_as_go_reads_it(host: str, proxied: bool) -> None:
    environ = {"HTTP_PROXY": "proxy.corp:3128", "NO_PROXY": NO_PROXY}
    expected = "http://proxy.corp:3128" if proxied else None
    assert proxy_from_environment(f"http://{host}:80/api", environ) == expected


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        ("http://kube.example", {"HTTP_PROXY": "127.0.0.1:8080"}, "http://127.0.0.1:8080"),
        ("http://kube.example", {"HTTP_PROXY": "cache.corp:1234"}, "http://cache.corp:1234"),
        ("http://kube.example", {"HTTP_PROXY": "https://cache.corp"}, "https://cache.corp"),
        ("http://kube.example", {"HTTP_PROXY": "socks5://127.0.0.1"}, "socks5://127.0.0.1"),
        ("http://kube.example", {"HTTP_PROXY": "plain", "HTTPS_PROXY": "secure"}, "http://plain"),
        ("https://kube.example", {"HTTP_PROXY": "plain", "HTTPS_PROXY": "secure"}, "http://secure"),
        ("https://kube.example", {"HTTP_PROXY": "plain"}, None),
        ("https://kube.example", {"https_proxy": "lower", "HTTPS_PROXY": "upper"}, "http://upper"),
        ("https://kube.example", {"https_proxy": "lower", "HTTPS_PROXY": ""}, "http://lower"),
        ("https://kube.example:6443", {"HTTPS_PROXY": "p", "no_proxy": "kube.example:6443"}, None),
        ("https://kube.example:6443", {"HTTPS_PROXY": "p", "NO_PROXY": "kube.example:443"}, "http://p"),
        ("https://kube.example", {"HTTPS_PROXY": "p", "NO_PROXY": "kube.example:443"}, None),
        ("https://KUBE.example", {"HTTPS_PROXY": "p", "NO_PROXY": " Kube.Example "}, None),
        ("https://10.96.0.1", {"HTTPS_PROXY": "p", "NO_PROXY": "10.96.0.0/12"}, None),
        ("https://10.96.0.1", {"HTTPS_PROXY": "p", "NO_PROXY": "*"}, None),
        ("https://10.96.0.1", {"HTTPS_PROXY": "p", "NO_PROXY": "96.0.1"}, "http://p"),
        ("http://kube.example", {"HTTP_PROXY": "p", "REQUEST_METHOD": "GET"}, None),
    ],
)
def test_which_variable_applies(url: str, environ: dict[str, str], expected: str | None) -> None:
    assert proxy_from_environment(url, environ) == expected


# --- requests through a proxy on loopback -------------------------------------------------------


@pytest.mark.skipif(not tls_available(), reason="no TLS material generator")
def test_https_proxy_tunnels_plain_requests_and_watches_with_connect(
    serve: Serve,
    proxy_for: Callable[[RawServer], ConnectProxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    material = make_tls_material(tmp_path)
    server_context = material.server_context()
    server = serve(fixed(OK), wrap=lambda s: server_context.wrap_socket(s, server_side=True))
    proxy = proxy_for(server)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("http://", ""))
    # kube.example resolves nowhere: only the proxy, which tunnels any name to the server, reaches it.
    cluster = {
        "server": f"https://kube.example:{server.port}",
        "certificate-authority": str(material.ca_cert),
        "tls-server-name": "localhost",
    }
    client = _client(tmp_path, cluster)
    try:
        assert client.get_bytes("/healthz") == b"ok"
        watch = client.transport.stream("/api/v1/pods", query={"watch": "true"})
        assert watch.read() == b"ok"
        watch.release_conn()
    finally:
        client.close()
    assert proxy.targets()[0].startswith(f"CONNECT kube.example:{server.port} ")


def test_http_proxy_carries_requests_to_an_http_server(
    serve: Serve,
    proxy_for: Callable[[RawServer], ConnectProxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = serve(fixed(OK))
    proxy = proxy_for(server)
    monkeypatch.setenv("http_proxy", proxy.url)
    client = _client(tmp_path, {"server": f"http://kube.example:{server.port}"})
    try:
        assert client.get_bytes("/healthz") == b"ok"
    finally:
        client.close()
    assert proxy.targets() == [f"GET http://kube.example:{server.port}/healthz HTTP/1.1"]


def test_proxy_url_wins_over_the_environment_and_sends_its_credentials(
    serve: Serve,
    proxy_for: Callable[[RawServer], ConnectProxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = serve(fixed(OK))
    proxy = proxy_for(server)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # refuses connections
    monkeypatch.setenv("NO_PROXY", "kube.example")
    proxy_url = proxy.url.replace("http://", "http://us%40er:p%3Ass@")
    client = _client(tmp_path, {"server": f"http://kube.example:{server.port}", "proxy-url": proxy_url})
    try:
        assert client.get_bytes("/healthz") == b"ok"
    finally:
        client.close()
    credentials = base64.b64encode(b"us@er:p:ss").decode()
    assert f"\r\nProxy-Authorization: Basic {credentials}\r\n".lower() in proxy.heads[0].decode().lower()


def test_a_loopback_or_no_proxy_server_is_reached_directly_on_the_lean_pool(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:1")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    monkeypatch.setenv("NO_PROXY", ".example")
    server = serve(fixed(OK))
    client = _client(tmp_path, {"server": f"http://127.0.0.1:{server.port}"})
    try:
        assert client.get_bytes("/healthz") == b"ok"
        assert client.transport.connection.http11 is not None
    finally:
        client.close()
    exempt = _client(tmp_path, {"server": "https://kube.example:6443"})
    assert exempt.transport.connection.http11 is not None
    assert not isinstance(exempt.transport.connection.pool, urllib3.ProxyManager)
    exempt.close()


def test_the_in_cluster_connection_honours_the_environment(tmp_path: Path, pki: TlsMaterial) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_bytes(pki.ca_pem())
    environ = {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "HTTPS_PROXY": "proxy.corp:3128",
    }
    proxied = in_cluster_connection(str(tmp_path), environ)
    assert isinstance(proxied.pool, urllib3.ProxyManager)
    assert proxied.pool.proxy is not None and proxied.pool.proxy.url == "http://proxy.corp:3128"
    assert proxied.http11 is None
    direct = in_cluster_connection(str(tmp_path), {**environ, "NO_PROXY": "10.96.0.0/12"})
    assert not isinstance(direct.pool, urllib3.ProxyManager)
    assert direct.http11 is not None


@pytest.mark.parametrize(
    ("server", "environ", "expected"),
    [
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://proxy.corp:3128"}, None),
        ("https://kube.example", {"HTTPS_PROXY": "http://proxy.corp:3128"}, "http://proxy.corp:3128"),
        ("https://kube.example", {"HTTPS_PROXY": "proxy.corp:3128", "NO_PROXY": "example"}, None),
    ],
)
def test_the_kubernetes_package_path_picks_the_same_proxy(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: str,
    environ: dict[str, str],
    expected: str | None,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    configuration, _ = new_configuration(_kubeconfig(tmp_path, {"server": server}))
    assert configuration.proxy == expected
    assert not configuration.no_proxy


# --- helpers ------------------------------------------------------------------------------------


def _kubeconfig(tmp_path: Path, cluster: dict[str, Any]) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def _client(tmp_path: Path, cluster: dict[str, Any]) -> ClusterClient:
    return load_config(_kubeconfig(tmp_path, cluster), max_retries=0, timeout=10)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.DependencyWarning")
def test_a_socks_proxy_without_pysocks_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("kubernetes")
    try:
        import socks  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("PySocks is installed")
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(ConfigError, match="a SOCKS proxy needs the PySocks package"):
        load_config(_kubeconfig(tmp_path, {"server": "https://kube.example:6443"}))


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        # a server URL without a host name is never proxied
        ("https://:6443/api", {"HTTPS_PROXY": "p"}, None),
        ("https:///api", {"HTTPS_PROXY": "p"}, None),
        # a proxy value that names no host even with http:// before it is ignored
        ("https://kube.example", {"HTTPS_PROXY": "//proxy.corp:3128"}, None),
        ("https://kube.example", {"HTTPS_PROXY": "proxy.corp:port"}, None),
        # an entry with a slash that is not a CIDR range matches nothing
        ("https://10.96.0.1", {"HTTPS_PROXY": "p", "NO_PROXY": "10.96.0.0/bad"}, "http://p"),
        ("https://kube.example", {"HTTPS_PROXY": "p", "NO_PROXY": "kube.example/24"}, "http://p"),
        # Go's net.SplitHostPort refuses "[v6]" without a port: the entry is a name, which an
        # address never matches; with a port it is an address
        ("https://[2001:db8::1]", {"HTTPS_PROXY": "p", "NO_PROXY": "[2001:db8::1]"}, "http://p"),
        ("https://[2001:db8::1]", {"HTTPS_PROXY": "p", "NO_PROXY": "[2001:db8::1]:443"}, None),
        ("https://[2001:db8::1]", {"HTTPS_PROXY": "p", "NO_PROXY": "2001:db8::1"}, None),
        ("https://[2001:db8::1]:6443", {"HTTPS_PROXY": "p", "NO_PROXY": "[2001:db8::1]:443"}, "http://p"),
        # an entry with an empty host or a port alone matches nothing
        ("https://kube.example", {"HTTPS_PROXY": "p", "NO_PROXY": ":443"}, "http://p"),
        ("https://kube.example", {"HTTPS_PROXY": "p", "NO_PROXY": ", ,"}, "http://p"),
    ],
)
def test_hostless_urls_unusable_values_and_odd_no_proxy_entries(
    url: str, environ: dict[str, str], expected: str | None
) -> None:
    assert proxy_from_environment(url, environ) == expected

"""load_config: kubeconfig files and in-cluster service accounts, one connection per cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client import Configuration

from mcm.emulator.kubeconfig import TlsMaterial
from mcm.runtime.client import IN_CLUSTER_CONFIG, ConfigError, load_config
from mcm.runtime.client import config as client_config
from mcm.runtime.client.ratelimit import NoRateLimiter, TokenBucketRateLimiter
from mcm.runtime.client.resources import NODES
from tests.runtime.client.stub_server import Reply, StubServer


def _ok(stub: StubServer) -> None:
    stub.handler = lambda r: Reply(
        200, {"kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": []}
    )


def test_kubeconfig_token_namespace_and_user_agent(stub: StubServer, tmp_path: Path) -> None:
    _ok(stub)
    client = load_config(
        stub.write_kubeconfig(tmp_path / "kc", token="s3cret"), user_agent_suffix="machine-controller"
    )
    assert client.host == stub.url
    assert client.namespace == "ns1"
    client.resource(NODES).list()
    headers = stub.requests[-1].headers
    assert headers["authorization"] == "Bearer s3cret"
    assert headers["accept"] == "application/json"
    assert headers["user-agent"].startswith("mcm/")
    assert headers["user-agent"].endswith("/machine-controller")


def test_qps_and_burst_make_the_cluster_limiter(stub: StubServer, tmp_path: Path) -> None:
    kubeconfig = stub.write_kubeconfig(tmp_path / "kc")
    limiter = load_config(kubeconfig, qps=7.5, burst=3).rate_limiter
    assert isinstance(limiter, TokenBucketRateLimiter)
    assert (limiter.qps, limiter.burst) == (7.5, 3)
    assert isinstance(load_config(kubeconfig, qps=-1).rate_limiter, NoRateLimiter)


def test_resource_clients_share_the_cluster_transport(stub: StubServer, tmp_path: Path) -> None:
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"))
    assert client.resource(NODES) is client.resource(NODES)
    sibling = client.with_user_agent("machine-leader-election")
    assert sibling.connection is client.connection
    assert sibling.rate_limiter is not client.rate_limiter
    assert sibling.user_agent.endswith("/machine-leader-election")


def test_two_clusters_stay_apart_and_the_global_default_is_untouched(tmp_path: Path) -> None:
    before = Configuration.get_default_copy().host
    with StubServer() as one, StubServer() as two:
        _ok(one)
        _ok(two)
        first = load_config(one.write_kubeconfig(tmp_path / "one", token="t1"))
        second = load_config(two.write_kubeconfig(tmp_path / "two", token="t2"))
        assert first.connection is not second.connection
        first.resource(NODES).list()
        second.resource(NODES).list()
        assert [r.headers["authorization"] for r in one.requests] == ["Bearer t1"]
        assert [r.headers["authorization"] for r in two.requests] == ["Bearer t2"]
    assert Configuration.get_default_copy().host == before


def test_context_selects_cluster_and_namespace(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters:\n- {name: a, cluster: {server: 'http://127.0.0.1:1'}}\n"
        "- {name: b, cluster: {server: 'http://127.0.0.1:2'}}\n"
        "users: [{name: u, user: {}}]\n"
        "contexts:\n- {name: a, context: {cluster: a, user: u}}\n"
        "- {name: b, context: {cluster: b, user: u, namespace: shoot--x}}\n"
    )
    default = load_config(str(kubeconfig))
    chosen = load_config(str(kubeconfig), context="b")
    assert (default.host, default.namespace) == ("http://127.0.0.1:1", None)
    assert (chosen.host, chosen.namespace) == ("http://127.0.0.1:2", "shoot--x")


def test_missing_or_broken_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "absent"))
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nope\n")
    with pytest.raises(ConfigError):
        load_config(str(broken))


@pytest.fixture
def service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pki: TlsMaterial) -> Path:
    directory = tmp_path / "sa"
    directory.mkdir()
    (directory / "token").write_text("pod-token")
    (directory / "ca.crt").write_bytes(pki.ca_pem())
    (directory / "namespace").write_text("machine-ns\n")
    monkeypatch.setattr(client_config, "SERVICE_ACCOUNT_DIR", str(directory))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return directory


@pytest.mark.parametrize("kubeconfig", [IN_CLUSTER_CONFIG, None, ""])
def test_in_cluster_config(service_account: Path, kubeconfig: str | None) -> None:
    client = load_config(kubeconfig)
    assert client.host == "https://10.0.0.1:443"
    assert client.namespace == "machine-ns"
    assert client.connection.ca_file == str(service_account / "ca.crt")
    assert client.transport._headers(None)["Authorization"] == "Bearer pod-token"


def test_a_token_file_is_read_again_when_it_rotates(stub: StubServer, tmp_path: Path) -> None:
    _ok(stub)
    token = tmp_path / "token"
    token.write_text("first\n")
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{stub.url}'}}}}]\n"
        "users: [{name: u, user: {tokenFile: token, token: ignored}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    client = load_config(str(kubeconfig))
    tokens = client.connection._headers.__self__  # type: ignore[attr-defined]
    client.resource(NODES).list()
    token.write_text("second\n")
    client.resource(NODES).list()  # still within the refresh period
    tokens.refresh = 0.0
    client.resource(NODES).list()
    assert [r.headers["authorization"] for r in stub.requests] == [
        "Bearer first",
        "Bearer first",
        "Bearer second",
    ]


def test_exec_plugins_go_through_the_kubernetes_package(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: echo}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    client = load_config(str(kubeconfig))
    assert client.connection.api_client is not None
    assert load_config(stub_kubeconfig(tmp_path)).connection.api_client is None


def stub_kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "plain"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return str(path)


@pytest.mark.parametrize("command", ["mcm.app.cli", "mcm.app.mcc.cli"])
@pytest.mark.parametrize("package", ["kubernetes", "grpc"])
def test_the_commands_do_not_import_heavy_packages_they_may_not_need(command: str, package: str) -> None:
    """Issue 25: ``kubernetes.client`` costs tens of MiB, ``grpc`` about 20, before the controller
    does anything; each is imported only when a kubeconfig or ``--driver-endpoint`` needs it."""
    import subprocess
    import sys

    code = f"import sys, {command}; print(any(m.split('.')[0] == {package!r} for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_in_cluster_outside_a_cluster_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(ConfigError, match="in-cluster"):
        load_config(IN_CLUSTER_CONFIG)


def test_several_kubeconfig_files_are_merged(stub: StubServer, tmp_path: Path) -> None:
    main = stub.write_kubeconfig(tmp_path / "main", token="t")
    extra = tmp_path / "extra"
    extra.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: other, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: other, user: {}}]\n"
        "contexts: [{name: other, context: {cluster: other, user: other, namespace: o}}]\n"
    )
    merged = f"{main}:{extra}"
    assert load_config(merged).host == stub.url
    other = load_config(merged, context="other")
    assert (other.host, other.namespace) == ("http://127.0.0.1:9", "o")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(f"{main}:{tmp_path / 'absent'}")


_CLUSTER = "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
_USER = "users: [{name: u, user: {token: s3cret-token}}]\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("apiVersion: v1\nclusters: [\n  - name: x\n  bad: : :\n", r"not valid YAML \(line 3, column 3"),
        ("- just\n- a list\n", "must be a mapping"),
        ("", "is empty"),
        (f"current-context: c\ncontexts: []\n{_CLUSTER}{_USER}", "context 'c' is not defined"),
        (
            f"contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n{_CLUSTER}{_USER}",
            "no current-context",
        ),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: nope, user: u}}]\n"
            f"{_CLUSTER}{_USER}",
            "cluster 'nope' of context 'c' is not defined",
        ),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: nobody}}]\n"
            f"{_CLUSTER}{_USER}",
            "user 'nobody' of context 'c' is not defined",
        ),
        (
            f"current-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
            f"clusters: [{{name: k, cluster: {{}}}}]\n{_USER}",
            "cluster 'k' has no server",
        ),
        (
            f"current-context: c\ncontexts: [{{context: {{cluster: k}}}}]\n{_CLUSTER}",
            r"contexts\[0\] has no name",
        ),
        ("current-context: c\ncontexts: {c: 1}\n", "contexts must be a list"),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: [k], user: u}}]\n"
            f"{_CLUSTER}{_USER}",
            "context 'c' has no cluster",
        ),
    ],
    ids=[
        "bad-yaml",
        "not-a-mapping",
        "empty",
        "missing-context",
        "no-current-context",
        "missing-cluster",
        "missing-user",
        "no-server",
        "unnamed-entry",
        "section-not-a-list",
        "cluster-not-a-name",
    ],
)
def test_a_malformed_kubeconfig_is_a_config_error_naming_the_file_and_the_problem(
    tmp_path: Path, text: str, problem: str
) -> None:
    """Issue 10: bad YAML used to escape as a raw yaml ParserError, and a context naming an
    undefined user loaded silently (client-go's validateContext rejects it)."""
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem) as info:
        load_config(str(path))
    assert str(path) in str(info.value)
    assert "s3cret-token" not in str(info.value)
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, ConfigError)


def test_a_context_chosen_by_name_is_checked_across_merged_files(tmp_path: Path) -> None:
    first = tmp_path / "first"
    first.write_text(
        f"current-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n{_CLUSTER}{_USER}"
    )
    second = tmp_path / "second"
    second.write_text("contexts: [{name: d, context: {cluster: elsewhere}}]\n")
    merged = f"{first}:{second}"
    assert load_config(merged).host == "http://127.0.0.1:1"
    with pytest.raises(ConfigError, match="cluster 'elsewhere' of context 'd' is not defined") as info:
        load_config(merged, context="d")
    assert str(first) in str(info.value) and str(second) in str(info.value)


def test_tls_material_from_paths_and_data(tmp_path: Path, pki: TlsMaterial) -> None:
    import base64
    import shutil
    import ssl

    from mcm.emulator.kubeconfig import issue_client_cert, make_tls_material, tls_available
    from mcm.runtime.client.connection import kubeconfig_connection

    shutil.copy(pki.ca_cert, tmp_path / "ca.crt")
    for name in ("client.crt", "client.key"):
        shutil.copy(pki.directory / name, tmp_path / name)
    paths = kubeconfig_connection(
        {"server": "https://127.0.0.1:6443", "certificate-authority": "ca.crt", "tls-server-name": "api"},
        {"client-certificate": "client.crt", "client-key": "client.key"},
        cluster_dir=str(tmp_path),
        user_dir=str(tmp_path),
    )
    kw = paths.pool.connection_pool_kw
    assert kw["ca_certs"] == str(tmp_path / "ca.crt") == paths.ca_file
    assert kw["server_hostname"] == "api"
    assert (kw["cert_file"], kw["key_file"]) == (str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
    if tls_available():  # inline data: in memory (issue 26 #6), no file at all
        material = make_tls_material(tmp_path / "pki")
        issue_client_cert(material, "client", "u")
        inline = kubeconfig_connection(
            {
                "server": "https://x",
                "certificate-authority-data": base64.b64encode(material.ca_pem()).decode(),
            },
            {
                "client-certificate-data": base64.b64encode(
                    (material.directory / "client.crt").read_bytes()
                ).decode(),
                "client-key-data": base64.b64encode(
                    (material.directory / "client.key").read_bytes()
                ).decode(),
            },
            cluster_dir="/",
            user_dir="/",
        )
        kw = inline.pool.connection_pool_kw
        assert isinstance(kw["ssl_context"], ssl.SSLContext)
        assert "key_file" not in kw and "cert_file" not in kw and "ca_certs" not in kw
        assert kw["ca_cert_data"] == material.ca_pem().decode()
    insecure = kubeconfig_connection(
        {"server": "https://x", "insecure-skip-tls-verify": True}, {}, cluster_dir="/", user_dir="/"
    )
    assert insecure.pool.connection_pool_kw["cert_reqs"] == "CERT_NONE"
    assert insecure.auth_headers() == {}
    basic = kubeconfig_connection(
        {"server": "https://x"}, {"username": "a", "password": "b"}, cluster_dir="/", user_dir="/"
    )
    assert basic.auth_headers() == {"Authorization": "Basic YTpi"}


def test_the_package_configuration_in_a_pod_names_the_pods_namespace(service_account: Path) -> None:
    """``new_configuration`` (a ``kubernetes`` package Configuration) in a pod: the service
    account's server and namespace, as ``load_config`` reads them."""
    configuration, namespace = client_config.new_configuration(IN_CLUSTER_CONFIG)
    assert (configuration.host, namespace) == ("https://10.0.0.1:443", "machine-ns")


def test_the_package_configuration_keeps_idle_connections_probed(stub: StubServer, tmp_path: Path) -> None:
    """Connections of the package path use TCP keep-alive, as client-go's dialer does (30 s): an
    API server that vanished without a FIN is noticed instead of hanging a request."""
    import socket

    from kubernetes.client import ApiClient

    configuration, _ = client_config.new_configuration(stub.write_kubeconfig(tmp_path / "kc"))
    options = ApiClient(configuration=configuration).rest_client.pool_manager.connection_pool_kw
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in options["socket_options"]

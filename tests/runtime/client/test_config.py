"""load_config: kubeconfig files and in-cluster service accounts, one ApiClient per cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client import Configuration

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
    assert sibling.api_client is client.api_client
    assert sibling.rate_limiter is not client.rate_limiter
    assert sibling.user_agent.endswith("/machine-leader-election")


def test_two_clusters_stay_apart_and_the_global_default_is_untouched(tmp_path: Path) -> None:
    before = Configuration.get_default_copy().host
    with StubServer() as one, StubServer() as two:
        _ok(one)
        _ok(two)
        first = load_config(one.write_kubeconfig(tmp_path / "one", token="t1"))
        second = load_config(two.write_kubeconfig(tmp_path / "two", token="t2"))
        assert first.api_client is not second.api_client
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
def service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "sa"
    directory.mkdir()
    (directory / "token").write_text("pod-token")
    (directory / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    (directory / "namespace").write_text("machine-ns\n")
    monkeypatch.setattr(client_config, "SERVICE_ACCOUNT_DIR", str(directory))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return directory


@pytest.mark.parametrize("kubeconfig", [IN_CLUSTER_CONFIG, None, ""])
def test_in_cluster_config(service_account: Path, kubeconfig: str | None) -> None:
    client = load_config(kubeconfig)
    configuration = client.api_client.configuration
    assert client.host == "https://10.0.0.1:443"
    assert client.namespace == "machine-ns"
    assert configuration.ssl_ca_cert == str(service_account / "ca.crt")
    assert client.transport._headers(None)["authorization"] == "bearer pod-token"


def test_credentials_are_refreshed_on_every_request(stub: StubServer, tmp_path: Path) -> None:
    _ok(stub)
    client = load_config(stub.write_kubeconfig(tmp_path / "kc", token="first"))
    configuration = client.api_client.configuration
    tokens = iter(["second", "third"])

    def rotate(config: Configuration) -> None:
        config.api_key["BearerToken"] = f"Bearer {next(tokens)}"

    configuration.refresh_api_key_hook = rotate
    client.resource(NODES).list()
    client.resource(NODES).list()
    assert [r.headers["authorization"] for r in stub.requests] == ["Bearer second", "Bearer third"]


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

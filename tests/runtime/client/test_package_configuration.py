"""The ``kubernetes`` package's ``Configuration`` as mcm builds it: the pool size and, in a pod,
the proxy chosen as client-go chooses it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import yaml

from mcm.emulator.kubeconfig import TlsMaterial
from mcm.runtime.client import config as client_config
from mcm.runtime.client.config import new_configuration
from mcm.runtime.client.connection import CONNECTION_POOL_SIZE


def _kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://kube.example"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


@pytest.mark.parametrize(("cpus", "pool"), [(1, CONNECTION_POOL_SIZE), (2, CONNECTION_POOL_SIZE), (32, 160)])
def test_the_pool_holds_the_watches_and_never_shrinks_the_packages_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpus: int, pool: int
) -> None:
    monkeypatch.setattr(multiprocessing, "cpu_count", lambda: cpus)  # the package's default: 5 per CPU
    configuration, _ = new_configuration(_kubeconfig(tmp_path))
    assert configuration.connection_pool_maxsize == pool
    assert configuration.keep_alive is True


@pytest.mark.parametrize(
    ("no_proxy", "proxy"),
    [(None, "http://proxy.corp:3128"), ("10.96.0.0/12", None), ("10.96.0.1", None)],
)
def test_in_a_pod_the_package_path_picks_the_proxy_as_client_go(
    tmp_path: Path, pki: TlsMaterial, monkeypatch: pytest.MonkeyPatch, no_proxy: str | None, proxy: str | None
) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_bytes(pki.ca_pem())
    (tmp_path / "namespace").write_text("machines\n")
    monkeypatch.setattr(client_config, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    for name in ("https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    if no_proxy is not None:
        monkeypatch.setenv("NO_PROXY", no_proxy)
    configuration, namespace = new_configuration(None)
    assert configuration.host == "https://10.96.0.1:443"
    assert (configuration.proxy, configuration.no_proxy) == (proxy, None)
    assert namespace == "machines"

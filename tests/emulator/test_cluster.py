"""ClusterPair, kubeconfig files, TLS and the ``serve`` command (docs/emulator.md)."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client, config

from mcm import packaged
from mcm.emulator import KUBERNETES_VERSION, ClusterPair
from mcm.emulator.kubeconfig import tls_available
from mcm.testing.envtest.build import pinned_version


def test_cluster_pair_two_independent_clusters(tmp_path: Path) -> None:
    with ClusterPair.start(tmp_path) as pair:
        assert pair.control.port != pair.target.port
        control = config.new_client_from_config(config_file=str(pair.control_kubeconfig))
        target = config.new_client_from_config(config_file=str(pair.target_kubeconfig))
        groups = [g.name for g in client.ApisApi(control).get_api_versions().groups]
        assert "machine.sapcloud.io" in groups
        assert "machine.sapcloud.io" not in [g.name for g in client.ApisApi(target).get_api_versions().groups]
        client.CoreV1Api(target).create_node({"metadata": {"name": "n1"}})
        assert [n.metadata.name for n in client.CoreV1Api(target).list_node().items] == ["n1"]
        assert client.CoreV1Api(control).list_node().items == []


def test_cluster_pair_single_shares_one_server(tmp_path: Path) -> None:
    with ClusterPair.single(tmp_path, namespace="mcm") as pair:
        assert pair.control is pair.target
        text = pair.control_kubeconfig.read_text()
        assert "namespace: mcm" in text
        assert pair.target_kubeconfig.exists()


def test_the_emulator_reports_the_release_the_real_tier_runs() -> None:
    """``KUBERNETES_VERSION`` follows the kube-apiserver that envtest's packaged ``go.mod`` pins
    (the real server of the conformance tests): bumping one without the other fails here."""
    assert pinned_version() == KUBERNETES_VERSION


@pytest.mark.skipif(not tls_available(), reason="TLS material needs the openssl command")
def test_tls_with_ca_and_token(tmp_path: Path) -> None:
    with ClusterPair.single(tmp_path, tls=True) as pair:
        assert pair.control.url.startswith("https://")
        api = config.new_client_from_config(config_file=str(pair.control_kubeconfig))
        assert client.VersionApi(api).get_code().git_version == KUBERNETES_VERSION
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        conf = client.Configuration()
        conf.host = pair.control.url
        conf.ssl_ca_cert = str(pair.control.tls.ca_cert)  # type: ignore[union-attr]
        with pytest.raises(client.ApiException) as info:
            client.CoreV1Api(client.ApiClient(conf)).list_namespace()
        assert info.value.status == 401


def test_serve_command_ready_file_and_sigterm(tmp_path: Path) -> None:
    from mcm.emulator.process import spawn

    with spawn(tmp_path, "serve", crds=packaged.machine_crds()) as process:
        info = process.ready_info
        assert info["kubeconfig"] == str(process.kubeconfig)
        with urllib.request.urlopen(info["url"] + "/apis/machine.sapcloud.io/v1alpha1", timeout=5) as resp:
            body = json.loads(resp.read())
        assert "machines" in [r["name"] for r in body["resources"]]
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(timeout=10) == 0


def test_remote_emulator_controls_a_serve_process(tmp_path: Path) -> None:
    from mcm.emulator.process import spawn

    process = spawn(tmp_path, "remote")
    try:
        remote = process.remote
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(process.kubeconfig)))
        api.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
        assert remote.get("configmaps", "default", "c")["metadata"]["name"] == "c"
        fault = remote.add_fault(code=503, verb="get", resource="configmaps")
        with pytest.raises(client.ApiException) as info:
            api.read_namespaced_config_map("c", "default")
        assert info.value.status == 503 and fault.hits == 1
        assert remote.count("get", "configmaps") == 1
        remote.pause("error")
        with pytest.raises(client.ApiException):
            api.list_namespace()
        remote.resume()
        assert api.list_namespace().items
        with pytest.raises(RuntimeError, match="unknown control"):
            remote.call("nope")
        rule = remote.faults.add(code=500, verb="list", resource="nodes")
        with pytest.raises(client.ApiException):
            api.list_node()
        assert rule.hits == 1 and remote.stats.count("list", "nodes") == 1
        remote.faults.clear()
        assert remote.watches.drop("close") == 0
    finally:
        process.close()
    assert process.proc.returncode == 0


def test_cluster_pair_out_of_process(tmp_path: Path) -> None:
    pair = ClusterPair.start(tmp_path, in_process=False)
    try:
        control = config.new_client_from_config(config_file=str(pair.control_kubeconfig))
        assert "machine.sapcloud.io" in [g.name for g in client.ApisApi(control).get_api_versions().groups]
        pair.target.pause("error")
        target = config.new_client_from_config(config_file=str(pair.target_kubeconfig))
        with pytest.raises(client.ApiException):
            client.CoreV1Api(target).list_node()
        pair.target.resume()
        assert client.CoreV1Api(target).list_node().items == []
    finally:
        pair.close()
    assert all(p.proc.returncode == 0 for p in pair.processes)


def test_remote_merge_patch_all_commits_while_the_server_is_paused(tmp_path: Path) -> None:
    from mcm.emulator.process import spawn

    with spawn(tmp_path, "bulk", controllers=False, history_size=50) as process:
        remote = process.remote
        remote.seed(
            [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}} for i in range(3)]
        )
        remote.pause("hang")
        patch = {"metadata": {"annotations": {"bench": "1"}}}
        assert remote.merge_patch_all("configmaps", "default", ["c0", "c2"], patch) == 2
        remote.resume()
        annotations = [
            (remote.get("configmaps", "default", f"c{i}") or {}).get("metadata", {}) for i in range(3)
        ]
        assert [a.get("annotations") for a in annotations] == [{"bench": "1"}, None, {"bench": "1"}]

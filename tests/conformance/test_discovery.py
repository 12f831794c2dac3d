"""Conformance: discovery, version, health, unknown resources."""

from __future__ import annotations

import re

from kubernetes import client

from mcm.emulator import KUBERNETES_VERSION
from tests.conformance.semantics_support import Cluster, cluster
from tests.conformance.wire import call

__all__ = ["cluster"]


def test_version_fields_complete_and_semver(cluster: Cluster) -> None:
    for path in ("/version", "/version/"):
        info = call(cluster, "GET", path).json()
        for key in (
            "major",
            "minor",
            "gitVersion",
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ):
            assert isinstance(info[key], str), key
        assert re.match(r"^v\d+\.\d+\.\d+", info["gitVersion"])
    assert client.VersionApi(cluster.api).get_code().git_version


def test_the_version_is_the_release_the_emulator_models(cluster: Cluster) -> None:
    """The emulator reports :data:`KUBERNETES_VERSION`; the real server this suite holds it to
    must be that release, so version-gated behaviour and the tests see one version."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    info = call(cluster, "GET", "/version").json()
    assert info["gitVersion"].startswith(KUBERNETES_VERSION)
    assert (info["major"], info["minor"]) == (major, minor)
    assert (info["emulationMajor"], info["emulationMinor"]) == (major, minor)
    assert (info["minCompatibilityMajor"], info["minCompatibilityMinor"]) == (major, str(int(minor) - 1))


def test_api_and_apis_lists_groups(cluster: Cluster) -> None:
    assert call(cluster, "GET", "/api").json()["versions"] == ["v1"]
    groups = {g["name"]: g for g in call(cluster, "GET", "/apis").json()["groups"]}
    for name in (
        "policy",
        "storage.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "machine.sapcloud.io",
    ):
        assert name in groups, name
    assert groups["policy"]["preferredVersion"]["groupVersion"] == "policy/v1"


def test_discovery_trailing_slash_equivalence(cluster: Cluster) -> None:
    for path in ("/api/v1", "/apis/policy/v1", "/apis/machine.sapcloud.io/v1alpha1"):
        assert call(cluster, "GET", path).json() == call(cluster, "GET", path + "/").json()
    assert call(cluster, "GET", "/apis/policy").json()["name"] == "policy"


def test_discovery_has_pods_eviction_entry(cluster: Cluster) -> None:
    resources = {r["name"]: r for r in call(cluster, "GET", "/api/v1").json()["resources"]}
    eviction = resources["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"], eviction["verbs"]) == (
        "policy",
        "v1",
        "Eviction",
        ["create"],
    )
    assert resources["pods"]["namespaced"] is True and "ns" in resources["namespaces"]["shortNames"]


def test_discovery_status_and_scale_subresources(cluster: Cluster) -> None:
    core = {r["name"] for r in call(cluster, "GET", "/api/v1").json()["resources"]}
    assert "nodes/status" in core
    mcm = {
        r["name"]: r for r in call(cluster, "GET", "/apis/machine.sapcloud.io/v1alpha1").json()["resources"]
    }
    assert "machines/status" in mcm
    scale = mcm["machinesets/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    storage = {r["name"] for r in call(cluster, "GET", "/apis/storage.k8s.io/v1").json()["resources"]}
    assert "volumeattachments" in storage


def test_healthz_livez_readyz_ok(cluster: Cluster) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        reply = call(cluster, "GET", path)
        assert (reply.status, reply.data) == (200, b"ok")


def test_unknown_resource_404(cluster: Cluster) -> None:
    assert call(cluster, "GET", "/apis/machine.sapcloud.io/v1alpha1/namespaces/x/nosuch").status == 404
    assert call(cluster, "GET", "/api/v1/nosuch").status == 404


def test_get_name_with_underscore_is_404(cluster: Cluster) -> None:
    for path in (
        "/api/v1/nodes/dummy_name",
        "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machines/dummy_name",
    ):
        reply = call(cluster, "GET", path)
        assert reply.status == 404 and reply.json()["reason"] == "NotFound"


def test_openapi_v3_lists_group_versions(cluster: Cluster) -> None:
    paths = call(cluster, "GET", "/openapi/v3").json()["paths"]
    assert "api/v1" in paths and "apis/policy/v1" in paths
    doc = call(cluster, "GET", paths["api/v1"]["serverRelativeURL"]).json()
    assert any(
        op.get("x-kubernetes-group-version-kind", {}).get("kind") == "Node"
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict)
    )

"""The requests RESTClient sends: methods, paths, query parameters, bodies, content types."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.runtime.client import ClusterClient, ListOptions
from mcm.runtime.client.resources import (
    BUILTIN_RESOURCES,
    EVENTS,
    EVENTS_V1,
    LEASES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    Resource,
    builtin,
)
from tests.runtime.client.stub_server import Reply, Request, StubServer


@pytest.fixture
def seen(stub: StubServer) -> list[Request]:
    requests: list[Request] = []

    def echo(req: Request) -> Reply:
        requests.append(req)
        return Reply(200, {"kind": "Echo", "metadata": {"name": "x", "resourceVersion": "9"}})

    stub.handler = echo
    return requests


def _pod(name: str = "p", ns: str | None = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def test_paths_for_core_and_grouped_resources(stub_client: ClusterClient, seen: list[Request]) -> None:
    stub_client.resource(PODS).get("p", namespace="ns")
    stub_client.resource(NODES).get("n")
    stub_client.resource(LEASES).get("l", namespace="kube-system")
    stub_client.resource(POD_DISRUPTION_BUDGETS).list()
    stub_client.resource(POD_DISRUPTION_BUDGETS).list(namespace="ns")
    stub_client.resource(PODS).get("p", namespace="ns", subresource="status")
    assert [r.path for r in seen] == [
        "/api/v1/namespaces/ns/pods/p",
        "/api/v1/nodes/n",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
        "/apis/policy/v1/poddisruptionbudgets",
        "/apis/policy/v1/namespaces/ns/poddisruptionbudgets",
        "/api/v1/namespaces/ns/pods/p/status",
    ]


def test_names_are_escaped_in_paths(stub_client: ClusterClient, seen: list[Request]) -> None:
    stub_client.resource(NODES).get("dummy_name")
    stub_client.resource(NODES).get("a b")
    assert [r.path for r in seen] == ["/api/v1/nodes/dummy_name", "/api/v1/nodes/a%20b"]


def test_list_options_and_keyword_changes(stub_client: ClusterClient, seen: list[Request]) -> None:
    options = ListOptions(label_selector="a in (x,y)", field_selector="spec.nodeName=n1", limit=500)
    stub_client.resource(PODS).list(options, resource_version="0", resource_version_match="NotOlderThan")
    assert seen[0].query == {
        "labelSelector": "a in (x,y)",
        "fieldSelector": "spec.nodeName=n1",
        "limit": "500",
        "resourceVersion": "0",
        "resourceVersionMatch": "NotOlderThan",
    }


def test_get_with_resource_version(stub_client: ClusterClient, seen: list[Request]) -> None:
    stub_client.resource(NODES).get("n", resource_version="0")
    assert seen[0].query == {"resourceVersion": "0"}


def test_writes_take_the_namespace_from_the_body(stub_client: ClusterClient, seen: list[Request]) -> None:
    pods = stub_client.resource(PODS)
    pods.create(_pod())
    pods.create(_pod(ns=None), namespace="other")
    pods.update(_pod())
    pods.update_status(_pod())
    assert [(r.method, r.path) for r in seen] == [
        ("POST", "/api/v1/namespaces/ns/pods"),
        ("POST", "/api/v1/namespaces/other/pods"),
        ("PUT", "/api/v1/namespaces/ns/pods/p"),
        ("PUT", "/api/v1/namespaces/ns/pods/p/status"),
    ]
    assert seen[0].body == _pod()
    assert seen[0].headers["content-type"] == "application/json"


def test_missing_namespace_or_name_is_a_caller_error(stub_client: ClusterClient, seen: list[Request]) -> None:
    pods = stub_client.resource(PODS)
    with pytest.raises(ValueError, match="namespace"):
        pods.get("p")
    with pytest.raises(ValueError, match="namespace"):
        pods.create(_pod(ns=None))
    with pytest.raises(ValueError, match=r"metadata\.name"):
        pods.update({"metadata": {"namespace": "ns"}})
    with pytest.raises(ValueError, match="name"):
        pods.get("", namespace="ns")
    assert seen == []


@pytest.mark.parametrize(
    ("kind", "body", "content_type"),
    [
        ("merge", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json"),
        ("strategic", {"spec": {"taints": []}}, "application/strategic-merge-patch+json"),
        ("json", [{"op": "add", "path": "/metadata/labels/a", "value": "b"}], "application/json-patch+json"),
    ],
)
def test_patch_content_types(
    stub_client: ClusterClient, seen: list[Request], kind: str, body: Any, content_type: str
) -> None:
    stub_client.resource(NODES).patch("n", body, kind=kind)  # type: ignore[arg-type]
    assert (seen[0].method, seen[0].path) == ("PATCH", "/api/v1/nodes/n")
    assert seen[0].headers["content-type"] == content_type
    assert seen[0].body == body


def test_patch_of_a_subresource(stub_client: ClusterClient, seen: list[Request]) -> None:
    stub_client.resource(PODS).patch("p", {"status": {}}, namespace="ns", subresource="status")
    assert seen[0].path == "/api/v1/namespaces/ns/pods/p/status"


def test_delete_sends_delete_options(stub_client: ClusterClient, seen: list[Request]) -> None:
    pods = stub_client.resource(PODS)
    pods.delete("p", namespace="ns")
    pods.delete(
        "p",
        namespace="ns",
        propagation="Foreground",
        preconditions={"uid": "u1", "resourceVersion": "7"},
        grace_period_seconds=0,
    )
    assert [(r.method, r.path) for r in seen] == [("DELETE", "/api/v1/namespaces/ns/pods/p")] * 2
    assert seen[0].body == {"kind": "DeleteOptions", "apiVersion": "v1"}
    assert seen[1].body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u1", "resourceVersion": "7"},
        "gracePeriodSeconds": 0,
    }


def test_resource_table() -> None:
    assert PODS.prefix == "/api/v1" and PODS.group_version == "v1"
    assert LEASES.prefix == "/apis/coordination.k8s.io/v1"
    assert LEASES.api_version == "coordination.k8s.io/v1"
    assert LEASES.qualified_name == "leases.coordination.k8s.io"
    assert EVENTS.qualified_name == "events" and EVENTS_V1.qualified_name == "events.events.k8s.io"
    assert builtin("poddisruptionbudgets.policy") is POD_DISRUPTION_BUDGETS
    assert len({r.qualified_name for r in BUILTIN_RESOURCES}) == len(BUILTIN_RESOURCES)
    assert {r.resource for r in BUILTIN_RESOURCES if not r.namespaced} == {
        "namespaces",
        "nodes",
        "persistentvolumes",
        "volumeattachments",
        "customresourcedefinitions",
    }
    custom = Resource("machine.sapcloud.io", "v1alpha1", "machines", "Machine", True)
    assert custom.prefix == "/apis/machine.sapcloud.io/v1alpha1"
    assert str(custom) == "machines.machine.sapcloud.io/v1alpha1"


def test_create_posts_to_the_named_subresource(stub_client: ClusterClient, seen: list[Request]) -> None:
    """A TokenRequest goes to serviceaccounts/<name>/token, not to the collection (found on a real
    kube-apiserver, where the collection answers 'TokenRequest' is not a ServiceAccount)."""
    accounts = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "mc"}}
    stub_client.resource(accounts).create(request, namespace="ns", subresource="token")
    stub_client.resource(accounts).create({"metadata": {"name": "mc"}}, namespace="ns")
    assert [(r.method, r.path) for r in seen] == [
        ("POST", "/api/v1/namespaces/ns/serviceaccounts/mc/token"),
        ("POST", "/api/v1/namespaces/ns/serviceaccounts"),
    ]


@pytest.mark.parametrize("name", ["", None, 7])
def test_a_write_of_an_object_without_a_usable_name_is_refused_before_any_request(
    stub_client: ClusterClient, seen: list[Request], name: object
) -> None:
    """PUT to ``…/pods/`` would address the collection, not the object: refused locally."""
    pods = stub_client.resource(PODS)
    body = {**_pod(), "metadata": {"namespace": "ns", "name": name}}
    for write in (pods.update, pods.update_status):
        with pytest.raises(ValueError, match=r"no metadata\.name"):
            write(body)
    assert seen == []

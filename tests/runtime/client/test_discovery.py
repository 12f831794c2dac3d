"""Discovery over a scripted server: sparse or odd documents are read without failing."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.runtime.client import ClusterClient
from tests.runtime.client.stub_server import Reply, Request, StubServer


def serve(stub: StubServer, documents: dict[str, Any]) -> None:
    def answer(request: Request) -> Reply:
        return Reply(200, documents[request.path]) if request.path in documents else Reply(404, {})

    stub.handler = answer


@pytest.mark.parametrize(
    ("api", "apis", "names"),
    [
        ({"versions": ["v1"]}, {"groups": [{"name": "policy"}]}, ["", "policy"]),
        ({}, {"groups": [{"name": "policy"}, "junk"]}, ["policy"]),
        ({"versions": ["v1", 3]}, {}, [""]),
        ({"versions": None}, {"groups": None}, []),
    ],
)
def test_server_groups_from_sparse_documents(
    stub: StubServer, stub_client: ClusterClient, api: dict[str, Any], apis: dict[str, Any], names: list[str]
) -> None:
    serve(stub, {"/api": api, "/apis": apis})
    groups = stub_client.discovery().server_groups()
    assert [g["name"] for g in groups] == names


def test_the_core_groups_preferred_version_is_its_first(stub: StubServer, stub_client: ClusterClient) -> None:
    serve(stub, {"/api": {"versions": ["v1", "v2"]}, "/apis": {}})
    discovery = stub_client.discovery()
    assert discovery.preferred_version("") == "v1"
    assert discovery.preferred_version("policy") is None


@pytest.mark.parametrize(
    ("name", "kind", "found"),
    [
        ("pods/eviction", None, True),
        ("pods/eviction", "Eviction", True),
        ("pods/eviction", "Pod", False),
        ("pods/log", None, False),
    ],
)
def test_has_resource_skips_odd_entries(
    stub: StubServer, stub_client: ClusterClient, name: str, kind: str | None, found: bool
) -> None:
    listing = {"resources": ["junk", {"kind": "Pod"}, {"name": "pods/eviction", "kind": "Eviction"}]}
    serve(stub, {"/api/v1": listing})
    assert stub_client.discovery().has_resource("v1", name, kind) is found


def test_a_group_version_without_resources_has_none(stub: StubServer, stub_client: ClusterClient) -> None:
    serve(stub, {"/apis/policy/v1": {"kind": "APIResourceList"}})
    assert stub_client.discovery().has_resource("policy/v1", "poddisruptionbudgets") is False


def test_a_group_without_a_preferred_version_has_none(stub: StubServer, stub_client: ClusterClient) -> None:
    serve(stub, {"/api": {}, "/apis": {"groups": [{"name": "policy", "versions": []}]}})
    assert stub_client.discovery().preferred_version("policy") is None

"""Conformance: CRD establishment, schema handling of custom objects, CRD deletion."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.semantics_support import (
    RUN_ID,
    Cluster,
    cluster,
    emulator_deviation,
    namespace,
    within,
)

__all__ = ["cluster", "namespace"]

MACHINES = ("machine.sapcloud.io", "v1alpha1", "machines")


def crd_body(group: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {"size": {"type": "integer", "minimum": 1}},
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}", "labels": {"conformance": RUN_ID}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def established(cluster: Cluster, name: str) -> bool:
    crd = cluster.crds.read_custom_resource_definition(name)
    conditions = {c.type: c.status for c in (crd.status.conditions or [])}
    return conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True"


def crd_gone(cluster: Cluster, name: str) -> bool:
    try:
        cluster.crds.read_custom_resource_definition(name)
    except client.ApiException as err:
        return err.status == 404
    return False


@pytest.fixture
def gizmo_group(cluster: Cluster) -> Iterator[str]:
    group = f"conf{uuid.uuid4().hex[:6]}.example.com"
    name = f"gizmos.{group}"
    cluster.crds.create_custom_resource_definition(crd_body(group))
    cluster.wait(lambda: established(cluster, name), "the CRD to be established")
    yield group
    try:
        cluster.crds.delete_custom_resource_definition(name)
    except client.ApiException as err:
        if err.status != 404:
            raise


def test_crd_established_and_discoverable(cluster: Cluster, gizmo_group: str) -> None:
    resources = client.CustomObjectsApi(cluster.api).get_api_resources(gizmo_group, "v1")
    assert {r.name for r in resources.resources} >= {"gizmos", "gizmos/status"}
    groups = client.ApisApi(cluster.api).get_api_versions()
    assert gizmo_group in {g.name for g in groups.groups}


@pytest.mark.deviation  # real: the CRD stays Terminating while "held" keeps its finalizer
def test_crd_delete_removes_custom_objects(cluster: Cluster, gizmo_group: str, namespace: str) -> None:
    body = {
        "apiVersion": f"{gizmo_group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": "g"},
        "spec": {"size": 1},
    }
    cluster.custom.create_namespaced_custom_object(gizmo_group, "v1", namespace, "gizmos", body)
    held = {**body, "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    cluster.custom.create_namespaced_custom_object(gizmo_group, "v1", namespace, "gizmos", held)
    name = f"gizmos.{gizmo_group}"
    cluster.crds.delete_custom_resource_definition(name)
    gone = within(10, lambda: crd_gone(cluster, name))
    emulator_deviation(gone, 'the CRD stays Terminating while "held" keeps its finalizer')
    groups = client.ApisApi(cluster.api).get_api_versions()
    assert gizmo_group not in {g.name for g in groups.groups}


def test_custom_object_create_drops_status_sets_generation_1(
    cluster: Cluster, gizmo_group: str, namespace: str
) -> None:
    body = {
        "apiVersion": f"{gizmo_group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": "g"},
        "spec": {"size": 1},
        "status": {"phase": "Done"},
    }
    created = cluster.custom.create_namespaced_custom_object(gizmo_group, "v1", namespace, "gizmos", body)
    assert "status" not in created
    assert created["metadata"]["generation"] == 1
    patched = cluster.custom.patch_namespaced_custom_object(
        gizmo_group, "v1", namespace, "gizmos", "g", {"metadata": {"labels": {"a": "b"}}}
    )
    assert patched["metadata"]["generation"] == 1
    patched = cluster.custom.patch_namespaced_custom_object(
        gizmo_group, "v1", namespace, "gizmos", "g", {"spec": {"size": 2}}
    )
    assert patched["metadata"]["generation"] == 2


def test_custom_object_prunes_unknown_fields_and_warns(cluster: Cluster, namespace: str) -> None:
    group, version, plural = MACHINES
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "Machine",
        "metadata": {"name": "pruned"},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}, "foo": "bar"},
    }
    response = cluster.custom.create_namespaced_custom_object(
        group, version, namespace, plural, body, _preload_content=False
    )
    created = json.loads(response.data)
    assert "foo" not in created["spec"]
    assert 'unknown field \\"spec.foo\\"' in (response.headers.get("Warning") or "")


def test_custom_object_strict_field_validation_400(cluster: Cluster, namespace: str) -> None:
    group, version, plural = MACHINES
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "Machine",
        "metadata": {"name": "strict"},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}, "foo": "bar"},
    }
    with pytest.raises(client.ApiException) as err:
        cluster.custom.create_namespaced_custom_object(
            group, version, namespace, plural, body, field_validation="Strict"
        )
    assert err.value.status == 400
    assert 'strict decoding error: unknown field "spec.foo"' in json.loads(err.value.body)["message"]


def _machine_with_bogus_taint_field(name: str) -> dict[str, Any]:
    group, version, _ = MACHINES
    taint = {"key": "k", "value": "v", "effect": "NoSchedule", "bogus": 1}
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "Machine",
        "metadata": {"name": name},
        "spec": {
            "class": {"kind": "MachineClass", "name": "c"},
            "nodeTemplate": {"spec": {"taints": [{"key": "ok", "effect": "NoExecute"}, taint]}},
        },
    }


def test_custom_object_unknown_field_inside_a_list_warns(cluster: Cluster, namespace: str) -> None:
    group, version, plural = MACHINES
    response = cluster.custom.create_namespaced_custom_object(
        group,
        version,
        namespace,
        plural,
        _machine_with_bogus_taint_field("listwarn"),
        _preload_content=False,
    )
    created = json.loads(response.data)
    taints = created["spec"]["nodeTemplate"]["spec"]["taints"]
    assert taints[1] == {"key": "k", "value": "v", "effect": "NoSchedule"}
    warning = response.headers.get("Warning") or ""
    assert 'unknown field \\"spec.nodeTemplate.spec.taints[1].bogus\\"' in warning


def test_custom_object_unknown_field_inside_a_list_strict_400(cluster: Cluster, namespace: str) -> None:
    group, version, plural = MACHINES
    body = _machine_with_bogus_taint_field("liststrict")
    body["spec"]["other"] = "x"
    with pytest.raises(client.ApiException) as err:
        cluster.custom.create_namespaced_custom_object(
            group, version, namespace, plural, body, field_validation="Strict"
        )
    assert err.value.status == 400
    message = json.loads(err.value.body)["message"]
    assert message.startswith('Machine in version "v1alpha1" cannot be handled as a Machine: ')
    assert 'strict decoding error: unknown field "' in message
    assert 'unknown field "spec.nodeTemplate.spec.taints[1].bogus"' in message
    assert 'unknown field "spec.other"' in message


def test_custom_object_schema_violation_422(cluster: Cluster, gizmo_group: str, namespace: str) -> None:
    body = {
        "apiVersion": f"{gizmo_group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": "bad"},
        "spec": {"size": "big"},
    }
    with pytest.raises(client.ApiException) as err:
        cluster.custom.create_namespaced_custom_object(gizmo_group, "v1", namespace, "gizmos", body)
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert status["message"].startswith(f'Gizmo.{gizmo_group} "bad" is invalid:')
    assert status["details"]["causes"][0]["field"] == "spec.size"
    missing = {**body, "spec": {}}
    with pytest.raises(client.ApiException) as err:
        cluster.custom.create_namespaced_custom_object(gizmo_group, "v1", namespace, "gizmos", missing)
    assert err.value.status == 422

"""The CRDs in mcm/apis/machine/crds/ (mirrored in charts/machine-controller/crds/) and the typed
models describe the same schema."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mcm import packaged
from mcm.apis.machine.resources import MACHINE_RESOURCES
from mcm.apis.machine.v1alpha1 import Machine, MachineClass, MachineDeployment, MachineSet, Model
from mcm.apis.machine.v1alpha1.meta import ListMeta, ObjectMeta
from mcm.apis.machine.v1alpha1.model import Codec, ListCodec, MapCodec, ModelCodec, model_fields
from mcm.emulator.schema import prune, validate
from tests.apis.fixtures import MACHINE, MACHINE_CLASS, MACHINE_DEPLOYMENT, MACHINE_SET

CRD_DIR = packaged.machine_crds()

KINDS: dict[str, type[Model]] = {
    "machines": Machine,
    "machineclasses": MachineClass,
    "machinesets": MachineSet,
    "machinedeployments": MachineDeployment,
}


def _load(plural: str) -> dict[str, Any]:
    docs = [
        doc for doc in yaml.safe_load_all((CRD_DIR / f"machine.sapcloud.io_{plural}.yaml").read_text()) if doc
    ]
    assert len(docs) == 1
    crd: dict[str, Any] = docs[0]
    return crd


def _version(crd: dict[str, Any]) -> dict[str, Any]:
    versions = crd["spec"]["versions"]
    assert [v["name"] for v in versions] == ["v1alpha1"]
    version: dict[str, Any] = versions[0]
    return version


def _schema(plural: str) -> dict[str, Any]:
    schema: dict[str, Any] = _version(_load(plural))["schema"]["openAPIV3Schema"]
    return schema


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _compare_model(cls: type[Model], schema: dict[str, Any], path: str) -> list[str]:
    """Mismatches between a model's typed fields and an object schema, both directions."""
    problems: list[str] = []
    properties: dict[str, Any] = schema.get("properties", {})
    typed = {spec.json: spec for spec in model_fields(cls)}
    for name, spec in typed.items():
        if name not in properties:
            problems.append(f"{_join(path, name)}: typed in {cls.__name__} but missing from the CRD")
            continue
        problems.extend(_compare_codec(spec.codec, properties[name], _join(path, name)))
    problems.extend(
        f"{_join(path, name)}: in the CRD but not typed in {cls.__name__}"
        for name in properties
        if name not in typed
    )
    return problems


def _compare_codec(codec: Codec, schema: dict[str, Any], path: str) -> list[str]:
    kind = codec.schema_type
    if kind == "any":
        return []
    if kind == "int-or-string":
        return [] if schema.get("x-kubernetes-int-or-string") else [f"{path}: expected int-or-string"]
    if kind == "model":
        assert isinstance(codec, ModelCodec)
        return _compare_sub_object(codec.cls, schema, path)
    if schema.get("type") != {"object": "object"}.get(kind, kind):
        return [f"{path}: typed as {kind}, CRD says {schema.get('type')}"]
    if kind == "array":
        assert isinstance(codec, ListCodec)
        return _compare_codec(codec.item, schema["items"], f"{path}[]")
    if kind == "object":
        assert isinstance(codec, MapCodec)
        return _compare_codec(codec.value, schema["additionalProperties"], f"{path}{{}}")
    if schema.get("format") not in (codec.schema_format, "int32", "int64"):
        return [f"{path}: format {codec.schema_format}, CRD says {schema.get('format')}"]
    return []


def _compare_sub_object(cls: type[Model], schema: dict[str, Any], path: str) -> list[str]:
    if schema.get("type") != "object":
        return [f"{path}: typed as an object, CRD says {schema.get('type')}"]
    if cls in (ObjectMeta, ListMeta):
        # Object metadata is opaque to the schema: served by the API server at the root,
        # preserved verbatim in templates.
        opaque = "properties" not in schema
        return [] if opaque else [f"{path}: metadata should be an opaque object in the CRD"]
    return _compare_model(cls, schema, path)


@pytest.mark.parametrize("plural", list(KINDS))
def test_typed_fields_and_crd_schema_match(plural: str) -> None:
    assert _compare_model(KINDS[plural], _schema(plural), "") == []


def test_the_comparison_catches_drift() -> None:
    schema = _schema("machines")
    schema["properties"]["spec"]["properties"]["newCrdField"] = {"type": "string"}
    del schema["properties"]["status"]["properties"]["lastKnownState"]
    schema["properties"]["spec"]["properties"]["maxEvictRetries"] = {"type": "string"}
    problems = _compare_model(Machine, schema, "")
    assert problems == [
        "spec.maxEvictRetries: typed as integer, CRD says string",
        "spec.newCrdField: in the CRD but not typed in MachineSpec",
        "status.lastKnownState: typed in MachineStatus but missing from the CRD",
    ]


def _structural_problems(schema: dict[str, Any], path: str) -> list[str]:
    """Nodes that break the structural-schema rules (every node typed, unless int-or-string or
    an opaque preserved object)."""
    problems = []
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: no type")
    for name, sub in schema.get("properties", {}).items():
        problems.extend(_structural_problems(sub, _join(path, name)))
    if "items" in schema:
        problems.extend(_structural_problems(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        problems.extend(_structural_problems(schema["additionalProperties"], f"{path}{{}}"))
    return problems


@pytest.mark.parametrize("resource", MACHINE_RESOURCES, ids=lambda r: r.resource)
def test_crd_matches_its_resource_and_is_structural(resource: Any) -> None:
    crd = _load(resource.resource)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == resource.qualified_name
    spec = crd["spec"]
    assert spec["group"] == resource.group
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == resource.kind
    assert spec["names"]["listKind"] == resource.kind + "List"
    assert spec["names"]["plural"] == resource.resource
    assert spec["names"]["singular"] == resource.kind.lower()
    version = _version(crd)
    assert version["served"] is True
    assert version["storage"] is True
    assert _structural_problems(version["schema"]["openAPIV3Schema"], "") == []


def test_names_subresources_and_printer_columns_are_upstream_s() -> None:
    expected = {
        "machines": ("mc", {"status": {}}, ["Status", "Age", "Node", "ProviderID"]),
        "machineclasses": ("mcc", None, None),
        "machinesets": ("mcs", "scale", ["Desired", "Current", "Ready", "Age"]),
        "machinedeployments": ("mcd", "scale", ["Ready", "Desired", "Up-to-date", "Available", "Age"]),
    }
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
    for plural, (short, subresources, columns) in expected.items():
        crd = _load(plural)
        version = _version(crd)
        assert crd["spec"]["names"]["shortNames"] == [short]
        want_sub = {"status": {}, "scale": scale} if subresources == "scale" else subresources
        assert version.get("subresources") == want_sub, plural
        assert [col["name"] for col in version.get("additionalPrinterColumns", [])] == (columns or [])
    machine_columns = {col["name"]: col for col in _version(_load("machines"))["additionalPrinterColumns"]}
    assert machine_columns["Status"]["jsonPath"] == ".status.currentStatus.phase"
    assert machine_columns["Node"]["jsonPath"] == ".metadata.labels.node"
    assert machine_columns["ProviderID"]["priority"] == 1


def test_opaque_parts_preserve_unknown_fields_and_required_lists_are_upstream_s() -> None:
    machine_class = _schema("machineclasses")
    assert machine_class["required"] == ["providerSpec"]
    assert machine_class["properties"]["providerSpec"]["x-kubernetes-preserve-unknown-fields"] is True
    node_template = machine_class["properties"]["nodeTemplate"]
    assert node_template["x-kubernetes-preserve-unknown-fields"] is True
    assert sorted(node_template["required"]) == ["capacity", "instanceType", "region", "zone"]
    machine_spec = _schema("machines")["properties"]["spec"]["properties"]
    assert (
        machine_spec["nodeTemplate"]["properties"]["metadata"]["x-kubernetes-preserve-unknown-fields"] is True
    )
    for plural in ("machinesets", "machinedeployments"):
        template = _schema(plural)["properties"]["spec"]["properties"]["template"]
        assert template["properties"]["metadata"]["x-kubernetes-preserve-unknown-fields"] is True
    assert _schema("machinedeployments")["properties"]["spec"]["required"] == ["template"]
    assert "node" not in _schema("machines")["properties"]["status"]["properties"]


@pytest.mark.parametrize("plural", list(KINDS))
def test_upstream_shaped_objects_pass_the_structural_schema_unchanged(plural: str) -> None:
    """What upstream MCM writes survives our CRDs: nothing pruned, nothing rejected."""
    obj = {
        "machines": MACHINE,
        "machineclasses": MACHINE_CLASS,
        "machinesets": MACHINE_SET,
        "machinedeployments": MACHINE_DEPLOYMENT,
    }[plural]
    schema = _schema(plural)
    pruned, dropped = prune(obj, schema)
    assert dropped == []
    assert pruned == obj
    assert validate(pruned, schema) == []

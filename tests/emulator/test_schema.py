"""Unit tests for mcm.emulator.schema: structural pruning, defaulting and validation."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.emulator.schema import apply_defaults, prune, validate

MACHINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["class"],
            "properties": {
                "class": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
                },
                "providerID": {"type": "string"},
                "replicas": {"type": "integer", "format": "int32", "minimum": 0},
                "maxSurge": {"x-kubernetes-int-or-string": True},
                "nodeTemplate": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                    },
                },
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "when": {"type": "string", "format": "date-time", "nullable": True},
                "short": {"type": "string", "minLength": 2, "maxLength": 4},
                "few": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "integer"}},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def machine(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"class": {"name": "c"}, **spec},
    }


def test_prune_drops_unknown_fields_and_reports_paths() -> None:
    obj = machine(foo=1, ports=[{"name": "a", "bogus": True}])
    obj["extra"] = {"x": 1}
    obj["metadata"]["unknownMeta"] = "x"
    pruned, dropped = prune(obj, MACHINE_SCHEMA)
    assert "foo" not in pruned["spec"]
    assert pruned["spec"]["ports"] == [{"name": "a"}]
    assert "extra" not in pruned
    assert "unknownMeta" not in pruned["metadata"]
    assert sorted(dropped) == ["extra", "metadata.unknownMeta", "spec.foo", "spec.ports[0].bogus"]
    assert obj["spec"]["foo"] == 1  # input untouched


def test_prune_keeps_preserved_and_additional_properties() -> None:
    obj = machine(nodeTemplate={"anything": {"goes": [1]}}, labels={"a": "b"})
    pruned, dropped = prune(obj, MACHINE_SCHEMA)
    assert pruned["spec"]["nodeTemplate"] == {"anything": {"goes": [1]}}
    assert pruned["spec"]["labels"] == {"a": "b"}
    assert dropped == []


def test_prune_embedded_resource_keeps_type_meta() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "template": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
                    }
                },
            }
        },
    }
    obj = {
        "spec": {
            "template": {
                "apiVersion": "v1",
                "kind": "X",
                "metadata": {"labels": {"a": "b"}, "junk": 1},
                "spec": {"a": "x", "b": 2},
            }
        }
    }
    pruned, dropped = prune(obj, schema)
    template = pruned["spec"]["template"]
    assert template == {
        "apiVersion": "v1",
        "kind": "X",
        "metadata": {"labels": {"a": "b"}},
        "spec": {"a": "x"},
    }
    assert sorted(dropped) == ["spec.template.metadata.junk", "spec.template.spec.b"]


def test_defaults_fill_missing_only() -> None:
    out = apply_defaults(machine(), MACHINE_SCHEMA)
    assert out["spec"]["mode"] == "a"
    assert apply_defaults(machine(mode="b"), MACHINE_SCHEMA)["spec"]["mode"] == "b"
    assert "spec" not in apply_defaults({"metadata": {}}, MACHINE_SCHEMA)


def test_non_nullable_nulls_are_defaulted_or_dropped_before_validation() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "status": {
                "type": "object",
                "properties": {
                    "lastUpdateTime": {"type": "string", "format": "date-time"},
                    "phase": {"type": "string", "default": "Pending"},
                    "note": {"type": "string", "nullable": True},
                },
            }
        },
    }
    obj = {"status": {"lastUpdateTime": None, "phase": None, "note": None}}
    out = apply_defaults(obj, schema)
    assert out == {"status": {"phase": "Pending", "note": None}}
    assert validate(out, schema) == []
    assert validate(obj, schema) != []  # without the pruning step the null would be rejected


def test_validate_accepts_valid_object() -> None:
    obj = machine(
        replicas=3, maxSurge="25%", tags=["a", "b"], when="2026-01-01T00:00:00Z", short="ab", few=[1]
    )
    assert validate(obj, MACHINE_SCHEMA) == []
    assert validate(machine(maxSurge=1, when=None), MACHINE_SCHEMA) == []


@pytest.mark.parametrize(
    ("spec", "field", "error_type", "detail_fragment"),
    [
        ({"replicas": "three"}, "spec.replicas", "FieldValueInvalid", "must be of type integer"),
        ({"replicas": -1}, "spec.replicas", "FieldValueInvalid", "greater than or equal to 0"),
        ({"replicas": 2**40}, "spec.replicas", "FieldValueInvalid", "int32"),
        ({"class": {"name": "Bad_Name"}}, "spec.class.name", "FieldValueInvalid", "should match"),
        ({"mode": "c"}, "spec.mode", "FieldValueNotSupported", '"a", "b"'),
        ({"maxSurge": True}, "spec.maxSurge", "FieldValueInvalid", "integer,string"),
        ({"tags": ["a", "a"]}, "spec.tags[1]", "FieldValueDuplicate", ""),
        ({"ports": [{"name": "x"}, {"name": "x", "port": 2}]}, "spec.ports[1]", "FieldValueDuplicate", ""),
        ({"when": "yesterday"}, "spec.when", "FieldValueInvalid", "date-time"),
        ({"short": "a"}, "spec.short", "FieldValueInvalid", "at least 2 chars"),
        ({"short": "abcde"}, "spec.short", "FieldValueTooLong", "4"),
        ({"few": []}, "spec.few", "FieldValueInvalid", "at least 1 items"),
        ({"few": [1, 2, 3]}, "spec.few", "FieldValueTooMany", "at most 2"),
        ({"labels": {"a": 1}}, "spec.labels.a", "FieldValueInvalid", "must be of type string"),
        ({"providerID": None}, "spec.providerID", "FieldValueInvalid", '"null"'),
    ],
)
def test_validate_reports_field_errors(
    spec: dict[str, Any], field: str, error_type: str, detail_fragment: str
) -> None:
    errors = validate(machine(**spec), MACHINE_SCHEMA)
    assert [(e.field, e.type) for e in errors] == [(field, error_type)]
    assert detail_fragment in errors[0].detail


def test_validate_required() -> None:
    obj = machine()
    del obj["spec"]["class"]
    errors = validate(obj, MACHINE_SCHEMA)
    assert [(e.type, e.field) for e in errors] == [("FieldValueRequired", "spec.class")]


def test_validate_tolerates_malformed_schema_and_object() -> None:
    assert validate({"spec": [1, 2]}, {"properties": {"spec": {"type": "object"}}})[0].field == "spec"
    assert validate({"spec": {"a": 1}}, {"properties": "nonsense"}) == []
    assert validate({"spec": "x"}, {"properties": {"spec": {"type": "string", "pattern": "("}}}) == []

"""fieldValidation=Strict for built-in kinds, checked against the client's model field lists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.emulator import Emulator
from mcm.emulator.builtinfields import unknown_paths
from tests.emulator import builtin_fields_gen, builtin_schemas_gen
from tests.emulator.raw import Raw, pod

NS = "/api/v1/namespaces/default"


@pytest.fixture
def raw(emulator: Emulator) -> Iterator[Raw]:
    client = Raw(emulator.url)
    yield client
    client.close()


def test_committed_table_matches_the_installed_client() -> None:
    assert builtin_fields_gen.OUT.read_text(encoding="utf-8") == builtin_fields_gen.render(), (
        "regenerate with: python -m tests.emulator.builtin_fields_gen"
    )


def test_committed_schemas_match_the_installed_client() -> None:
    assert builtin_schemas_gen.OUT.read_text(encoding="utf-8") == builtin_schemas_gen.render(), (
        "regenerate with: python -m tests.emulator.builtin_schemas_gen"
    )


def test_unknown_paths_descend_into_objects_lists_and_maps() -> None:
    obj = pod("p")
    obj["metadata"]["bogus"] = 1
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "zz": 1}]
    obj["spec"]["nodeSelector"] = {"free": "form"}
    obj["spec"]["affinity"] = "not an object"
    assert unknown_paths("", "Pod", obj) == ["metadata.bogus", "spec.containers[0].ports[0].zz"]
    assert unknown_paths("example.com", "Widget", {"anything": 1}) == []


def test_strict_create_of_a_built_in_kind_rejects_unknown_fields(raw: Raw) -> None:
    body = pod("strict")
    body["spec"]["containers"][0]["bogus"] = True
    body["spec"]["other"] = 1
    code, _, status = raw.post(f"{NS}/pods?fieldValidation=Strict", body)
    assert code == 400
    assert status["reason"] == "BadRequest"
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].bogus", unknown field "spec.other"'
    )
    assert raw.get(f"{NS}/pods/strict")[0] == 404


def test_warn_and_ignore_keep_unknown_fields_of_built_in_kinds(raw: Raw) -> None:
    body = {"metadata": {"name": "cm"}, "data": {"a": "b"}, "extra": {"x": 1}}
    code, headers, created = raw.post(f"{NS}/configmaps", body)
    assert code == 201 and created["extra"] == {"x": 1}
    assert "warning" not in {k.lower() for k in headers}
    code, _, _ = raw.post(f"{NS}/configmaps?fieldValidation=Ignore", {**body, "metadata": {"name": "cm2"}})
    assert code == 201


def test_strict_patch_of_a_built_in_kind(raw: Raw) -> None:
    code, _, _ = raw.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
    assert code == 201
    code, _, node = raw.patch("/api/v1/nodes/n1?fieldValidation=Strict", {"spec": {"unschedulable": True}})
    assert code == 200 and node["spec"]["unschedulable"] is True
    code, _, status = raw.patch("/api/v1/nodes/n1?fieldValidation=Strict", {"spec": {"unschedulabel": True}})
    assert code == 400
    assert status["message"].endswith('strict decoding error: unknown field "spec.unschedulabel"')

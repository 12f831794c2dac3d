"""CRD lifecycle through HTTP: validation, establishment, discovery, schema handling, cleanup."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcm.emulator.emulator import Emulator
from tests.emulator.raw import Raw, WatchReader

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "default": "fast"},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def widget_crd(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": SCHEMA},
                "subresources": {"status": {}},
            }
        ],
    }
    spec.update(overrides)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": spec,
    }


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 1, **spec},
    }


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def raw(emu: Emulator) -> Iterator[Raw]:
    conn = Raw(emu.url)
    yield conn
    conn.close()


def test_crd_create_is_established_before_answer(raw: Raw) -> None:
    code, _, crd = raw.post(CRDS, widget_crd())
    assert code == 201
    assert crd["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    assert crd["status"]["acceptedNames"]["listKind"] == "WidgetList"
    assert crd["status"]["storedVersions"] == ["v1"]
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["Established"]["status"] == "True"
    assert conditions["NamesAccepted"]["message"] == "no conflicts found"
    code, _, resources = raw.get("/apis/example.com/v1")
    assert code == 200
    assert {r["name"] for r in resources["resources"]} >= {"widgets", "widgets/status"}
    code, _, groups = raw.get("/apis")
    assert "example.com" in {g["name"] for g in groups["groups"]}


@pytest.mark.parametrize(
    ("crd", "field"),
    [
        ({**widget_crd(), "metadata": {"name": "gadgets.example.com"}}, "metadata.name"),
        (widget_crd(scope="Everywhere"), "spec.scope"),
        (widget_crd(versions=[]), "spec.versions"),
        (
            widget_crd(versions=[{"name": "v1", "served": True, "storage": True}]),
            "spec.versions[0].schema.openAPIV3Schema",
        ),
    ],
)
def test_invalid_crd_is_422(raw: Raw, crd: dict[str, Any], field: str) -> None:
    code, _, status = raw.post(CRDS, crd)
    assert code == 422
    assert status["reason"] == "Invalid"
    assert field in [c["field"] for c in status["details"]["causes"]]


def test_custom_object_schema_prune_default_validate(raw: Raw) -> None:
    raw.post(CRDS, widget_crd())
    code, headers, obj = raw.post(WIDGETS, widget("w", junk=True))
    assert code == 201
    assert obj["spec"] == {"size": 1, "mode": "fast"}
    assert obj["metadata"]["generation"] == 1
    assert 'unknown field \\"spec.junk\\"' in headers.get("warning", "") or "spec.junk" in headers.get(
        "warning", ""
    )
    code, _, status = raw.post(WIDGETS + "?fieldValidation=Strict", widget("s", junk=True))
    assert code == 400
    assert 'strict decoding error: unknown field "spec.junk"' in status["message"]
    code, _, status = raw.post(WIDGETS, widget("bad", size=0))
    assert code == 422
    assert status["message"].startswith('Widget.example.com "bad" is invalid: spec.size')
    bad = widget("missing")
    del bad["spec"]["size"]
    code, _, status = raw.post(WIDGETS, bad)
    assert code == 422
    assert status["details"]["causes"][0]["field"] == "spec.size"


def test_custom_object_status_dropped_on_create_and_smp_415(raw: Raw) -> None:
    raw.post(CRDS, widget_crd())
    code, _, obj = raw.post(WIDGETS, {**widget("w"), "status": {"phase": "Done"}})
    assert code == 201
    assert "status" not in obj
    code, _, _ = raw.patch(f"{WIDGETS}/w", {"spec": {"size": 2}}, kind="strategic")
    assert code == 415
    code, _, obj = raw.patch(f"{WIDGETS}/w", {"spec": {"size": 2}}, kind="merge")
    assert (code, obj["metadata"]["generation"]) == (200, 2)


def test_crd_delete_removes_custom_objects_and_withdraws_discovery(emu: Emulator, raw: Raw) -> None:
    raw.post(CRDS, widget_crd())
    raw.post(WIDGETS, widget("a"))
    held = widget("b")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    raw.post(WIDGETS, held)
    code, _, listing = raw.get(WIDGETS)
    watch = WatchReader(
        emu.url, f"{WIDGETS}?watch=true&resourceVersion={listing['metadata']['resourceVersion']}"
    )
    try:
        code, _, body = raw.delete(f"{CRDS}/widgets.example.com")
        assert code == 200
        assert body["metadata"]["deletionTimestamp"]
        events = [watch.next_event(), watch.next_event()]
    finally:
        watch.close()
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events) == [
        ("DELETED", "a"),
        ("DELETED", "b"),
    ]
    assert emu.wait_for(
        lambda: (
            emu.storage.store.get("customresourcedefinitions.apiextensions.k8s.io", "", "widgets.example.com")
            is None
        ),
        timeout=5,
    )
    assert raw.get(WIDGETS)[0] == 404
    assert raw.get("/apis/example.com/v1")[0] == 404
    code, _, groups = raw.get("/apis")
    assert "example.com" not in {g["name"] for g in groups["groups"]}


def test_crd_recreated_after_delete_starts_empty(raw: Raw) -> None:
    raw.post(CRDS, widget_crd())
    raw.post(WIDGETS, widget("a"))
    raw.delete(f"{CRDS}/widgets.example.com")
    code, _, _ = raw.post(CRDS, widget_crd())
    assert code == 201
    code, _, listing = raw.get(WIDGETS)
    assert (code, listing["items"]) == (200, [])


def test_crd_update_keeps_status_and_finalizer(raw: Raw) -> None:
    _, _, crd = raw.post(CRDS, widget_crd())
    crd["spec"]["names"]["shortNames"] = ["wd", "wdg"]
    code, _, updated = raw.put(f"{CRDS}/widgets.example.com", crd)
    assert code == 200
    assert updated["metadata"]["generation"] == 2
    assert updated["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    assert updated["status"]["conditions"] == crd["status"]["conditions"]

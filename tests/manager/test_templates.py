"""The machine-template-hash is upstream v0.47.0's, byte for byte.

``data/template_hash_vectors.json`` holds templates with the text and hash upstream computes for
them: a Go program that decodes each template into machine-controller-manager v0.47.0's
``v1alpha1.MachineTemplateSpec`` and prints ``spew.Sprintf("%#v", …)`` (the
``pkg/util/hash.DeepHashObject`` configuration) and ``pkg/controller.ComputeHash``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcm.manager import gotypes
from mcm.manager.templates import (
    compute_hash,
    equal_ignore_hash,
    fnv1a32,
    machine_set_name,
    safe_encode_string,
    template_hash_text,
)

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "template_hash_vectors.json").read_text()
)["vectors"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["note"] for v in VECTORS])
def test_spew_text_and_hash_match_upstream(vector: dict[str, Any]) -> None:
    assert template_hash_text(vector["template"]) == vector["spew"]
    assert compute_hash(vector["template"], vector["collisionCount"]) == vector["hash"]


def test_fnv1a32_known_values() -> None:
    assert fnv1a32(b"") == 0x811C9DC5
    assert fnv1a32(b"a") == 0xE40C292C
    assert fnv1a32(b"foobar") == 0xBF9CF968


def test_safe_encode_string_maps_digits_as_upstream() -> None:
    assert safe_encode_string("0123456789") == "456789bcdf"


def test_machine_set_name_takes_five_encoded_characters() -> None:
    assert machine_set_name("pool", "2804945822") == "pool-6d48f"


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("0", 0),
        ("1.5h", 5_400_000_000_000),
        ("-5m", -300_000_000_000),
        ("300ms", 300_000_000),
        ("2\u00b5s", 2_000),
        ("1h1m1s1ms1us1ns", 3_661_001_001_001),
        (".5m", 30_000_000_000),
    ],
)
def test_go_durations(text: str, nanoseconds: int) -> None:
    assert gotypes.parse_go_duration_ns(text) == nanoseconds


@pytest.mark.parametrize("text", ["", "1", "1x", "-", ".s", "1.h2"])
def test_bad_go_durations_are_refused(text: str) -> None:
    with pytest.raises(gotypes.Unreproducible):
        gotypes.parse_go_duration_ns(text)


def test_a_template_go_cannot_reproduce_still_hashes_deterministically() -> None:
    template = {"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"class": {"name": "c"}}}
    assert compute_hash(template, None) == compute_hash(dict(template), None)
    assert template_hash_text(template).startswith("{")


def _template(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"name": "pool"}},
        "spec": {"class": {"kind": "MachineClass", "name": "a"}, **spec},
    }


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (_template(), _template(), True),
        (
            _template(),
            {**_template(), "metadata": {"labels": {"name": "pool", "machine-template-hash": "1"}}},
            True,
        ),
        (_template(), {**_template(), "metadata": {"labels": {"name": "other"}}}, False),
        (_template(), _template(providerID=""), True),
        (_template(), _template(nodeTemplate={"metadata": {"labels": {"x": "y"}}}), True),
        (_template(), _template(drainTimeout="1h", maxEvictRetries=3), True),
        (
            _template(),
            {"metadata": _template()["metadata"], "spec": {"class": {"kind": "Other", "name": "a"}}},
            True,
        ),
        (
            _template(),
            {"metadata": _template()["metadata"], "spec": {"class": {"kind": "MachineClass", "name": "b"}}},
            False,
        ),
        (
            _template(),
            {**_template(), "metadata": {"labels": {"name": "pool"}, "annotations": {"a": "b"}}},
            False,
        ),
        (_template(), {**_template(), "metadata": {"labels": {"name": "pool"}, "annotations": {}}}, True),
        (_template(), {**_template(), "metadata": {"labels": {"name": "pool"}, "finalizers": ["f"]}}, False),
    ],
)
def test_equal_ignore_hash(left: dict[str, Any], right: dict[str, Any], equal: bool) -> None:
    assert equal_ignore_hash(left, right) is equal
    assert equal_ignore_hash(right, left) is equal

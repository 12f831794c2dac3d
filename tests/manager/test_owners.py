"""Label helpers of mcm.manager.owners."""

from __future__ import annotations

from mcm.manager.owners import has_labels, label_map, matches
from mcm.runtime import labels


def test_label_map_is_the_objects_own_map_when_every_value_is_a_string() -> None:
    own = {"pool": "a", "zone": "x"}
    obj = {"metadata": {"labels": own}}
    assert label_map(obj) is own


def test_label_map_leaves_out_values_that_are_not_strings_without_changing_the_object() -> None:
    obj = {"metadata": {"labels": {"pool": "a", "bad": 1}}}
    assert label_map(obj) == {"pool": "a"}
    assert obj["metadata"]["labels"] == {"pool": "a", "bad": 1}
    assert label_map({}) == {}
    assert label_map({"metadata": {"labels": None}}) == {}


def test_has_labels_wants_every_label_with_its_value() -> None:
    obj = {"metadata": {"labels": {"pool": "a", "zone": "x", "bad": 1}}}
    assert has_labels(obj, {"pool": "a"})
    assert has_labels(obj, {})
    assert not has_labels(obj, {"pool": "b"})
    assert not has_labels(obj, {"bad": "1"})


def test_matches_reads_the_label_map() -> None:
    selector = labels.selector_from_label_selector(
        {"matchExpressions": [{"key": "bad", "operator": "Exists"}]}
    )
    assert not matches(selector, {"metadata": {"labels": {"bad": 1}}})
    assert matches(selector, {"metadata": {"labels": {"bad": "1"}}})

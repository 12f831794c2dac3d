"""Label helpers of mcm.manager.owners."""

from __future__ import annotations

from mcm.manager.owners import has_labels, label_map, matches
from mcm.runtime import labels


def test_label_map_is_the_objects_own_map_when_every_value_is_a_string() -> None:
    own = {"pool": "a", "zone": "x"}
    obj = {"metadata": {"labels": own}}
    assert label_map(obj) is own


def test_label_map_of_an_object_without_labels_is_empty() -> None:
    assert label_map({}) == {}
    assert label_map({"metadata": {"labels": None}}) == {}


def test_has_labels_wants_every_label_with_its_value() -> None:
    obj = {"metadata": {"labels": {"pool": "a", "zone": "x"}}}
    assert has_labels(obj, {"pool": "a"})
    assert has_labels(obj, {"pool": "a", "zone": "x"})
    assert has_labels(obj, {})
    assert not has_labels(obj, {"pool": "b"})
    assert not has_labels(obj, {"pool": "a", "other": "y"})


def test_matches_reads_the_label_map() -> None:
    selector = labels.selector_from_label_selector({"matchLabels": {"pool": "a"}})
    assert matches(selector, {"metadata": {"labels": {"pool": "a", "zone": "x"}}})
    assert not matches(selector, {"metadata": {"labels": {"pool": "b"}}})
    assert not matches(selector, {"metadata": {}})

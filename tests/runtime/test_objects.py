"""mcm.runtime.objects: a clone (of an API object or of an Event on its way to the sink) shares
nothing mutable with the original."""

from __future__ import annotations

import datetime
from typing import Any

from mcm.runtime.objects import clone


def test_a_clone_is_equal_and_shares_no_dict_or_list() -> None:
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    event: dict[str, Any] = {
        "metadata": {"name": "e", "annotations": {"a": "b"}},
        "involvedObject": {"kind": "Machine", "name": "m"},
        "series": [{"count": 1}, None, 1.5, True],
        "when": stamp,
        "tags": {"x": [1, 2]},
    }
    copied = clone(event)
    assert copied == event
    copied["metadata"]["annotations"]["a"] = "changed"
    copied["series"][0]["count"] = 2
    copied["tags"]["x"].append(3)
    copied["involvedObject"]["name"] = "other"
    assert event["metadata"]["annotations"] == {"a": "b"}
    assert event["series"][0] == {"count": 1}
    assert event["tags"] == {"x": [1, 2]}
    assert event["involvedObject"]["name"] == "m"
    assert copied["when"] == stamp

"""mcm.runtime.objects: a clone (of an API object or of an Event on its way to the sink) shares
nothing mutable with the original."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from mcm.runtime.objects import clone, format_go_time


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


# Printed by Go 1.26 (fmt "%+v" of metav1.Time fields decoded by encoding/json, TZ=UTC) for the
# same RFC 3339 inputs.
@pytest.mark.parametrize(
    ("rfc3339", "go"),
    [
        ("2024-01-01T10:00:00Z", "2024-01-01 10:00:00 +0000 UTC"),
        ("2024-06-30T23:59:59+02:00", "2024-06-30 21:59:59 +0000 UTC"),
        ("2024-01-01T10:00:00.500Z", "2024-01-01 10:00:00.5 +0000 UTC"),
        ("2024-12-31T22:30:00.000000001-05:00", "2025-01-01 03:30:00.000000001 +0000 UTC"),
        ("2024-03-10T01:02:03.120Z", "2024-03-10 01:02:03.12 +0000 UTC"),
        (None, "0001-01-01 00:00:00 +0000 UTC"),
        ("", "0001-01-01 00:00:00 +0000 UTC"),
        ("yesterday", "0001-01-01 00:00:00 +0000 UTC"),
        ("2024-02-30T10:00:00Z", "0001-01-01 00:00:00 +0000 UTC"),
    ],
)
def test_format_go_time_prints_what_go_prints(rfc3339: object, go: str) -> None:
    assert format_go_time(rfc3339) == go

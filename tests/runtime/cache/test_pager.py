"""The list pager (client-go tools/pager)."""

from __future__ import annotations

import pytest

from mcm.runtime.cache import ListPager
from mcm.runtime.client.errors import InternalError
from mcm.runtime.client.types import ListOptions

from .fake_server import FakeServer, gone, make_obj


def server_with(n: int) -> FakeServer:
    server = FakeServer()
    for i in range(n):
        server.create(make_obj(f"o{i:02d}"))
    return server


def test_pages_are_joined_and_rv_cleared_after_the_first_page() -> None:
    server = server_with(5)
    result, paginated = ListPager(server.list, page_size=2).list(
        ListOptions(resource_version="0", resource_version_match="NotOlderThan")
    )
    assert paginated
    assert [o["metadata"]["name"] for o in result["items"]] == [f"o{i:02d}" for i in range(5)]
    assert result["metadata"]["resourceVersion"] == "105"
    assert "continue" not in result["metadata"]
    calls = server.list_calls
    assert [(c.limit, c.continue_, c.resource_version, c.resource_version_match) for c in calls] == [
        (2, None, "0", "NotOlderThan"),
        (2, "2", None, None),
        (2, "4", None, None),
    ]


def test_single_page_is_returned_as_is_and_not_paginated() -> None:
    server = server_with(2)
    result, paginated = ListPager(server.list).list(ListOptions())
    assert not paginated
    assert len(result["items"]) == 2
    assert server.list_calls[0].limit == 500


def test_page_size_zero_means_unpaginated_and_explicit_limit_wins() -> None:
    server = server_with(3)
    ListPager(server.list, page_size=0).list(ListOptions(resource_version="7"))
    assert server.list_calls[-1].limit is None
    ListPager(server.list, page_size=2).list(ListOptions(limit=1))
    assert server.list_calls[-3].limit == 1


def test_expired_continue_falls_back_to_one_full_list_at_the_requested_rv() -> None:
    server = server_with(3)
    server.list_errors = [None, gone()]
    result, _ = ListPager(server.list, page_size=2).list(ListOptions(resource_version="0"))
    assert len(result["items"]) == 3
    last = server.list_calls[-1]
    assert (last.limit, last.continue_, last.resource_version) == (None, None, "0")


def test_expired_first_page_and_other_errors_are_raised() -> None:
    server = server_with(3)
    server.list_errors = [gone()]
    with pytest.raises(type(gone())):
        ListPager(server.list, page_size=2).list(ListOptions())
    server.list_errors = [None, InternalError({"message": "boom"})]
    with pytest.raises(InternalError):
        ListPager(server.list, page_size=2).list(ListOptions())

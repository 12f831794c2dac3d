"""Chunked lists (``tools/pager``): fetch a list page by page and return it as one list object.

Guarantees:

- A page size of 0 means one unpaginated request; a limit already set in the options wins.
- After the first page the ``continue`` token is sent and ``resourceVersion`` and
  ``resourceVersionMatch`` are cleared (the server rejects them together with ``continue``).
- If a page after the first fails with 410 Expired (and ``full_list_if_expired``), the list is
  requested once more without pagination at the originally requested resourceVersion.
- The result's ``metadata.resourceVersion`` is the first page's; items are concatenated in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcm.runtime.client.errors import is_resource_expired
from mcm.runtime.client.types import ListOptions, Object

__all__ = ["DEFAULT_PAGE_SIZE", "ListPageFunc", "ListPager"]

DEFAULT_PAGE_SIZE = 500

ListPageFunc = Callable[[ListOptions], Object]


class ListPager:
    """Lists through ``page_func`` in pages of ``page_size`` items."""

    def __init__(
        self,
        page_func: ListPageFunc,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        full_list_if_expired: bool = True,
    ) -> None:
        self.page_func = page_func
        self.page_size = page_size
        self.full_list_if_expired = full_list_if_expired

    def list(self, options: ListOptions) -> tuple[Object, bool]:
        """Return the whole list and whether it came in more than one page."""
        if not options.limit:
            options = options.with_changes(limit=self.page_size or None)
        requested = options
        items: list[Any] | None = None
        first_meta: dict[str, Any] = {}
        paginated = False
        while True:
            try:
                page = self.page_func(options)
            except Exception as exc:
                if not (is_resource_expired(exc) and self.full_list_if_expired and options.continue_):
                    raise
                return self.page_func(requested.with_changes(limit=None, continue_=None)), paginated
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token and items is None:
                return page, paginated
            if items is None:
                items = []
                first_meta = page
            items.extend(page.get("items") or ())
            if not token:
                return _joined(first_meta, items), paginated
            options = options.with_changes(
                continue_=token, resource_version=None, resource_version_match=None
            )
            paginated = True


def _joined(first_page: Object, items: list[Any]) -> Object:
    meta = dict(first_page.get("metadata") or {})
    meta.pop("continue", None)
    meta.pop("remainingItemCount", None)
    joined = {k: v for k, v in first_page.items() if k != "items"}
    joined["metadata"] = meta
    joined["items"] = items
    return joined

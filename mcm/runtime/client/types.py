"""The list/watch contract shared by the REST client and the informer machinery.

This is the port of ``metav1.ListOptions``, ``watch.Interface`` and ``cache.ListerWatcher``:
the cache layer codes against these types and the client layer implements them. Objects are
plain JSON dicts exactly as the API server sent them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

__all__ = [
    "EventType",
    "ListOptions",
    "ListerWatcher",
    "Object",
    "WatchEvent",
    "WatchStream",
]

Object = dict[str, Any]
"""A Kubernetes object as decoded JSON. Treat as immutable: copy before changing."""

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


@dataclass(frozen=True)
class ListOptions:
    """Query parameters of a list or watch request (``metav1.ListOptions``).

    ``None`` means "not sent". ``continue_`` maps to the ``continue`` parameter.
    """

    label_selector: str | None = None
    field_selector: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None
    limit: int | None = None
    continue_: str | None = None
    timeout_seconds: int | None = None
    allow_watch_bookmarks: bool | None = None

    def with_changes(self, **changes: Any) -> ListOptions:
        """A copy with the given fields replaced."""
        return replace(self, **changes)

    def to_query(self) -> dict[str, str]:
        """The options as URL query parameters, leaving out unset ones."""
        pairs = {
            "labelSelector": self.label_selector,
            "fieldSelector": self.field_selector,
            "resourceVersion": self.resource_version,
            "resourceVersionMatch": self.resource_version_match,
            "limit": None if self.limit is None else str(self.limit),
            "continue": self.continue_,
            "timeoutSeconds": None if self.timeout_seconds is None else str(self.timeout_seconds),
            "allowWatchBookmarks": None
            if self.allow_watch_bookmarks is None
            else str(self.allow_watch_bookmarks).lower(),
        }
        return {k: v for k, v in pairs.items() if v is not None and v != ""}


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream. For ``ERROR`` the object is a ``Status`` dict."""

    type: EventType
    object: Object


class WatchStream(Protocol):
    """An open watch: iterate for events until the server closes it or ``stop()`` is called.

    Iteration ends normally when the server ends the stream (timeout). A broken connection
    raises an exception from ``mcm.runtime.client.errors``; an ``ERROR`` event is yielded as
    such (the reflector turns it into an API error). ``stop()`` may be called from any thread
    and makes the iteration end promptly.
    """

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def stop(self) -> None: ...


class ListerWatcher(Protocol):
    """What a reflector needs: a list call and a watch call for one resource (and namespace)."""

    def list(self, options: ListOptions) -> Object:
        """Return the list object: ``{"metadata": {"resourceVersion", "continue"}, "items": [...]}``."""
        ...

    def watch(self, options: ListOptions) -> WatchStream:
        """Open a watch with the given options."""
        ...

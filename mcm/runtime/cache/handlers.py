"""Resource event handlers: what an informer calls for each add, update and delete.

``on_delete`` receives either the deleted object or a
:class:`~mcm.runtime.cache.keys.DeletedFinalStateUnknown` tombstone (a delete seen only through
a relist, whose ``obj`` may be stale or ``None``); every delete handler must accept both.
An update whose old and new objects have the same ``resourceVersion`` is a resync, not a change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "FilteringResourceEventHandler",
    "ResourceEventHandler",
    "ResourceEventHandlerDetailedFuncs",
    "ResourceEventHandlerFuncs",
]


class ResourceEventHandler(Protocol):
    """The callbacks of one informer handler; each runs on that handler's own thread."""

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: Any, new: Any) -> None: ...

    def on_delete(self, obj: Any) -> None: ...


@dataclass(frozen=True)
class ResourceEventHandlerFuncs:
    """A handler from plain functions; a missing function means "ignore that event"."""

    on_add_func: Callable[[Any], None] | None = None
    on_update_func: Callable[[Any, Any], None] | None = None
    on_delete_func: Callable[[Any], None] | None = None

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.on_add_func is not None:
            self.on_add_func(obj)

    def on_update(self, old: Any, new: Any) -> None:
        if self.on_update_func is not None:
            self.on_update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.on_delete_func is not None:
            self.on_delete_func(obj)


@dataclass(frozen=True)
class ResourceEventHandlerDetailedFuncs:
    """Like :class:`ResourceEventHandlerFuncs`, but the add function also gets ``is_in_initial_list``."""

    on_add_func: Callable[[Any, bool], None] | None = None
    on_update_func: Callable[[Any, Any], None] | None = None
    on_delete_func: Callable[[Any], None] | None = None

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.on_add_func is not None:
            self.on_add_func(obj, is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        if self.on_update_func is not None:
            self.on_update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.on_delete_func is not None:
            self.on_delete_func(obj)


@dataclass(frozen=True)
class FilteringResourceEventHandler:
    """Passes on only objects accepted by ``filter_func``.

    An update becomes an add when only the new object passes, a delete when only the old one
    does, and nothing when neither does.
    """

    filter_func: Callable[[Any], bool]
    handler: ResourceEventHandler

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.filter_func(obj):
            self.handler.on_add(obj, is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        old_passes, new_passes = self.filter_func(old), self.filter_func(new)
        if old_passes and new_passes:
            self.handler.on_update(old, new)
        elif new_passes:
            self.handler.on_add(new, False)
        elif old_passes:
            self.handler.on_delete(old)

    def on_delete(self, obj: Any) -> None:
        if self.filter_func(obj):
            self.handler.on_delete(obj)

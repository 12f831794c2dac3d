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


class ResourceEventHandlerFuncs:
    """A handler from plain functions; a missing function means "ignore that event".

    ``on_add(obj)``, ``on_update(old, new)`` and ``on_delete(obj_or_tombstone)``.
    """

    def __init__(
        self,
        on_add: Callable[[Any], None] | None = None,
        on_update: Callable[[Any, Any], None] | None = None,
        on_delete: Callable[[Any], None] | None = None,
    ) -> None:
        self.add_func = on_add
        self.update_func = on_update
        self.delete_func = on_delete

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        if self.add_func is not None:
            self.add_func(obj)

    def on_update(self, old: Any, new: Any) -> None:
        if self.update_func is not None:
            self.update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.delete_func is not None:
            self.delete_func(obj)


class ResourceEventHandlerDetailedFuncs(ResourceEventHandlerFuncs):
    """Like :class:`ResourceEventHandlerFuncs`, but ``on_add(obj, is_in_initial_list)``."""

    def __init__(
        self,
        on_add: Callable[[Any, bool], None] | None = None,
        on_update: Callable[[Any, Any], None] | None = None,
        on_delete: Callable[[Any], None] | None = None,
    ) -> None:
        super().__init__(None, on_update, on_delete)
        self.detailed_add_func = on_add

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        if self.detailed_add_func is not None:
            self.detailed_add_func(obj, is_in_initial_list)


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

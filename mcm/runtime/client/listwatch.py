"""The ListerWatcher an informer uses: one resource, one namespace (or all), tweaked options.

The port of client-go's ``cache.ListWatch`` as built by generated informers: the optional
``tweak_list_options`` is applied to the options of both the list and the watch call, and the
namespace is left out for cluster-scoped resources.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mcm.runtime.client.rest import RESTClient
from mcm.runtime.client.types import ListOptions, Object
from mcm.runtime.client.watch import HTTPWatchStream

__all__ = ["ListWatch", "TweakListOptions", "list_watch"]

TweakListOptions = Callable[[ListOptions], ListOptions]
"""Returns the options to send instead of the given ones (``ListOptions`` is immutable)."""


class ListWatch:
    """List and watch one resource through a :class:`RESTClient`."""

    def __init__(
        self,
        client: RESTClient,
        namespace: str | None = None,
        tweak_list_options: TweakListOptions | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace or None
        self._tweak = tweak_list_options

    def with_cancel(self, cancel: threading.Event) -> ListWatch:
        """The same list and watch whose throttle and Retry-After waits end once ``cancel`` is set
        (the reflector passes its stop event)."""
        return ListWatch(self.client.with_cancel(cancel), self.namespace, self._tweak)

    def _options(self, options: ListOptions) -> ListOptions:
        return self._tweak(options) if self._tweak is not None else options

    def list(self, options: ListOptions) -> Object:
        return self.client.list(self._options(options), namespace=self.namespace)

    def watch(self, options: ListOptions) -> HTTPWatchStream:
        return self.client.watch(self._options(options), namespace=self.namespace)


def list_watch(
    rest_client: RESTClient,
    namespace: str | None = None,
    tweak_list_options: TweakListOptions | None = None,
) -> ListWatch:
    """A ListerWatcher for ``rest_client``'s resource in ``namespace`` (None or "" = all)."""
    return ListWatch(rest_client, namespace, tweak_list_options)

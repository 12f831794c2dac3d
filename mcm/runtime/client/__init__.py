"""Kubernetes REST client layer: config, typed errors, list/watch contract, per-resource clients.

Where to start:

- :func:`load_config` (a kubeconfig path, or ``"inClusterConfig"``) returns a
  :class:`ClusterClient`: one :class:`Connection` (one connection pool) and one
  client-side token bucket (QPS/burst; the machine-controller's 20/30 unless given) per cluster.
- ``client.resource(PODS)`` gives the :class:`RESTClient` of a resource from
  :mod:`~mcm.runtime.client.resources`: get, list, watch, create, update, update_status,
  patch, delete, delete_collection and evict, on plain JSON dicts.
- Failures raise the typed errors of :mod:`~mcm.runtime.client.errors` (``NotFound``,
  ``Conflict``, ``Gone``, ``TooManyRequests`` with ``retry_after``…) or ``ConnectionFailed``
  when no HTTP answer came (``RequestCancelled`` when the request was cancelled first).
- No wait is unbounded: every request has a deadline (``timeout``), ``Retry-After`` is capped
  and retried at most 10 times, ``RESTClient.with_cancel(event)`` / ``ClusterClient.close()``
  end throttle and Retry-After waits, and a watch line is at most 16 MiB.
- :func:`list_watch` adapts a REST client to the informers' :class:`ListerWatcher`;
  ``client.discovery()`` reads what the server serves.
"""

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.config import IN_CLUSTER_CONFIG, ConfigError, load_config
from mcm.runtime.client.connection import Connection
from mcm.runtime.client.discovery import DiscoveryClient
from mcm.runtime.client.listwatch import ListWatch, list_watch
from mcm.runtime.client.resources import Resource
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.client.types import ListerWatcher, ListOptions, Object, WatchEvent, WatchStream
from mcm.runtime.client.watch import HTTPWatchStream, error_from_watch_event

__all__ = [
    "IN_CLUSTER_CONFIG",
    "ClusterClient",
    "ConfigError",
    "Connection",
    "DiscoveryClient",
    "HTTPWatchStream",
    "ListOptions",
    "ListWatch",
    "ListerWatcher",
    "Object",
    "RESTClient",
    "Resource",
    "WatchEvent",
    "WatchStream",
    "error_from_watch_event",
    "list_watch",
    "load_config",
]

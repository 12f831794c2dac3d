"""Kubernetes REST client layer: config, typed errors, list/watch contract, per-resource clients.

Start with :func:`load_config` (a kubeconfig path or ``"inClusterConfig"``), which returns a
:class:`ClusterClient`; ``client.resource(PODS)`` gives a :class:`RESTClient` with get, list,
watch, create, update, update_status, patch, delete and evict on plain JSON dicts.
:func:`list_watch` adapts a REST client to the informers' :class:`ListerWatcher`.
"""

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.config import IN_CLUSTER_CONFIG, ConfigError, load_config
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

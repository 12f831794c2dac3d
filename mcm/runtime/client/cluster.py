"""A client for one cluster: one :class:`~mcm.runtime.client.connection.Connection` (one
connection pool), one rate limiter.

:meth:`ClusterClient.resource` hands out a :class:`RESTClient` per resource, all sharing the
cluster's transport, so the QPS/burst budget is per cluster client as in client-go (where each
client built from a rest config has its own token bucket). :meth:`ClusterClient.with_user_agent`
gives a sibling client with its own user agent and its own bucket over the same pool, like
building a second clientset from the same config.

Without explicit limits a client gets the machine-controller's ``--kube-api-qps`` /
``--kube-api-burst`` defaults, 20 / 30 (:data:`~mcm.runtime.tokenbucket.MACHINE_CONTROLLER_QPS`,
``_BURST``). A ``qps`` or ``burst`` of 0 means client-go ``rest``'s 5 / 10 and a negative ``qps``
no throttling (:func:`~mcm.runtime.client.ratelimit.new_rate_limiter`). Every default rate is
defined once, in :mod:`mcm.runtime.tokenbucket`.
"""

from __future__ import annotations

import threading
from typing import Any

from mcm.runtime.client.connection import Connection
from mcm.runtime.client.discovery import DiscoveryClient
from mcm.runtime.client.ratelimit import RateLimiter, new_rate_limiter
from mcm.runtime.client.resources import Resource
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.client.transport import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, Transport, default_user_agent
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.tokenbucket import MACHINE_CONTROLLER_BURST, MACHINE_CONTROLLER_QPS

__all__ = ["ClusterClient"]


class ClusterClient:
    """Everything needed to talk to one cluster."""

    def __init__(
        self,
        connection: Connection | Any,
        *,
        qps: float = MACHINE_CONTROLLER_QPS,
        burst: int = MACHINE_CONTROLLER_BURST,
        namespace: str | None = None,
        user_agent: str | None = None,
        clock: Clock = REAL_CLOCK,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = DEFAULT_TIMEOUT,
        rate_limiter: RateLimiter | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        if not isinstance(connection, Connection):
            connection = Connection.from_api_client(connection)  # a kubernetes ApiClient
        self.connection = connection
        self.qps = qps
        self.burst = burst
        self.namespace = namespace
        """The default namespace of the kubeconfig context (or the pod's, in-cluster), if any."""
        self.clock = clock
        self.rate_limiter = rate_limiter or new_rate_limiter(qps, burst, clock=clock)
        self.transport = Transport(
            connection,
            rate_limiter=self.rate_limiter,
            user_agent=user_agent or default_user_agent(),
            clock=clock,
            max_retries=max_retries,
            timeout=timeout,
            stop=stop,
        )
        self._clients: dict[Resource, RESTClient] = {}
        self._lock = threading.Lock()

    @property
    def host(self) -> str:
        """The server URL, e.g. ``http://127.0.0.1:41237``."""
        return self.transport.host

    @property
    def user_agent(self) -> str:
        return self.transport.user_agent

    def resource(self, resource: Resource) -> RESTClient:
        """The REST client for ``resource`` (one per resource, created on first use)."""
        with self._lock:
            client = self._clients.get(resource)
            if client is None:
                client = self._clients[resource] = RESTClient(self.transport, resource)
            return client

    def with_user_agent(self, suffix: str) -> ClusterClient:
        """A client over the same connection pool with user agent ``…/<suffix>`` and its own bucket."""
        return ClusterClient(
            self.connection,
            qps=self.qps,
            burst=self.burst,
            namespace=self.namespace,
            user_agent=default_user_agent(suffix),
            clock=self.clock,
            max_retries=self.transport.max_retries,
            timeout=self.transport.timeout,
            stop=self.transport.stop,
        )

    def discovery(self) -> DiscoveryClient:
        """Discovery reads (groups, resources, version) through this client's transport."""
        return DiscoveryClient(self.transport)

    def get_json(self, path: str, query: dict[str, str] | None = None) -> Any:
        """GET any path (``/version``, ``/apis``) and return the decoded JSON."""
        return self.transport.request("GET", path, query=query)

    def get_bytes(self, path: str, query: dict[str, str] | None = None) -> bytes:
        """GET any path (``/healthz``) and return the raw body."""
        return self.transport.request_bytes("GET", path, query=query)

    def close(self) -> None:
        """Cut pending Retry-After waits short and close the pooled connections (the connection
        is shared with siblings; close once)."""
        self.transport.stop.set()
        self.connection.close()

    def __repr__(self) -> str:
        return f"ClusterClient(host={self.host!r}, qps={self.qps}, burst={self.burst})"

"""A leader election lock stored in a ``coordination.k8s.io/v1`` Lease (``resourcelock.LeaseLock``).

Guarantees:

- :meth:`LeaseLock.update` PUTs the Lease last read or written, with its resourceVersion: a
  write by anyone else in between fails with ``Conflict`` (optimistic concurrency, never a
  blind write). Without a previous ``get``/``create`` it raises ``LockNotInitialized``.
- Times are written as MicroTime with exactly six fractional digits and ``Z``.
- One request is bounded by the client's timeout. Build the client as client-go's
  ``NewFromKubeconfig`` does, with ``timeout=lease_request_timeout(renew_deadline)``, so one hung
  request cannot use up the renew deadline.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Protocol

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.resources import LEASES
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.leaderelection.interface import LockNotInitialized
from mcm.runtime.leaderelection.record import (
    LeaderElectionRecord,
    lease_spec_to_record,
    raw_record,
    record_to_lease_spec,
)

__all__ = ["LeaseLock", "lease_request_timeout"]

_LEASE_API_VERSION = "coordination.k8s.io/v1"


class _Recorder(Protocol):
    def eventf(self, obj: dict[str, Any], event_type: str, reason: str, fmt: str, *args: object) -> None: ...


def lease_request_timeout(renew_deadline: float) -> float:
    """client-go's per-request timeout for lock requests: ``max(1 s, renew_deadline / 2)``."""
    return max(1.0, renew_deadline / 2)


class LeaseLock:
    """The Lease ``namespace/name`` as a lock for the candidate ``identity``.

    ``client`` is a :class:`ClusterClient` or the :class:`RESTClient` for Leases.
    ``event_recorder`` (optional) receives the ``LeaderElection`` events.
    """

    def __init__(
        self,
        client: ClusterClient | RESTClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        event_recorder: _Recorder | None = None,
    ) -> None:
        self._client = client.resource(LEASES) if isinstance(client, ClusterClient) else client
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._recorder = event_recorder
        self._mutex = threading.Lock()
        self._lease: dict[str, Any] | None = None

    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return f"{self._namespace}/{self._name}"

    def _remember(self, lease: dict[str, Any]) -> None:
        with self._mutex:
            self._lease = lease

    def get(self) -> tuple[LeaderElectionRecord, bytes]:
        """Read the Lease; ``NotFound`` if it does not exist."""
        lease = self._client.get(self._name, namespace=self._namespace)
        self._remember(lease)
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        return lease_spec_to_record(spec), raw_record(spec)

    def create(self, record: LeaderElectionRecord) -> None:
        """Create the Lease holding ``record``; ``AlreadyExists`` if someone was faster."""
        body = {
            "apiVersion": _LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": record_to_lease_spec(record),
        }
        self._remember(self._client.create(body, namespace=self._namespace))

    def update(self, record: LeaderElectionRecord) -> None:
        """Write ``record`` into the remembered Lease, guarded by its resourceVersion."""
        with self._mutex:
            cached = self._lease
        if cached is None:
            raise LockNotInitialized()
        body = copy.deepcopy(cached)
        body["spec"] = record_to_lease_spec(record)
        self._remember(self._client.update(body, namespace=self._namespace))

    def record_event(self, message: str) -> None:
        """A Normal ``LeaderElection`` event ``"<identity> <message>"`` about the Lease."""
        with self._mutex:
            lease = self._lease
        if self._recorder is None or lease is None:
            return
        metadata = lease.get("metadata")
        subject = {
            "apiVersion": _LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": dict(metadata) if isinstance(metadata, dict) else {},
        }
        self._recorder.eventf(subject, "Normal", "LeaderElection", "%s %s", self._identity, message)

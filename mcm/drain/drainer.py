""":class:`NodeDrainer`: the drain behind the machine controller's ``Drainer`` seam.

``mcm.controller`` and ``mcm.drain`` do not import each other; the app builds a
:class:`NodeDrainer` and hands it to the controller, whose ``Drainer`` protocol it satisfies
structurally: ``cordon(node_name)`` and ``drain(request)``, raising :class:`DrainError` (its
``str()`` is the aggregated drain error for ``lastOperation``) when the drain did not succeed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from mcm.drain.drain import drain_node
from mcm.drain.metrics import DrainMetrics
from mcm.drain.node import cordon_node
from mcm.drain.types import DEFAULT_MAX_PARALLEL_EVICTIONS, DrainListers, DrainOptions, DrainResult
from mcm.drain.volumes import VolumeAttachmentHub
from mcm.driver import Driver
from mcm.runtime.client import ClusterClient
from mcm.runtime.clock import Clock
from mcm.runtime.errors import TransientError
from mcm.runtime.record import EventRecorder

__all__ = ["DrainError", "DrainRequestLike", "NodeDrainer"]


class DrainRequestLike(Protocol):
    """What :meth:`NodeDrainer.drain` reads from the controller's ``DrainRequest``."""

    @property
    def node_name(self) -> str: ...
    @property
    def timeout(self) -> float: ...
    @property
    def max_evict_retries(self) -> int: ...
    @property
    def force(self) -> bool: ...
    @property
    def pv_detach_timeout(self) -> float: ...
    @property
    def pv_reattach_timeout(self) -> float: ...
    @property
    def machine(self) -> Mapping[str, Any]: ...


class DrainError(TransientError):
    """The drain did not succeed; ``result`` has the details."""

    def __init__(self, result: DrainResult) -> None:
        super().__init__(result.error or "drain failed")
        self.result = result


class NodeDrainer:
    """Cordons and drains nodes of one target cluster (thread-safe; one per controller)."""

    def __init__(
        self,
        client: ClusterClient,
        listers: DrainListers,
        driver: Driver,
        *,
        clock: Clock,
        stop: threading.Event,
        hub: VolumeAttachmentHub | None = None,
        recorder: EventRecorder | None = None,
        metrics: DrainMetrics | None = None,
        max_parallel_evictions: int = DEFAULT_MAX_PARALLEL_EVICTIONS,
    ) -> None:
        self.client = client
        self.listers = listers
        self.driver = driver
        self.clock = clock
        self.stop = stop
        self.hub = hub
        self.recorder = recorder
        self.metrics = metrics
        self.max_parallel_evictions = max_parallel_evictions

    def cordon(self, node_name: str) -> None:
        cordon_node(self.client, node_name)

    def drain(self, request: DrainRequestLike) -> DrainResult:
        """Drain ``request.node_name``; return the result, or raise :class:`DrainError`."""
        options = DrainOptions(
            timeout=request.timeout,
            max_evict_retries=request.max_evict_retries,
            pv_detach_timeout=request.pv_detach_timeout,
            pv_reattach_timeout=request.pv_reattach_timeout,
            force=request.force,
            max_parallel_evictions=self.max_parallel_evictions,
        )
        result = drain_node(
            self.client,
            self.listers,
            self.driver,
            request.node_name,
            options,
            clock=self.clock,
            stop=self.stop,
            hub=self.hub,
            recorder=self.recorder,
            machine_ref=request.machine or None,
            metrics=self.metrics,
        )
        if not result.ok:
            raise DrainError(result)
        return result

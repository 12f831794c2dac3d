""":class:`Drainer`: the drain of one target cluster, as the machine controller's deletion step uses it.

The controller builds one :class:`Drainer` over its target-cluster informers; its deletion step
builds the :class:`~mcm.drain.DrainOptions` of each drain from the Machine and the flags and
calls :meth:`Drainer.cordon` and :meth:`Drainer.drain` (upstream v0.47.0's ``drainNode`` in
``pkg/util/provider/machinecontroller/machine_util.go`` builds its drain options and calls
``RunDrain`` the same way). :meth:`Drainer.drain` never raises for API errors: a failed drain
is a :class:`~mcm.drain.DrainResult` whose ``error`` is the text for ``lastOperation``.
"""

from __future__ import annotations

import threading

from mcm.drain.drain import run_drain
from mcm.drain.metrics import DrainMetrics
from mcm.drain.node import cordon_node
from mcm.drain.types import DrainListers, DrainOptions, DrainResult
from mcm.drain.volumes import VolumeAttachmentHub
from mcm.driver import Driver
from mcm.runtime.client import ClusterClient
from mcm.runtime.clock import Clock
from mcm.runtime.objects import Obj
from mcm.runtime.record import EventRecorder

__all__ = ["Drainer"]


class Drainer:
    """Cordons and drains nodes of one target cluster (thread-safe; one per controller).

    ``stop`` interrupts running drains (set at shutdown; the deletion flow retries them),
    ``hub`` must be on the VolumeAttachment informer, ``metrics`` counts the pods drained.
    """

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
    ) -> None:
        self.client = client
        self.listers = listers
        self.driver = driver
        self.clock = clock
        self.stop = stop
        self.hub = hub
        self.recorder = recorder
        self.metrics = metrics

    def cordon(self, node_name: str) -> None:
        """Mark the node unschedulable (a missing or cordoned node is fine); API errors raise."""
        cordon_node(self.client, node_name, clock=self.clock)

    def drain(self, node_name: str, options: DrainOptions, *, machine_ref: Obj | None = None) -> DrainResult:
        """Drain ``node_name``; Events go to ``machine_ref`` (the Machine) when given."""
        return run_drain(
            self.client,
            self.listers,
            self.driver,
            node_name,
            options,
            clock=self.clock,
            stop=self.stop,
            hub=self.hub,
            recorder=self.recorder,
            machine_ref=machine_ref,
            metrics=self.metrics,
        )

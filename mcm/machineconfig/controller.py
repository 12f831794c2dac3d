"""MachineConfigController: its four sub-controllers over one set of informers.

``MachineConfigController(client, options)`` builds the shared informers (MachineConfigs,
MachinePools, ControllerConfigs, KubeletConfigs, Nodes), one event broadcaster and the
Template-, Render-, Update- and KubeletConfigController, each with its own named queue.
:meth:`MachineConfigController.run` is the sample-controller's ``Run``: start the informers, wait
for the caches, start the workers, block until ``stop``, then shut the queues down and join the
workers. :meth:`has_synced` is what ``/readyz`` reports.
"""

from __future__ import annotations

import threading

import structlog

from mcm.machineconfig import api
from mcm.machineconfig.context import Context, Options
from mcm.machineconfig.kubeletconfig import KubeletConfigController
from mcm.machineconfig.metrics import PoolMetrics
from mcm.machineconfig.render import RenderController
from mcm.machineconfig.template import TemplateController
from mcm.machineconfig.update import UpdateController
from mcm.runtime.cache import SharedInformerFactory, wait_for_cache_sync
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.resources import NODES
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.record import EventBroadcaster
from mcm.runtime.worker import join_workers
from mcm.runtime.workqueue.metrics import MetricsProvider

__all__ = ["MachineConfigController"]

log = structlog.get_logger(__name__)


class MachineConfigController:
    """See the module docstring."""

    def __init__(
        self,
        client: ClusterClient,
        options: Options | None = None,
        *,
        clock: Clock = REAL_CLOCK,
        metrics: PoolMetrics | None = None,
        queue_metrics: MetricsProvider | None = None,
        broadcaster: EventBroadcaster | None = None,
    ) -> None:
        options = options or Options()
        self.owns_broadcaster = broadcaster is None
        if broadcaster is None:
            broadcaster = EventBroadcaster(clock=clock)
            broadcaster.start_recording_to_sink(client)
            broadcaster.start_structured_logging()
        self.ctx = Context(
            client=client,
            informers=SharedInformerFactory(client, resync=options.resync, clock=clock),
            broadcaster=broadcaster,
            options=options,
            clock=clock,
            metrics=metrics,
            queue_metrics=queue_metrics,
        )
        self.template = TemplateController(self.ctx)
        self.render = RenderController(self.ctx)
        self.update = UpdateController(self.ctx)
        self.kubelet = KubeletConfigController(self.ctx)
        self.controllers = (self.template, self.render, self.update, self.kubelet)
        self._synced = self.ctx.synced(*api.RESOURCES, NODES)

    def has_synced(self) -> bool:
        """Every informer cache has synced."""
        return all(synced() for synced in self._synced)

    def run(self, workers: int, stop: threading.Event) -> None:
        """Start informers and workers; block until ``stop``; then stop and join the workers."""
        groups: list[list[threading.Thread]] = []
        self.ctx.informers.start(stop)
        try:
            log.info("waiting_for_caches")
            if not wait_for_cache_sync(stop, *self._synced):
                return
            for controller in self.controllers:
                groups.append(controller.start(workers, stop))
            log.info("machine_config_controller_started", workers=workers)
            stop.wait()
        finally:
            for controller in self.controllers:
                controller.queue.shut_down()
            for threads in groups:  # each grows and shrinks as its workers start and end
                join_workers(threads)
            self.ctx.informers.shutdown()
            if self.owns_broadcaster:
                self.ctx.broadcaster.shutdown()
            log.info("machine_config_controller_stopped")

"""The real drain (``mcm.drain``) behind the controller's ``Drainer`` seam.

``mcm.drain`` and ``mcm.controller`` are siblings that may not import each other, so the
application joins them: :func:`drain_factory` is passed as ``Controller(drainer_factory=...)``,
receives the controller's drain wiring (target client, listers over its target informers, driver,
clock, stop event, recorder, and a hook for VolumeAttachment events) and returns a
:class:`mcm.drain.NodeDrainer`. A failed drain raises :class:`mcm.drain.DrainError`, whose text
the deletion flow writes into ``lastOperation``.

The drain's pod counters (``mcm_machine_drain_{evicted,deleted}_pods_total``) are registered once
per process on the default registry; ``mcm_machine_drain_duration_seconds`` is the controller's.
"""

from __future__ import annotations

import threading

import prometheus_client

from mcm.controller.drainer import Drainer, DrainWiring
from mcm.drain import DrainListers, DrainMetrics, NodeDrainer, PodDeletions, VolumeAttachmentHub

__all__ = ["drain_factory", "drain_metrics"]

_METRICS_LOCK = threading.Lock()
_METRICS: list[DrainMetrics] = []


def drain_metrics() -> DrainMetrics:
    """The process's drain counters on the default registry, built once."""
    with _METRICS_LOCK:
        if not _METRICS:
            _METRICS.append(DrainMetrics(prometheus_client.REGISTRY, with_duration=False))
        return _METRICS[0]


def drain_factory(wiring: DrainWiring) -> Drainer:
    """``Controller(drainer_factory=drain_factory)``: one :class:`NodeDrainer` per controller."""
    hub = VolumeAttachmentHub()
    wiring.add_volume_attachment_handler(hub)
    pod_deletions = None
    if wiring.add_pod_handler is not None:
        pod_deletions = PodDeletions()
        wiring.add_pod_handler(pod_deletions)
    listers = DrainListers(
        pods=wiring.pods,
        pdbs=wiring.pdbs,
        pvs=wiring.pvs,
        pvcs=wiring.pvcs,
        volume_attachments=wiring.volume_attachments,
        pods_synced=wiring.pods_synced,
        pod_deletions=pod_deletions,
    )
    return NodeDrainer(
        wiring.target,
        listers,
        wiring.driver,
        clock=wiring.clock,
        stop=wiring.stop,
        hub=hub,
        recorder=wiring.recorder,
        metrics=drain_metrics(),
    )

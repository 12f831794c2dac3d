"""The seam between the deletion flow and the node drain (``mcm.drain``).

The deletion steps call a :class:`Drainer`. The application passes a :data:`DrainerFactory`
that builds the real one on ``mcm.drain`` from a :class:`DrainWiring`; unit tests pass a stub.
A drainer raises :class:`DrainFailed` (or any exception)
when the node could not be cordoned or drained; the message goes into the Machine's
``lastOperation.description``, so it must never contain secret data.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcm.driver import Driver
from mcm.runtime.cache import Lister, ResourceEventHandler
from mcm.runtime.client import ClusterClient
from mcm.runtime.clock import Clock
from mcm.runtime.errors import TransientError
from mcm.runtime.record import EventRecorder

__all__ = ["DrainFailed", "DrainRequest", "DrainWiring", "Drainer", "DrainerFactory"]


class DrainFailed(TransientError):
    """The drain did not finish; ``str()`` is the reason shown to users."""


@dataclass(frozen=True)
class DrainRequest:
    """One drain of ``node_name`` for ``machine`` (timeouts in seconds)."""

    node_name: str
    timeout: float
    max_evict_retries: int
    force: bool
    pv_detach_timeout: float
    pv_reattach_timeout: float
    machine: Mapping[str, Any] = field(default_factory=dict, repr=False)


class Drainer(Protocol):
    """Cordon and drain nodes of the target cluster."""

    def cordon(self, node_name: str) -> None:
        """Mark the node unschedulable; a missing or already cordoned node is fine."""
        ...

    def drain(self, request: DrainRequest) -> object:
        """Evict or delete the node's pods within ``request.timeout``; raise on failure.

        What it returns (e.g. ``mcm.drain.DrainResult``) is not used by the deletion flow.
        """
        ...


@dataclass(frozen=True)
class DrainWiring:
    """What the controller hands a drainer factory (``Controller(drainer_factory=...)``).

    ``mcm.drain`` and ``mcm.controller`` are independent siblings (docs/architecture.md), so the
    application builds the real drainer from this: the target client, listers over the
    controller's target informers, the driver, the clock, a stop event set at shutdown (it
    interrupts running drains, which the deletion flow retries), the event recorder,
    ``add_volume_attachment_handler`` to put a handler (e.g. ``mcm.drain.VolumeAttachmentHub``)
    on the VolumeAttachment informer, and ``add_pod_handler`` one (``mcm.drain.PodDeletions``)
    on the pod informer.
    """

    target: ClusterClient
    pods: Lister
    pdbs: Lister
    pvs: Lister
    pvcs: Lister
    volume_attachments: Lister
    pods_synced: Callable[[], bool]
    driver: Driver
    clock: Clock
    stop: threading.Event
    recorder: EventRecorder | None
    add_volume_attachment_handler: Callable[[ResourceEventHandler], None]
    add_pod_handler: Callable[[ResourceEventHandler], None] | None = None


DrainerFactory = Callable[[DrainWiring], Drainer]
"""Builds the drainer once the controller's informers exist."""

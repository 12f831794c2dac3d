"""The seam between the deletion flow and the node drain (``mcm.drain``).

The deletion steps call a :class:`Drainer`; the controller wires the real one (built on
``mcm.drain``), unit tests pass a stub. A drainer raises :class:`DrainFailed` (or any exception)
when the node could not be cordoned or drained; the message goes into the Machine's
``lastOperation.description``, so it must never contain secret data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["DrainFailed", "DrainRequest", "Drainer"]


class DrainFailed(Exception):
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

    def drain(self, request: DrainRequest) -> None:
        """Evict or delete the node's pods within ``request.timeout``; raise on failure."""
        ...

"""A sidecar driver's cloud API metrics, carried back to the controller in a trailer.

The server gives the driver a :class:`~mcm.driver.context.CallContext` whose ``cloud_api`` is a
:class:`Samples`: each ``ctx.cloud_api_request(...)`` is kept as one sample. When the call ends,
successfully or not, the samples go back in the trailer ``mcm-cloud-api-samples``: a JSON array
of ``[service, seconds, failed]`` (ASCII). The client replays them into its own call context, so
they land in the controller's ``mcm_cloud_api_*`` metrics with the MachineClass's ``provider``
label, as an in-process driver's would.

Guarantees: at most :data:`MAX_SAMPLES` samples per call travel (the rest are dropped with a log
line); the client ignores a malformed trailer, and any sample whose service is not a short
string (at most :data:`MAX_SERVICE` characters) or whose seconds are not a finite number >= 0.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable
from typing import Any

import structlog

from mcm.driver.context import CloudApiMetrics

__all__ = ["MAX_SAMPLES", "MAX_SERVICE", "SAMPLES_KEY", "Samples", "replay"]

log = structlog.get_logger(__name__)

SAMPLES_KEY = "mcm-cloud-api-samples"
"""Trailer with the cloud API requests the sidecar's driver made during the call."""
MAX_SAMPLES = 256
"""Samples carried per call (far above what one driver call makes)."""
MAX_SERVICE = 64
"""Longest ``service`` label accepted from a sidecar."""


class Samples:
    """Collects the samples of one call on the server (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: list[tuple[str, float, bool]] = []
        self.dropped = 0

    def observe(self, service: str, seconds: float, failed: bool) -> None:
        with self._lock:
            if len(self._samples) >= MAX_SAMPLES:
                self.dropped += 1
                return
            self._samples.append((str(service)[:MAX_SERVICE], max(0.0, float(seconds)), bool(failed)))

    def trailers(self) -> tuple[tuple[str, str], ...]:
        """The trailer to send (none when the driver made no request)."""
        with self._lock:
            samples, dropped = list(self._samples), self.dropped
        if dropped:
            log.warning("cloud_api_samples_dropped", kept=len(samples), dropped=dropped)
        if not samples:
            return ()
        return ((SAMPLES_KEY, json.dumps([[s, round(t, 6), f] for s, t, f in samples])),)


def replay(metadata: Iterable[Any] | None, cloud_api: CloudApiMetrics) -> None:
    """Feed the samples of a call's trailing ``metadata`` into ``cloud_api``."""
    for key, value in metadata or ():
        if key != SAMPLES_KEY:
            continue
        try:
            samples = json.loads(value)
        except (TypeError, ValueError):
            log.debug("cloud_api_samples_malformed")
            continue
        for sample in samples[:MAX_SAMPLES] if isinstance(samples, list) else ():
            if _well_formed(sample):
                cloud_api.observe(sample[0], float(sample[1]), sample[2])


def _well_formed(sample: Any) -> bool:
    if not isinstance(sample, list) or len(sample) != 3:
        return False
    service, seconds, failed = sample
    return (
        isinstance(service, str)
        and 0 < len(service) <= MAX_SERVICE
        and isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and math.isfinite(seconds)
        and seconds >= 0
        and isinstance(failed, bool)
    )

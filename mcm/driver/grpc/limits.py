"""How much the driver link carries at once: the message cap of both ends and the sidecar's
budget of request bytes in flight.

Guarantees:

- No message larger than :data:`MAX_MESSAGE_BYTES` is sent or accepted by either end: gRPC
  refuses it with ``RESOURCE_EXHAUSTED`` before the driver sees it. The sidecar also turns off
  HTTP/2 window probing (:data:`SERVER_WINDOW_OPTIONS`), so data a client sends beyond what the
  server reads is not buffered on its behalf: refused requests cost the sidecar no memory.
- :class:`ByteBudget` admits a request only while the bytes of the requests being handled stay
  within its limit; a request that would exceed it is refused at once (the sidecar answers
  ``ResourceExhausted``, which the controller retries), so large requests cannot pile up in
  memory however many arrive together. A limit below one message is refused, so any message
  that fits the cap fits an idle sidecar.
"""

from __future__ import annotations

import threading

__all__ = ["DEFAULT_INFLIGHT_BYTES", "MAX_MESSAGE_BYTES", "SERVER_WINDOW_OPTIONS", "ByteBudget", "MiB"]

MiB = 1024 * 1024

MAX_MESSAGE_BYTES = 4 * MiB
"""4 MiB, gRPC's own default receive limit, on both ends and both directions. A request carries
one Machine, its MachineClass and the class's Secret data: Kubernetes caps a Secret at 1 MiB,
so the two Secrets a class may name (``secretRef`` and ``credentialsSecretRef``) are at most
2 MiB, and the Machine and class of a real installation are a few KiB. An answer is smaller
still; a ``ListMachines`` answer of 4 MiB names about 40,000 VMs. (It was 64 MiB: twelve
requests of 60 MiB held 2.6 GiB in the sidecar, against the chart's 256 Mi limit.)"""

DEFAULT_INFLIGHT_BYTES = 16 * MiB
"""Request bytes the sidecar handles at once by default: four maximal requests. Handling a
request holds it about three and a half times over (the received bytes, the parsed message, the
decoded request), so four maximal ones hold about 55 MiB; ordinary requests of a few KiB never
meet this limit, only the worker count. Measured on the Python sidecar with the defaults
(16 workers, 8 queued): 100 maximal requests at once peaked at about 210 MiB of memory, one
at a time 45 MiB; before the caps, twelve requests of 60 MiB peaked at 2.6 GiB. Most of a
flood's peak is glibc's per-thread malloc arenas: 40 maximal requests at once peaked at
200 to 230 MiB on a quiet machine and at 275 MiB on a loaded one (over the chart's 256 Mi), and at
160 to 190 MiB with two arenas, which is why the chart runs the sidecar with ``MALLOC_ARENA_MAX=2``."""


SERVER_WINDOW_OPTIONS: tuple[tuple[str, int], ...] = (("grpc.http2.bdp_probe", 0),)
"""gRPC's bandwidth-delay probing grows a connection's flow-control window to whatever the peer
sends, so a sidecar flooded with large requests buffered them all before refusing most (60 of
4 MiB peaked at 330 MiB); without it the window stays at its initial size."""


class ByteBudget:
    """Request bytes in flight, up to ``limit`` (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        if limit < MAX_MESSAGE_BYTES:
            raise ValueError(
                f"the in-flight byte budget must hold one message ({MAX_MESSAGE_BYTES}), got {limit}"
            )
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    def try_take(self, size: int) -> bool:
        """Admit ``size`` bytes if they fit now; give them back with :meth:`release`."""
        with self._lock:
            if self._used + size > self.limit:
                return False
            self._used += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._used -= size

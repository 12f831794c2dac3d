"""A tiny elector process for the two-process test.

Usage: ``python elector_script.py KUBECONFIG IDENTITY``. Prints ``READY``, then ``STARTED <id>
<wall time>`` when it starts leading and ``LOST <id> <wall time>`` when its leading stop event is
set; SIGTERM stops it. Durations: lease 3 s, renew deadline 2 s, retry 0.2 s (a leader on a loaded
machine still renews in time).
"""

from __future__ import annotations

import signal
import sys
import threading
import time

from mcm.runtime import logs
from mcm.runtime.client.config import load_config
from mcm.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaseLock,
    lease_request_timeout,
    run_or_die,
)

LEASE, RENEW, RETRY = 3.0, 2.0, 0.2


_out = threading.Lock()


def say(*words: object) -> None:
    """One whole line per call, even from several threads."""
    with _out:
        sys.stdout.write(" ".join(map(str, words)) + "\n")
        sys.stdout.flush()


def main(kubeconfig: str, identity: str) -> None:
    logs.configure("console", stream=sys.stderr, level=0)
    client = load_config(kubeconfig, qps=-1, timeout=lease_request_timeout(RENEW))

    led = threading.Event()
    lead_done = threading.Event()

    def lead(stop: threading.Event) -> None:
        led.set()
        say("STARTED", identity, f"{time.time():.6f}")
        stop.wait()
        say("LOST", identity, f"{time.time():.6f}")
        lead_done.set()

    config = LeaderElectionConfig(
        lock=LeaseLock(client, "default", "two-processes", identity),
        callbacks=LeaderCallbacks(lead, lambda: say("STOPPED", identity)),
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        name="two-processes",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    say("READY", identity)
    run_or_die(config, stop)
    if led.is_set():
        lead_done.wait(5.0)  # let the leading thread report before the process ends


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""mcm's manager as a process, with Events recorded to the control cluster as upstream's
manager records them (components ``machine-controller-manager`` and ``machineset-controller``),
for as long as this tree has no ``machine-controller-manager`` command
(``env.mcm_manager_command`` prefers the command).

    python -m tests.interop.mcm_manager CONTROL_KUBECONFIG TARGET_KUBECONFIG NAMESPACE

Runs until killed; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import signal
import sys
import threading

from mcm.manager import Manager, ManagerOptions
from mcm.runtime.client import load_config
from mcm.runtime.record import EventBroadcaster

AGENT = "machine-controller-manager"


def main(argv: list[str]) -> int:
    control_path, target_path, namespace = argv
    # upstream's user agent suffix, by which benchmarks/manager.py tells the manager's requests
    # from the machine controller's
    control = load_config(control_path, qps=-1, burst=0, user_agent_suffix=AGENT)
    target = load_config(target_path, qps=-1, burst=0, user_agent_suffix=AGENT)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    broadcaster = EventBroadcaster()
    broadcaster.start_recording_to_sink(control)
    Manager(
        control,
        target,
        ManagerOptions(namespace=namespace),
        recorder=broadcaster.new_recorder("machine-controller-manager"),
        machine_set_recorder=broadcaster.new_recorder("machineset-controller"),
    ).run(10, stop)
    broadcaster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

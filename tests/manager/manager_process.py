"""Run the manager as a process of its own, for tests that kill it (SIGKILL) mid-roll-out.

    python -m tests.manager.manager_process CONTROL_KUBECONFIG TARGET_KUBECONFIG NAMESPACE

Runs until killed; SIGTERM stops it cleanly. Not the ``machine-controller-manager`` command:
no flags, no leader election, no HTTP endpoints.
"""

from __future__ import annotations

import signal
import sys
import threading

from mcm.manager import Manager, ManagerOptions
from mcm.runtime.client import load_config


def main(argv: list[str]) -> int:
    control_path, target_path, namespace = argv
    control = load_config(control_path, qps=-1, burst=0)
    target = load_config(target_path, qps=-1, burst=0)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    options = ManagerOptions(namespace=namespace, machine_safety_overshooting_period=1.0)
    Manager(control, target, options).run(4, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``machine-config-daemon``'s run sequence: client, the daemon of ``--node-name``, SIGTERM.

:func:`build_daemon` wires the daemon's drain (:func:`mcm.drain.run_drain`, evictions only, one
deadline of ``--drain-timeout``, no wait for volumes to detach: as MCO's daemon drains, with the
``kubectl drain`` library) — the tests build the daemon the same way.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import structlog

from mcm.app.clients import load_client
from mcm.app.logs import LogOutput, start_logging_to
from mcm.app.mcd.options import DRAIN_TIMEOUT, McdOptions
from mcm.app.process import StartupError, run_command_process
from mcm.drain import EVICTION_RETRY_INTERVAL, DrainListers, DrainOptions, DrainResult, run_drain
from mcm.driver import (
    CallContext,
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    Driver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    GetVolumeIDsResponse,
    ListMachinesRequest,
    ListMachinesResponse,
    MachineError,
)
from mcm.machineconfig.daemon import Commands, DaemonOptions, MachineConfigDaemon
from mcm.machineconfig.daemon.agent import COMPONENT
from mcm.runtime.client import ClusterClient
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["NoVolumes", "build_daemon", "main_with_options", "run", "start"]

log = structlog.get_logger(COMPONENT)


class NoVolumes(Driver):
    """The drain's volume lookup for a node daemon: it recognises no volume, so the drain does not
    wait for volumes to detach (``kubectl drain`` does not either). It manages no machines."""

    def _none(self) -> MachineError:
        return MachineError(Code.Unimplemented, "machine-config-daemon manages no machines")

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        raise self._none()

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        raise self._none()

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        raise self._none()

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        raise self._none()

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        return GetVolumeIDsResponse()


def drain_options(timeout: float) -> DrainOptions:
    """Evictions only, retried until the deadline (never a delete that bypasses a
    PodDisruptionBudget); DaemonSet pods stay, as ``kubectl drain --ignore-daemonsets``."""
    return DrainOptions(timeout=timeout, max_evict_retries=math.ceil(timeout / EVICTION_RETRY_INTERVAL) + 1)


def build_daemon(
    client: ClusterClient,
    node: str,
    *,
    root: str = "/",
    commands: Commands | None = None,
    drain_timeout: float = DRAIN_TIMEOUT,
    clock: Clock = REAL_CLOCK,
) -> MachineConfigDaemon:
    """The daemon of ``node`` with its drain wired (not started)."""
    volumes, options = NoVolumes(), drain_options(drain_timeout)

    def drain(listers: DrainListers, stop: threading.Event) -> DrainResult:
        return run_drain(client, listers, volumes, node, options, clock=clock, stop=stop)

    settings = DaemonOptions(node=node, root=root, commands=commands or Commands())
    return MachineConfigDaemon(client, settings, drain, clock=clock)


def start(options: McdOptions, stop: threading.Event) -> int:
    """Check ``--root``, build the client and run the daemon until ``stop``; raises
    :class:`StartupError` before the daemon starts."""
    if not os.path.isdir(options.root):
        raise StartupError(f"--root {options.root} is not a directory")
    client = load_client(options.kubeconfig, options, COMPONENT)
    commands = Commands(systemctl=options.systemctl, reboot=options.reboot_command)
    daemon = build_daemon(
        client, options.node, root=options.root, commands=commands, drain_timeout=options.drain_timeout
    )
    log.info("machine_config_daemon_starting", node=options.node, root=options.root)
    try:
        daemon.start()
        stop.wait()
    finally:
        daemon.stop()
        client.close()
        log.info("machine_config_daemon_stopped", node=options.node)
    return 0


def run(options: McdOptions, *, stop: threading.Event | None = None, really_crash: bool = True) -> int:
    """Run until SIGTERM/SIGINT (or ``stop``); start-up failures print ``error: …`` and return 1.
    ``REALLY_CRASH`` is on (a bug ends the process) unless ``really_crash`` is false."""
    return run_command_process(lambda event: start(options, event), stop, really_crash=really_crash)


def main_with_options(options: McdOptions, **kwargs: Any) -> int:
    """What the console script runs after parsing: logging (to stderr), then :func:`run`."""
    if not start_logging_to(LogOutput(), options, log):
        return 1
    return run(options, **kwargs)

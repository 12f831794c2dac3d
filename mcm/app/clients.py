"""The cluster clients of a command's process, and its Event recorder.

The kubeconfigs resolve as upstream's commands resolve them (v0.47.0
``cmd/machine-controller-manager/app/controllermanager.go`` ``Run``, and the machine controller's
``app.Run``): an empty ``--target-kubeconfig`` is the in-cluster config, ``none`` no target
cluster; an empty ``--control-kubeconfig`` is the target's config, ``inClusterConfig`` the
in-cluster config. Each client takes ``--kube-api-qps``/``--kube-api-burst`` and upstream's
user-agent suffix (the command's name; ``machine-leader-election`` for the Lease). A kubeconfig
that is missing or not valid YAML is a :class:`~mcm.app.process.StartupError` naming the cluster.
:func:`load_client` builds one client from one kubeconfig, for a command of one cluster
(``machine-config-controller``, ``machine-config-daemon``: ``--kubeconfig``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

import structlog
import yaml

from mcm.app.common import IN_CLUSTER_CONFIG
from mcm.app.process import StartupError
from mcm.runtime.client import ClusterClient, ConfigError, load_config
from mcm.runtime.record import EventBroadcaster, EventRecorder

__all__ = ["ClientFlags", "Clients", "RateFlags", "build_clients", "event_recorder", "load_client"]

log = structlog.get_logger(__name__)


class RateFlags(Protocol):
    """``--kube-api-qps`` and ``--kube-api-burst``."""

    @property
    def kube_api_qps(self) -> float: ...

    @property
    def kube_api_burst(self) -> int: ...


class ClientFlags(RateFlags, Protocol):
    """The flags the clients are built from."""

    @property
    def target_kubeconfig(self) -> str: ...

    @property
    def control_kubeconfig(self) -> str: ...

    @property
    def no_target(self) -> bool: ...


@dataclass
class Clients:
    """The cluster clients of one process."""

    control: ClusterClient
    leader_election: ClusterClient
    target: ClusterClient | None

    def close(self) -> None:
        for client in {id(c): c for c in (self.control, self.target) if c is not None}.values():
            with contextlib.suppress(Exception):
                client.close()


def load_client(kubeconfig: str, options: RateFlags, agent: str, what: str = "") -> ClusterClient:
    """The client of ``kubeconfig`` (empty: the in-cluster config) with ``--kube-api-qps``/``-burst``
    and the user-agent suffix ``agent``. A kubeconfig that cannot be used is a
    :class:`~mcm.app.process.StartupError` of one line, naming the ``what`` cluster if given."""
    prefix = f"{what} cluster: " if what else ""
    try:
        return load_config(
            kubeconfig or IN_CLUSTER_CONFIG,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            user_agent_suffix=agent,
        )
    except ConfigError as exc:
        raise StartupError(f"{prefix}{exc}") from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise StartupError(f"{prefix}kubeconfig {kubeconfig!r} is not valid YAML: {detail}") from None


def _load(kubeconfig: str, what: str, options: ClientFlags, suffix: str) -> ClusterClient:
    if not kubeconfig:
        log.warning("kubeconfig_not_set_using_in_cluster_config", flag=f"--{what}-kubeconfig")
    return load_client(kubeconfig, options, suffix, what)


def build_clients(options: ClientFlags, agent: str = "machine-controller") -> Clients:
    """Resolve the kubeconfigs and build the clients; ``agent`` is the user-agent suffix."""
    target = None if options.no_target else _load(options.target_kubeconfig, "target", options, agent)
    if options.control_kubeconfig:
        control = _load(options.control_kubeconfig, "control", options, agent)
    elif target is not None:
        control = target.with_user_agent(agent)
    else:
        raise StartupError("--control-kubeconfig is required with --target-kubeconfig=none")
    return Clients(control, control.with_user_agent("machine-leader-election"), target)


def event_recorder(
    control: ClusterClient, component: str = "machine-controller"
) -> tuple[EventBroadcaster, EventRecorder]:
    """Events go to the control cluster (the involved object's namespace), from ``component``,
    and to the log."""
    broadcaster = EventBroadcaster()
    broadcaster.start_recording_to_sink(control)
    broadcaster.start_structured_logging()
    return broadcaster, broadcaster.new_recorder(component)

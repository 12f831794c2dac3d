"""A simulated machine-config daemon for tests, benchmarks and the demo, and node helpers.

:class:`DaemonFleet` plays the daemon of every Node (or of those a label selector picks), through
one node informer and one work queue. For a node whose ``desiredConfig`` differs from its
``currentConfig`` it:

1. sets ``state=working``, cordons the node and drains it with :mod:`mcm.drain`;
2. "applies" the config for ``apply_seconds`` (on the injectable clock) — or, when a file path of
   the desired MachineConfig matches ``degrade_paths``, sets ``state=degraded`` with a ``reason``
   and stays there until ``desiredConfig`` changes;
3. optionally reboots: ``Ready=False`` for ``reboot_seconds``, then ``Ready=True``;
4. uncordons the node, then sets ``currentConfig=<desired>`` and ``state=done`` (the order of
   MCO's daemon).

Each step is an Event on the node (``Drain``, ``Reboot``, ``ConfigApplied``, Warning
``ConfigFailed``) unless ``events`` is off.

A ``desiredConfig`` that changes mid-way restarts the apply for the new config. Every write is a
patch of only the fields the daemon owns (annotations; the Ready condition keyed by type), so it
never drops what the controller or a kubelet wrote. API errors and failed drains are retried
with back-off.

:func:`node_manifest` and :func:`create_nodes` make Ready Nodes with labels;
:func:`controller_config` is a valid ControllerConfig for the templates.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.drain import DrainListers, DrainOptions, cordon_node, run_drain
from mcm.driver import FakeDriver
from mcm.machineconfig import api
from mcm.machineconfig.ignition import config_files
from mcm.runtime.cache import MutationCache, ResourceEventHandlerFuncs, SharedInformerFactory
from mcm.runtime.client import ClusterClient, Object
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import (
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
)
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import TransientError
from mcm.runtime.labels import Selector, everything
from mcm.runtime.record import EventBroadcaster, EventRecorder
from mcm.runtime.worker import DONE, Result, join_workers, start_workers
from mcm.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

__all__ = [
    "DaemonFleet",
    "DaemonOptions",
    "DrainFailed",
    "controller_config",
    "create_nodes",
    "node_manifest",
]

log = structlog.get_logger(__name__)

ROOT_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnNpbXVsYXRlZAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
"""Base64 of a placeholder PEM block (the simulated machines never use it)."""


class DrainFailed(TransientError):
    """The node could not be drained; the daemon tries again with back-off."""


@dataclass(frozen=True)
class DaemonOptions:
    """How the simulated daemons behave."""

    apply_seconds: float = 1.0
    """Time to apply a config (after the drain)."""
    reboot_seconds: float = 0.0
    """NotReady window after applying, as a reboot would make it (0: no reboot)."""
    degrade_paths: str | None = None
    """Regular expression: a desired config with a file path matching it degrades the node."""
    drain_timeout: float = 60.0
    workers: int = 8
    events: bool = True
    """Record the daemon's steps as Events on the node (``Drain``, ``Reboot``, ``ConfigApplied``,
    Warning ``ConfigFailed``), as OpenShift's daemon does."""


@dataclass
class _Progress:
    """What the daemon of one node is doing."""

    config: str
    step: str  # "applying" | "rebooting"
    due: float
    """Monotonic time at which the step ends."""


def node_manifest(name: str, labels: Mapping[str, str] | None = None, *, ready: bool = True) -> Object:
    """A Node as a kubelet registers it, ``Ready`` or not."""
    status = "True" if ready else "False"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        },
    }


def create_nodes(
    client: ClusterClient, names: Iterable[str], labels: Mapping[str, str] | None = None
) -> None:
    """Register Ready Nodes (status included, as the emulator and a kubelet allow)."""
    nodes = client.resource(NODES)
    for name in names:
        created = nodes.create(node_manifest(name, labels))
        if not created.get("status", {}).get("conditions"):
            nodes.update_status({**created, "status": node_manifest(name, labels)["status"]})


def controller_config(**spec: str) -> Object:
    """ControllerConfig ``machine-config-controller`` with every required template variable."""
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.CONTROLLER_CONFIGS.kind,
        "metadata": {"name": api.CONTROLLER_CONFIG_NAME},
        "spec": {
            "clusterDNSIP": "10.96.0.10",
            "rootCAData": ROOT_CA,
            "osImageURL": "registry.example/os@sha256:1",
            **spec,
        },
    }


def _ready_condition(ready: bool, clock: Clock) -> dict[str, Any]:
    stamp = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "kubelet is posting ready status" if ready else "node is rebooting",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }


class DaemonFleet:
    """Simulated daemons for the nodes ``selector`` picks (all nodes by default)."""

    def __init__(
        self,
        client: ClusterClient,
        options: DaemonOptions | None = None,
        *,
        selector: Selector | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.client = client
        self.options = options or DaemonOptions()
        self.selector = selector or everything()
        self.clock = clock
        self.stop_event = threading.Event()
        self.broadcaster: EventBroadcaster | None = None
        self.recorder: EventRecorder | None = None
        if self.options.events:
            self.broadcaster = EventBroadcaster(clock=clock)
            self.broadcaster.start_recording_to_sink(client)
            self.recorder = self.broadcaster.new_recorder("machine-config-daemon")
        self.factory = SharedInformerFactory(client, clock=clock)
        self.nodes = self.factory.lister(NODES)
        self.own_writes = MutationCache(self.nodes.indexer, 60.0, max_entries=100_000, clock=clock)
        self.listers = DrainListers(
            pods=self.factory.lister(PODS),
            pdbs=self.factory.lister(POD_DISRUPTION_BUDGETS),
            pvs=self.factory.lister(PERSISTENT_VOLUMES),
            pvcs=self.factory.lister(PERSISTENT_VOLUME_CLAIMS),
            pods_synced=self.factory.informer_for(PODS).has_synced,
        )
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(
            default_controller_rate_limiter(clock=clock), "machine-config-daemon", clock=clock
        )
        self.progress: dict[str, _Progress] = {}
        self.degraded: dict[str, str] = {}
        """node → the config it failed to apply (until ``desiredConfig`` changes)."""
        self.applied: list[tuple[str, str]] = []
        """``(node, config)`` in the order the daemons finished applying (for tests)."""
        self._configs: dict[str, Object] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.factory.informer_for(NODES).add_event_handler(
            ResourceEventHandlerFuncs(on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new))
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> DaemonFleet:
        self.factory.start(self.stop_event)
        self.factory.wait_for_cache_sync(self.stop_event)
        self._threads = start_workers(
            self.queue,
            "machine-config-daemon",
            self.options.workers,
            self._sync,
            15,
            self.stop_event,
            clock=self.clock,
        )
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.queue.shut_down()
        join_workers(self._threads, 10)
        self.factory.shutdown(10)
        if self.broadcaster is not None:
            self.broadcaster.shutdown()

    def __enter__(self) -> DaemonFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _enqueue(self, node: Any) -> None:
        if isinstance(node, dict) and self.selector.matches(api.labels_of(node)):
            self.queue.add(api.name_of(node))

    # -- one node --------------------------------------------------------------------------------
    def _sync(self, name: str) -> Result | None:
        node = self.own_writes.get_by_key(name)
        if node is None:
            with self._lock:
                self.progress.pop(name, None)
            return None
        return self._step(node)  # a failed API call raises a TransientError: retried with back-off

    def _step(self, node: Object) -> Result | None:
        name = api.name_of(node)
        annotations = api.annotations_of(node)
        desired = annotations.get(api.DESIRED_CONFIG_ANNOTATION) or ""
        current = annotations.get(api.CURRENT_CONFIG_ANNOTATION) or ""
        state = annotations.get(api.STATE_ANNOTATION) or ""
        with self._lock:
            progress = self.progress.get(name)
        if not desired or (desired == current and state == api.STATE_DONE and progress is None):
            return DONE
        if state == api.STATE_DEGRADED and progress is None and self.degraded.get(name) == desired:
            return DONE  # stays degraded until desiredConfig changes
        if progress is None or progress.config != desired:
            return self._begin(node, desired)
        remaining = progress.due - self.clock.monotonic()
        if remaining > 0:
            return Result.after(remaining)
        if progress.step == "applying":
            return self._finish_apply(node, desired)
        return self._finish_reboot(node, desired)

    def _begin(self, node: Object, desired: str) -> Result:
        name = api.name_of(node)
        working = self._annotate(name, {api.STATE_ANNOTATION: api.STATE_WORKING, api.REASON_ANNOTATION: None})
        cordon_node(self.client, name)
        result = run_drain(
            self.client,
            self.listers,
            FakeDriver(),
            name,
            DrainOptions(timeout=self.options.drain_timeout),
            clock=self.clock,
            stop=self.stop_event,
        )
        if not result.ok:
            raise DrainFailed(f"drain of node {name} failed: {result.error}")
        self._event(working, "Normal", "Drain", f"Drained node to apply {desired}")
        with self._lock:
            self.degraded.pop(name, None)
            self.progress[name] = _Progress(
                desired, "applying", self.clock.monotonic() + self.options.apply_seconds
            )
        return Result.after(self.options.apply_seconds)

    def _finish_apply(self, node: Object, desired: str) -> Result | None:
        name = api.name_of(node)
        reason = self._degrade_reason(desired)
        if reason is not None:
            failed = self._annotate(
                name, {api.STATE_ANNOTATION: api.STATE_DEGRADED, api.REASON_ANNOTATION: reason}
            )
            self._event(failed, "Warning", "ConfigFailed", f"Cannot apply {desired}: {reason}")
            with self._lock:
                self.progress.pop(name, None)
                self.degraded[name] = desired
            return DONE
        if self.options.reboot_seconds > 0:
            self._event(node, "Normal", "Reboot", f"Node will reboot into config {desired}")
            self._set_ready(name, False)
            with self._lock:
                due = self.clock.monotonic() + self.options.reboot_seconds
                self.progress[name] = _Progress(desired, "rebooting", due)
            return Result.after(self.options.reboot_seconds)
        return self._complete(name, desired)

    def _finish_reboot(self, node: Object, desired: str) -> Result | None:
        self._set_ready(api.name_of(node), True)
        return self._complete(api.name_of(node), desired)

    def _complete(self, name: str, desired: str) -> Result | None:
        """Uncordon, then ``done``: MCO's daemon does the same (``completeUpdate`` before
        ``SetDone``, ``pkg/daemon/daemon.go``), so a node reported done can take workloads."""
        current = self.own_writes.get_by_key(name)
        if current is not None and api.spec_of(current).get("unschedulable"):
            self.own_writes.mutation(
                self.client.resource(NODES).patch(name, {"spec": {"unschedulable": None}})
            )
        node = self._annotate(
            name, {api.CURRENT_CONFIG_ANNOTATION: desired, api.STATE_ANNOTATION: api.STATE_DONE}
        )
        self._event(node, "Normal", "ConfigApplied", f"Node runs config {desired}")
        with self._lock:
            self.progress.pop(name, None)
            self.applied.append((name, desired))
        return DONE

    # -- helpers ---------------------------------------------------------------------------------
    def _degrade_reason(self, config_name: str) -> str | None:
        if not self.options.degrade_paths:
            return None
        config = self._configs.get(config_name)
        if config is None:
            try:
                config = self.client.resource(api.MACHINE_CONFIGS).get(config_name)
            except NotFound:
                return f"MachineConfig {config_name} not found"
            self._configs[config_name] = config
        pattern = re.compile(self.options.degrade_paths)
        for entry in config_files(api.spec_of(config)):
            if pattern.search(str(entry.get("path") or "")):
                return f"cannot write {entry.get('path')}: simulated failure"
        return None

    def _event(self, node: Object, event_type: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event({**node, "kind": "Node", "apiVersion": "v1"}, event_type, reason, message)

    def _annotate(self, name: str, annotations: Mapping[str, str | None]) -> Object:
        patched = self.client.resource(NODES).patch(name, {"metadata": {"annotations": dict(annotations)}})
        self.own_writes.mutation(patched)
        return patched

    def _set_ready(self, name: str, ready: bool) -> None:
        body = {"status": {"conditions": [_ready_condition(ready, self.clock)]}}
        self.client.resource(NODES).patch(name, body, kind="strategic", subresource="status")


def main(argv: list[str] | None = None) -> int:
    """``python -m mcm.testing.machineconfig --kubeconfig K``: run the simulated daemons of every
    node until SIGTERM (the demo and the benchmark start it as a process)."""
    import argparse
    import logging
    import signal
    from pathlib import Path

    from mcm.runtime import logs
    from mcm.runtime.client import load_config

    parser = argparse.ArgumentParser(prog="python -m mcm.testing.machineconfig", description=main.__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--apply-seconds", type=float, default=1.0)
    parser.add_argument("--reboot-seconds", type=float, default=0.0)
    parser.add_argument("--degrade-paths", default=None)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--no-events", action="store_true", help="Record no Events on the nodes.")
    parser.add_argument("--ready-file", default=None, help="Written once the daemons run.")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    logs.configure("json", level=getattr(logging, args.log_level.upper(), logging.WARNING))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    client = load_config(args.kubeconfig, qps=-1, user_agent_suffix="machine-config-daemon")
    options = DaemonOptions(
        apply_seconds=args.apply_seconds,
        reboot_seconds=args.reboot_seconds,
        degrade_paths=args.degrade_paths,
        workers=args.workers,
        events=not args.no_events,
    )
    with DaemonFleet(client, options):
        if args.ready_file:
            Path(args.ready_file).write_text("ready\n", encoding="utf-8")
        stop.wait()
    client.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

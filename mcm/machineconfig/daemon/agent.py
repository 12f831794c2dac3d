"""The machine-config daemon of one node: applies the rendered config its Node's annotations name.

It watches only its own Node (field selector ``metadata.name``) and follows the daemon interface
of the MachineConfigController (``desiredConfig``, ``currentConfig``, ``state``, ``reason``), in
the order of machine-config-operator's daemon (``pkg/daemon``: ``update``, ``updateConfigAndState``,
``completeUpdate``, ``SetDone``):

1. ``desiredConfig`` differs from ``currentConfig``: read the rendered MachineConfig and validate
   it (:func:`~mcm.machineconfig.validation.validate_spec`) — a config it cannot validate, or one
   with Ignition sections this daemon cannot apply (directories, links, disks, filesystems, RAID,
   LUKS, users and groups), is never applied: ``state=degraded`` with the reason, the node is not
   touched, and nothing is retried until ``desiredConfig`` changes;
2. ``state=working``, cordon and drain the node (:mod:`mcm.drain`; a drain that fails is retried
   with back-off, the node stays ``working``, as MCO's daemon keeps trying);
3. write the files and units (:class:`~mcm.machineconfig.daemon.writer.ConfigWriter`, all or
   nothing), ``systemctl enable``/``disable`` the units that say so; with no reboot command,
   ``daemon-reload`` and restart the units whose definition changed; then record the config on
   disk (``/etc/machine-config-daemon/currentconfig`` under the root). A failure of any of these
   puts back what was written, records nothing and sets ``state=degraded`` with the reason; the
   node stays cordoned (it runs its previous config) and the whole step is tried again with
   back-off (10 s doubling to 5 min);
4. reboot with the configured command, if any: the update completes when the daemon starts
   again and finds the desired config on disk;
5. uncordon, then set ``currentConfig=<desired>``, ``state=done`` and clear ``reason``.

A daemon that starts and finds the desired config already on disk (after a reboot, or a crash
between steps 3 and 5) only completes step 5. ``osImageURL``, ``kernelArguments`` and
``kernelType`` are not applied (an OS image switch is the OS's business): they are named once in
a Normal Event ``NotApplied`` per config. Each step is an Event on the Node (``Drain``,
``ConfigApplied``, ``Reboot``, Warning ``ConfigFailed``). Every write is a patch of the fields the
daemon owns; API errors are retried with back-off, never a crash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from mcm.drain import DrainListers, DrainResult, PodDeletions, cordon_node
from mcm.machineconfig import api
from mcm.machineconfig.daemon.systemd import CommandFailed, Commands
from mcm.machineconfig.daemon.writer import ApplyError, ConfigWriter, Written, config_units
from mcm.machineconfig.validation import validate_spec
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
from mcm.runtime.client.types import ListOptions
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import TransientError
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventBroadcaster
from mcm.runtime.worker import DONE, Result, join_workers, start_workers
from mcm.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

__all__ = [
    "COMPONENT",
    "ON_DISK_CONFIG",
    "UNSUPPORTED_SECTIONS",
    "DaemonOptions",
    "DrainFailed",
    "MachineConfigDaemon",
    "NodeDrain",
]

log = structlog.get_logger(__name__)

COMPONENT = "machine-config-daemon"
ON_DISK_CONFIG = "/etc/machine-config-daemon/currentconfig"
"""Where the daemon records the config it last wrote (MCO's daemon uses the same path)."""
UNSUPPORTED_SECTIONS = (
    ("storage", "directories"),
    ("storage", "links"),
    ("storage", "disks"),
    ("storage", "filesystems"),
    ("storage", "raid"),
    ("storage", "luks"),
    ("passwd", "users"),
    ("passwd", "groups"),
)
RETRY_FIRST = 10.0
RETRY_MAX = 300.0

NodeDrain = Callable[[DrainListers, threading.Event], DrainResult]
"""Drains the daemon's node with the given listers until done or the event is set."""


class DrainFailed(TransientError):
    """The node could not be drained; tried again with back-off."""


@dataclass(frozen=True)
class DaemonOptions:
    """How the daemon applies configs."""

    node: str
    root: str = "/"
    commands: Commands = field(default_factory=Commands)


@dataclass
class _Failure:
    """The last failed apply of a config: when to try again."""

    config: str
    attempts: int
    retry_at: float


class MachineConfigDaemon:
    """See the module docstring. ``drain`` drains the node (the command wires :mod:`mcm.drain`)."""

    def __init__(
        self, client: ClusterClient, options: DaemonOptions, drain: NodeDrain, *, clock: Clock = REAL_CLOCK
    ) -> None:
        self.client, self.options, self.drain, self.clock = client, options, drain, clock
        self.writer = ConfigWriter(options.root)
        self.stop_event = threading.Event()
        self.broadcaster = EventBroadcaster(clock=clock)
        self.broadcaster.start_recording_to_sink(client)
        self.recorder = self.broadcaster.new_recorder(COMPONENT)
        self.factories = _factories(client, options.node, clock)
        self.nodes = self.factories[0].lister(NODES)
        self.own_writes = MutationCache(self.nodes.indexer, 60.0, clock=clock)
        self.listers = _drain_listers(self.factories)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(
            default_controller_rate_limiter(clock=clock), COMPONENT, clock=clock
        )
        self._failure: _Failure | None = None
        self._refused = ""
        """A desired config this daemon will not apply (invalid or unsupported)."""
        self._rebooting = ""
        """The config the reboot command was run for (nothing more until the daemon restarts)."""
        self._noted: set[str] = set()
        self._threads: list[threading.Thread] = []
        self.factories[0].informer_for(NODES).add_event_handler(
            ResourceEventHandlerFuncs(on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new))
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> MachineConfigDaemon:
        for factory in self.factories:
            factory.start(self.stop_event)
        for factory in self.factories:
            factory.wait_for_cache_sync(self.stop_event)
        self._threads = start_workers(
            self.queue, COMPONENT, 1, self._sync, 15, self.stop_event, clock=self.clock
        )
        self.queue.add(self.options.node)
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.queue.shut_down()
        join_workers(self._threads, 30)
        for factory in self.factories:
            factory.shutdown(10)
        self.broadcaster.shutdown()

    def __enter__(self) -> MachineConfigDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _enqueue(self, node: Any) -> None:
        if isinstance(node, dict) and api.name_of(node) == self.options.node:
            self.queue.add(self.options.node)

    # -- the pass --------------------------------------------------------------------------------
    def _sync(self, name: str) -> Result | None:
        node = self.own_writes.get_by_key(name)
        if node is None:
            return None
        notes = api.annotations_of(node)
        desired = notes.get(api.DESIRED_CONFIG_ANNOTATION) or ""
        current = notes.get(api.CURRENT_CONFIG_ANNOTATION) or ""
        state = notes.get(api.STATE_ANNOTATION) or ""
        if not desired or desired in (self._refused, self._rebooting):
            return DONE
        on_disk = self._on_disk()
        if on_disk.get("name") == desired:  # written (before a reboot, or a crash): report it
            if current != desired or state != api.STATE_DONE:
                self._complete(desired)
            return DONE
        failure = self._failure
        if failure is not None and failure.config == desired and failure.retry_at > self.clock.monotonic():
            return Result.after(failure.retry_at - self.clock.monotonic())
        return self._update(node, desired, on_disk)

    def _update(self, node: Object, desired: str, on_disk: Mapping[str, Any]) -> Result | None:
        try:
            config = self.client.resource(api.MACHINE_CONFIGS).get(desired)
        except NotFound:
            return self._failed(node, desired, f"MachineConfig {desired} not found")
        spec = api.spec_of(config)
        problems = validate_spec(spec) + _unsupported(spec)
        if problems:
            self._refuse(node, desired, f"cannot apply MachineConfig {desired}: {'; '.join(problems)}")
            return DONE
        if api.annotations_of(node).get(api.STATE_ANNOTATION) != api.STATE_DEGRADED:
            node = self._annotate({api.STATE_ANNOTATION: api.STATE_WORKING, api.REASON_ANNOTATION: None})
        self._drain(node, desired)
        try:
            written = self._apply(on_disk.get("spec"), spec)
            if not self.options.commands.reboot:
                self.options.commands.reload_and_restart(_restartable(spec, written))
            self._record(desired, spec)
        except (ApplyError, CommandFailed, OSError) as err:
            # nothing is recorded on disk: the retry writes and restarts again
            self.writer.roll_back()
            return self._failed(node, desired, str(err))
        self._note_not_applied(node, desired, spec)
        if self.options.commands.reboot:
            return self._reboot(node, desired)
        self._complete(desired)
        return DONE

    def _drain(self, node: Object, desired: str) -> None:
        cordon_node(self.client, self.options.node)
        result = self.drain(self.listers, self.stop_event)
        if not result.ok and not result.node_gone:
            raise DrainFailed(f"drain of node {self.options.node} failed: {result.error}")
        self._event(node, EVENT_TYPE_NORMAL, "Drain", f"Drained node to apply {desired}")

    def _apply(self, current: Any, spec: dict[str, Any]) -> Written:
        """Write the config and set the units' enablement (the caller rolls back on failure)."""
        written = self.writer.apply(current if isinstance(current, dict) else None, spec)
        units = config_units(spec)
        commands = self.options.commands
        commands.enable(sorted(n for n, u in units.items() if u.get("enabled") is True))
        commands.disable(sorted(n for n, u in units.items() if u.get("enabled") is False))
        gone = set(config_units(current if isinstance(current, dict) else {})) - set(units)
        commands.disable(sorted(gone))
        return written

    def _reboot(self, node: Object, desired: str) -> Result | None:
        self._event(node, EVENT_TYPE_NORMAL, "Reboot", f"Node will reboot into config {desired}")
        try:
            self.options.commands.run_reboot()
        except CommandFailed as err:
            return self._failed(node, desired, f"reboot failed: {err}")
        self._rebooting = desired
        log.info("waiting_for_reboot", node=self.options.node, config=desired)
        return DONE

    def _complete(self, desired: str) -> None:
        """Uncordon, then report ``done`` (MCO: ``completeUpdate`` before ``SetDone``). The
        uncordon is unconditional, as MCO's: the cordon of this pass went around the cache."""
        self.own_writes.mutation(
            self.client.resource(NODES).patch(self.options.node, {"spec": {"unschedulable": None}})
        )
        done = self._annotate(
            {
                api.CURRENT_CONFIG_ANNOTATION: desired,
                api.STATE_ANNOTATION: api.STATE_DONE,
                api.REASON_ANNOTATION: None,
            }
        )
        self._failure = None
        log.info("config_applied", node=self.options.node, config=desired)
        self._event(done, EVENT_TYPE_NORMAL, "ConfigApplied", f"Node runs config {desired}")

    # -- failures --------------------------------------------------------------------------------
    def _refuse(self, node: Object, desired: str, reason: str) -> None:
        """Degrade without touching the node; wait for another desired config."""
        self._degrade(node, desired, reason)
        self._refused = desired

    def _failed(self, node: Object, desired: str, reason: str) -> Result:
        """Degrade; try the config again later (10 s doubling to 5 min)."""
        self._degrade(node, desired, reason)
        attempts = self._failure.attempts + 1 if self._failure and self._failure.config == desired else 1
        delay = min(RETRY_MAX, RETRY_FIRST * 2 ** (attempts - 1))
        self._failure = _Failure(desired, attempts, self.clock.monotonic() + delay)
        return Result.after(delay)

    def _degrade(self, node: Object, desired: str, reason: str) -> None:
        log.warning("config_failed", node=self.options.node, config=desired, reason=reason)
        failed = self._annotate({api.STATE_ANNOTATION: api.STATE_DEGRADED, api.REASON_ANNOTATION: reason})
        self._event(failed, EVENT_TYPE_WARNING, "ConfigFailed", reason)

    # -- helpers ---------------------------------------------------------------------------------
    def _on_disk(self) -> dict[str, Any]:
        try:
            recorded = json.loads(self.writer.host_path(ON_DISK_CONFIG).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return recorded if isinstance(recorded, dict) else {}

    def _record(self, name: str, spec: dict[str, Any]) -> None:
        path = self.writer.host_path(ON_DISK_CONFIG)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps({"name": name, "spec": spec}, sort_keys=True), encoding="utf-8")
        temporary.replace(path)

    def _note_not_applied(self, node: Object, desired: str, spec: dict[str, Any]) -> None:
        fields = [f for f in ("osImageURL", "kernelArguments", "kernelType") if spec.get(f)]
        if fields and desired not in self._noted:
            self._noted.add(desired)
            message = (
                f"{', '.join(fields)} of {desired} are not applied by this daemon (files and units only)"
            )
            self._event(node, EVENT_TYPE_NORMAL, "NotApplied", message)

    def _annotate(self, annotations: Mapping[str, str | None]) -> Object:
        patched = self.client.resource(NODES).patch(
            self.options.node, {"metadata": {"annotations": dict(annotations)}}
        )
        self.own_writes.mutation(patched)
        return patched

    def _event(self, node: Object, event_type: str, reason: str, message: str) -> None:
        self.recorder.event({**node, "kind": "Node", "apiVersion": "v1"}, event_type, reason, message)


def _unsupported(spec: dict[str, Any]) -> list[str]:
    config = spec.get("config") or {}
    found = [f"{a}.{b}" for a, b in UNSUPPORTED_SECTIONS if ((config.get(a) or {}).get(b))]
    return [f"this daemon cannot apply {', '.join(found)} (files and systemd units only)"] if found else []


def _restartable(spec: dict[str, Any], written: Written) -> list[str]:
    """The changed units to restart: not masked, not disabled, still in the config."""
    units = config_units(spec)
    return sorted(
        name
        for name in written.units
        if name in units and units[name].get("mask") is not True and units[name].get("enabled") is not False
    )


def _factories(client: ClusterClient, node: str, clock: Clock) -> list[SharedInformerFactory]:
    """Informers of its own Node, the pods on it, and what the drain reads cluster-wide."""

    def only(field_selector: str) -> Callable[[ListOptions], ListOptions]:
        return lambda options: options.with_changes(field_selector=field_selector)

    return [
        SharedInformerFactory(client, tweak_list_options=only(f"metadata.name={node}"), clock=clock),
        SharedInformerFactory(client, tweak_list_options=only(f"spec.nodeName={node}"), clock=clock),
        SharedInformerFactory(client, clock=clock),
    ]


def _drain_listers(factories: list[SharedInformerFactory]) -> DrainListers:
    _, pods, cluster = factories
    deletions = PodDeletions()
    pods.informer_for(PODS).add_event_handler(deletions)
    return DrainListers(
        pods=pods.lister(PODS),
        pdbs=cluster.lister(POD_DISRUPTION_BUDGETS),
        pvs=cluster.lister(PERSISTENT_VOLUMES),
        pvcs=cluster.lister(PERSISTENT_VOLUME_CLAIMS),
        pods_synced=pods.informer_for(PODS).has_synced,
        pod_deletions=deletions,
    )

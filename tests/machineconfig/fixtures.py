"""A cluster for MachineConfigController tests: an API server (the emulator, or a real one from
``tests/realapi``), the controller in process, simulated daemons and a watch that checks the
``maxUnavailable`` bound on every node event."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from mcm import packaged
from mcm.app.mcd.runner import build_daemon
from mcm.machineconfig import api
from mcm.machineconfig.context import Options
from mcm.machineconfig.controller import MachineConfigController
from mcm.machineconfig.daemon import Commands, MachineConfigDaemon
from mcm.machineconfig.ignition import data_url
from mcm.runtime.client import ClusterClient, Object
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, NODES
from mcm.testing.machineconfig import DaemonFleet, DaemonOptions, controller_config, create_nodes

REPO = Path(__file__).resolve().parents[2]
CRDS = sorted(packaged.machineconfig_crds().glob("*.yaml"))
TIMEOUT = 30.0
"""Default bound of every wait (read at call time: the real-API tier raises it)."""


def eventually(check: Callable[[], Any], timeout: float | None = None, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy (and return it); fail after ``timeout``
    seconds (default :data:`TIMEOUT`)."""
    timeout = TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.02)


def wait_until_cached(server: Any, cache: Any, name: str, what: str = "") -> None:
    """Until ``cache`` (a lister: ``get`` answers None when absent) holds ``name`` at least at the
    resourceVersion ``server`` (a REST client) answers now."""
    version = int(server.get(name)["metadata"]["resourceVersion"])
    eventually(
        lambda: (c := cache.get(name)) is not None and int(c["metadata"]["resourceVersion"]) >= version,
        what=what or f"{name} in the cache",
    )


def role_label(role: str) -> dict[str, str]:
    return {f"node-role.kubernetes.io/{role}": ""}


def pool_manifest(name: str, max_unavailable: Any = None, **spec: Any) -> Object:
    body: dict[str, Any] = {
        "machineConfigSelector": {"matchLabels": {api.ROLE_LABEL: name}},
        "machineSelector": {"matchLabels": role_label(name)},
        **spec,
    }
    if max_unavailable is not None:
        body["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": api.API_VERSION,
        "kind": "MachinePool",
        "metadata": {"name": name, "labels": {"pool": name}},
        "spec": body,
    }


def machine_config(name: str, role: str, files: Mapping[str, str] | None = None, **spec: Any) -> Object:
    return {
        "apiVersion": api.API_VERSION,
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {api.ROLE_LABEL: role}},
        "spec": {
            "config": {
                "ignition": {"version": "3.2.0"},
                "storage": {
                    "files": [
                        {"path": path, "mode": 420, "contents": {"source": data_url(text)}}
                        for path, text in (files or {}).items()
                    ]
                },
            },
            **spec,
        },
    }


def _condition_status(node: Object, kind: str) -> str | None:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c.get("status") for c in conditions if c.get("type") == kind), None)


def unavailable(node: Object) -> bool:
    """The test's own judgement, independent of the controller's code: a node cannot take work
    when it is not Ready, cordoned, under disk pressure or without network (as MCO's
    ``LayeredNodeState.CheckNodeReady``), or while its daemon has a config to apply, is working
    or is degraded."""
    notes = api.annotations_of(node)
    desired = notes.get(api.DESIRED_CONFIG_ANNOTATION, "")
    current = notes.get(api.CURRENT_CONFIG_ANNOTATION, "")
    state = notes.get(api.STATE_ANNOTATION, "")
    return (
        _condition_status(node, "Ready") != "True"
        or _condition_status(node, "DiskPressure") not in (None, "False")
        or _condition_status(node, "NetworkUnavailable") not in (None, "False")
        or bool((node.get("spec") or {}).get("unschedulable"))
        or desired != current
        or state in (api.STATE_WORKING, api.STATE_DEGRADED)
    )


def _done(node: Object | None) -> bool:
    notes = api.annotations_of(node or {})
    return notes.get(api.STATE_ANNOTATION) == api.STATE_DONE and notes.get(
        api.CURRENT_CONFIG_ANNOTATION
    ) == notes.get(api.DESIRED_CONFIG_ANNOTATION, "")


def _became_done(before: Object | None, after: Object) -> bool:
    return before is not None and not _done(before) and _done(after)


class BoundMonitor:
    """Watches Nodes and records, after every event, how many of a pool's nodes are unavailable
    (judged by :func:`unavailable`, not by the controller's code)."""

    def __init__(self, client: ClusterClient, selector: Mapping[str, str], limit: int) -> None:
        self.client, self.selector, self.limit = client, dict(selector), limit
        self.nodes: dict[str, Object] = {}
        self.events = 0
        self.max_seen = 0
        self.violations: list[tuple[int, list[str]]] = []
        self.seen_not_ready: set[str] = set()
        self.done_while_cordoned: list[str] = []
        """Nodes whose daemon reported ``done`` while the node was still cordoned."""
        self.last_rv = 0
        self.lock = threading.Lock()
        listing = client.resource(NODES).list()
        for node in listing["items"]:
            self.nodes[node["metadata"]["name"]] = node
        self.stream = client.resource(NODES).watch(resource_version=listing["metadata"]["resourceVersion"])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for event in self.stream:
            node = event.object
            with self.lock:
                before = self.nodes.get(node["metadata"]["name"])
                if event.type == "DELETED":
                    self.nodes.pop(node["metadata"]["name"], None)
                else:
                    self.nodes[node["metadata"]["name"]] = node
                    if _became_done(before, node) and (node.get("spec") or {}).get("unschedulable"):
                        self.done_while_cordoned.append(api.name_of(node))
                self.events += 1
                self.last_rv = max(self.last_rv, int(node["metadata"].get("resourceVersion") or 0))
                self._check()

    def _check(self) -> None:
        mine = [
            n
            for n in self.nodes.values()
            if all(api.labels_of(n).get(k) == v for k, v in self.selector.items())
        ]
        down = sorted(api.name_of(n) for n in mine if unavailable(n))
        self.seen_not_ready.update(api.name_of(n) for n in mine if _condition_status(n, "Ready") != "True")
        self.max_seen = max(self.max_seen, len(down))
        if len(down) > self.limit:
            self.violations.append((self.events, down))

    def settle(self) -> BoundMonitor:
        """Wait until the watch has delivered every node change made so far."""
        latest = max(
            int(n["metadata"]["resourceVersion"]) for n in self.client.resource(NODES).list()["items"]
        )
        eventually(lambda: self.last_rv >= latest, what="the node watch to catch up")
        return self

    def close(self) -> None:
        self.stream.stop()
        self.thread.join(5)


class Cluster:
    """Controller (restartable), daemons and helpers over one API server."""

    def __init__(
        self, client: ClusterClient, daemon: DaemonOptions | None = None, options: Options | None = None
    ):
        self.client = client
        self.options = options or Options(render_delay=0.2, workers=2)
        self.daemon_options = daemon or DaemonOptions(apply_seconds=0.2)
        self.controller: MachineConfigController | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.fleet: DaemonFleet | None = None
        self.daemons: dict[str, MachineConfigDaemon] = {}
        """The real daemons by node (:meth:`start_machine_daemons`)."""
        self.monitors: list[BoundMonitor] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def start_controller(self) -> MachineConfigController:
        self.stop = threading.Event()
        self.controller = MachineConfigController(self.client, self.options)
        self.thread = threading.Thread(
            target=self.controller.run, args=(self.options.workers, self.stop), daemon=True
        )
        self.thread.start()
        eventually(self.controller.has_synced, what="controller caches")
        return self.controller

    def stop_controller(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(15)
            assert not self.thread.is_alive(), "controller did not stop"

    def start_daemons(self, options: DaemonOptions | None = None) -> DaemonFleet:
        self.fleet = DaemonFleet(self.client, options or self.daemon_options).start()
        return self.fleet

    def start_machine_daemons(self, roots: Path, nodes: Iterable[str], reboot: str = "") -> None:
        """A real ``machine-config-daemon`` per node, as its command builds it, writing under
        ``roots/<node>`` and running ``systemctl --root=roots/<node>`` (a fake on ``PATH``)."""
        for node in nodes:
            self.start_machine_daemon(roots / node, node, reboot)

    def start_machine_daemon(self, root: Path, node: str, reboot: str = "") -> MachineConfigDaemon:
        root.mkdir(parents=True, exist_ok=True)
        commands = Commands(systemctl=f"systemctl --root={root}", reboot=reboot)
        daemon = build_daemon(self.client, node, root=str(root), commands=commands, drain_timeout=60)
        self.daemons[node] = daemon.start()
        return daemon

    def stop_machine_daemon(self, node: str) -> None:
        self.daemons.pop(node).stop()

    def close(self) -> None:
        for monitor in self.monitors:
            monitor.close()
        if self.fleet is not None:
            self.fleet.stop()
        for node in list(self.daemons):
            self.stop_machine_daemon(node)
        self.stop_controller()

    # -- objects ---------------------------------------------------------------------------------
    def setup(
        self, pools: Iterable[tuple[str, Any]] = (("worker", 1),), nodes: Mapping[str, int] | None = None
    ) -> None:
        """ControllerConfig, pools ``(name, maxUnavailable)`` and ``nodes`` per pool."""
        self.client.resource(api.CONTROLLER_CONFIGS).create(controller_config())
        for name, limit in pools:
            self.client.resource(api.MACHINE_POOLS).create(pool_manifest(name, limit))
            self.client.resource(api.MACHINE_CONFIGS).create(
                machine_config(f"00-{name}-base", name, {f"/etc/{name}-release": "v0\n"})
            )
        for pool, count in (nodes or {}).items():
            create_nodes(self.client, [f"{pool}-{i}" for i in range(count)], role_label(pool))

    def monitor(self, pool: str, limit: int) -> BoundMonitor:
        monitor = BoundMonitor(self.client, role_label(pool), limit)
        self.monitors.append(monitor)
        return monitor

    def pool(self, name: str) -> Object:
        return self.client.resource(api.MACHINE_POOLS).get(name)

    def status(self, name: str) -> dict[str, Any]:
        return api.status_of(self.pool(name))

    def condition(self, pool: str, kind: str) -> dict[str, Any]:
        found = [c for c in self.status(pool).get("conditions") or [] if c["type"] == kind]
        return found[0] if found else {}

    def target(self, pool: str) -> str:
        return str(self.status(pool).get("currentMachineConfig") or "")

    def wait_for_target(self, pool: str, different_from: str = "") -> str:
        return str(
            eventually(
                lambda: (t := self.target(pool)) and t != different_from and t, what=f"a new target of {pool}"
            )
        )

    def wait_updated(self, pool: str, target: str, count: int, timeout: float | None = None) -> None:
        def done() -> bool:
            status = self.status(pool)
            return (
                status.get("currentMachineConfig") == target
                and status.get("machineCount") == count
                and status.get("updatingMachines") == count
                and self.condition(pool, api.POOL_UPDATED).get("status") == "True"
            )

        eventually(done, timeout, what=f"pool {pool} updated to {target}")

    def nodes(self, pool: str) -> list[Object]:
        selector = ",".join(f"{k}={v}" if v else k for k, v in role_label(pool).items())
        items: list[Object] = self.client.resource(NODES).list(label_selector=selector)["items"]
        return sorted(items, key=api.name_of)

    def annotations(self, node: str) -> dict[str, str]:
        return api.annotations_of(self.client.resource(NODES).get(node))

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (or ``uncordon``)."""
        self.client.resource(NODES).patch(node, {"spec": {"unschedulable": unschedulable or None}})

    def set_ready(self, node: str, ready: bool) -> None:
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "Test",
            "message": "test",
        }
        self.client.resource(NODES).patch(
            node, {"status": {"conditions": [condition]}}, kind="strategic", subresource="status"
        )

    def events(
        self, reason: str | None = None, kind: str | None = None, name: str | None = None
    ) -> list[Object]:
        items: list[Object] = self.client.resource(EVENTS).list(namespace="default")["items"]
        return [
            e
            for e in items
            if (reason is None or e.get("reason") == reason)
            and (kind is None or e["involvedObject"].get("kind") == kind)
            and (name is None or e["involvedObject"].get("name") == name)
        ]

    def get_config(self, name: str) -> Object | None:
        try:
            return self.client.resource(api.MACHINE_CONFIGS).get(name)
        except NotFound:
            return None


def exercise_every_call(cluster: Cluster) -> list[dict[str, Any]]:
    """Make the controller of a ``worker`` pool of 2 nodes make every kind of call it makes: the
    first rollout, a rendered config restored (twice: the repeated Event is a patch), a template
    edit overwritten, a KubeletConfig applied and removed, a user MachineConfig rolled out.
    Returns the owner references of the last rendered config."""
    client = cluster.client
    configs = client.resource(api.MACHINE_CONFIGS)
    first = cluster.wait_for_target("worker", different_from="")
    cluster.wait_updated("worker", first, 2)
    for _ in range(2):
        configs.patch(first, {"spec": {"osImageURL": "edited"}})
        eventually(lambda: configs.get(first)["spec"].get("osImageURL") != "edited", what="restored")
    configs.patch("00-worker", {"spec": {"osImageURL": "edited"}})
    eventually(lambda: configs.get("00-worker")["spec"]["osImageURL"] != "edited", what="template restored")
    kubelet = {
        "apiVersion": api.API_VERSION,
        "kind": "KubeletConfig",
        "metadata": {"name": "pods"},
        "spec": {
            "machineConfigPoolSelector": {"matchLabels": {"pool": "worker"}},
            "kubeletConfig": {"maxPods": 99},
        },
    }
    client.resource(api.KUBELET_CONFIGS).create(kubelet)
    eventually(lambda: cluster.get_config(api.kubelet_managed_name("worker")), what="managed config")
    client.resource(api.KUBELET_CONFIGS).delete("pods")
    eventually(lambda: not client.resource(api.KUBELET_CONFIGS).list()["items"], what="KubeletConfig gone")
    assert cluster.get_config(api.kubelet_managed_name("worker")) is None
    configs.create(machine_config("50-worker-x", "worker", {"/etc/x": "1"}))

    def rolled_out() -> Object | None:
        status = cluster.status("worker")
        rendered = cluster.get_config(str(status.get("currentMachineConfig") or "")) or {}
        files = ((rendered.get("spec") or {}).get("config") or {}).get("storage", {}).get("files", [])
        updated = cluster.condition("worker", api.POOL_UPDATED).get("status") == "True"
        done = status.get("updatingMachines") == 2 and updated
        return rendered if "/etc/x" in {f["path"] for f in files} and done else None

    rendered = eventually(rolled_out, what="the user MachineConfig rolled out")
    return list(rendered["metadata"]["ownerReferences"])

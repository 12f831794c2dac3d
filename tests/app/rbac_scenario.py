"""Record every API request the ``machine-controller`` command makes, per cluster, in one run.

:func:`record` starts a control and a target emulator (each logging its requests), runs the
command's :func:`mcm.app.runner.run` against them with one driver setup, and walks a scenario
that reaches every code path that talks to an API server: start-up and leader election; class
and secret finalizers; creation with a bootstrap token; joining (token deleted, node finalizer,
node template); a repeated Warning (event patch); the freeze probe; the orphan-VM loop (a live
machine get, the driver deleting a stray VM) and an unmanaged Node (annotated); a drain with
evictions and a PodDisruptionBudget; a forced drain that deletes pods and VolumeAttachments; a
Node deleted by a user (its Machine deleted in turn). The fixture's own requests carry the user
agent suffix ``rbac-fixture`` and are left out.

The result is the set of :class:`Request` per cluster (``control``/``target``), each with the
attributes an RBAC authorizer decides on.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import prometheus_client

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.app.drainer import drain_metrics
from mcm.app.options import Options
from mcm.app.runner import run, workqueue_metrics_provider
from mcm.driver import Driver, FakeDriver
from mcm.driver.grpc import serve
from mcm.driver.local import LocalDriver
from mcm.emulator import Emulator
from mcm.emulator.cluster import default_crd_dir
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import (
    CONFIG_MAPS,
    EVENTS,
    NAMESPACES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    VOLUME_ATTACHMENTS,
)
from mcm.testing.nodesim import NodeSimulator

NS = "machines"
VM_NS = "mcm-local-vms"
FIXTURE = "rbac-fixture"
TIMEOUT = 60.0
DRIVER_SETUPS = ("local", "local-sidecar", "module")
"""``local``: the local provider in process; ``local-sidecar``: it behind a gRPC sidecar (its
own clients); ``module``: a driver without API access (a cloud's), Nodes registered by a kubelet
the fixture plays."""


@dataclass(frozen=True)
class Request:
    """One API request as an RBAC authorizer sees it."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def parse_request(method: str, path: str, query: str) -> Request | None:
    """The RBAC attributes of a request line; ``None`` for a non-resource URL (discovery)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    watching = parse_qs(query).get("watch", [""])[0] in ("true", "1")
    read = "watch" if watching else ("get" if name else "list")
    return Request(read if method == "GET" else _VERBS[method], group, resource, sub, namespace, name)


def requests_in(log_file: Path, exclude: str = FIXTURE) -> set[Request]:
    """Every resource request in an emulator's request log but those whose agent has ``exclude``."""
    found: set[Request] = set()
    for line in log_file.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if exclude in entry["user_agent"]:
            continue
        request = parse_request(entry["method"], entry["path"], entry["query"])
        if request is not None:
            found.add(request)
    return found


def eventually(predicate: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout}s")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Scenario:
    """The two clusters, the fixture's clients and the running command."""

    def __init__(self, directory: Path, setup: str) -> None:
        self.directory = directory
        self.setup = setup
        self.logs = {"control": directory / "control.jsonl", "target": directory / "target.jsonl"}
        self.control_emulator = Emulator(name="control", log_file=self.logs["control"])
        self.target_emulator = Emulator(name="target", log_file=self.logs["target"])
        self.control_emulator.start()
        self.target_emulator.start()
        self.control_emulator.install_crds([default_crd_dir()])
        self.kubeconfigs = {
            "control": self.control_emulator.write_kubeconfig(directory / "control.kubeconfig", namespace=NS),
            "target": self.target_emulator.write_kubeconfig(directory / "target.kubeconfig"),
        }
        self.control = self._client("control")
        self.target = self._client("target")
        self.fake = FakeDriver()
        self.stop = threading.Event()
        self.exit_code: int | None = None
        """Set when the command ended (it must not, before the scenario stops it)."""
        self._stoppers: list[Callable[[], None]] = []

    def _client(self, cluster: str, agent: str = FIXTURE) -> ClusterClient:
        return load_config(str(self.kubeconfigs[cluster]), qps=-1, burst=0, user_agent_suffix=agent)

    # --- the command --------------------------------------------------------------------------

    def options(self, **extra: Any) -> Options:
        return Options.defaults(
            control_kubeconfig=str(self.kubeconfigs["control"]),
            target_kubeconfig=str(self.kubeconfigs["target"]),
            namespace=NS,
            address="127.0.0.1",
            port=_free_port(),
            machine_safety_orphan_vms_period=1.0,
            machine_safety_apiserver_statuscheck_period=5.0,
            machine_safety_apiserver_statuscheck_timeout=5.0,
            machine_creation_timeout=2.0,  # machines carry their own; this ages the stray Node
            local_vm_namespace=VM_NS,
            shutdown_grace_period=5.0,
            **extra,
        )

    def start(self) -> None:
        """Run the command in a thread with this scenario's driver setup.

        The command registers its controller's metrics in the process's default registry, which
        a second run in the same test process would find taken: the run gets a fresh one,
        restored on close. The process-wide providers (work queue, leader election, drain) are
        built on the default registry first, as any other test of the process expects them.
        """
        workqueue_metrics_provider()
        drain_metrics()
        default_registry = prometheus_client.REGISTRY
        prometheus_client.REGISTRY = prometheus_client.CollectorRegistry(auto_describe=True)
        self._stoppers.append(lambda: setattr(prometheus_client, "REGISTRY", default_registry))
        driver: Driver | None = None
        if self.setup == "local":  # as --driver=local builds it, with a heartbeat every second
            options = self.options(driver="local")
            driver = self._local_driver("machine-controller")
        elif self.setup == "local-sidecar":
            socket_path = self.directory / "driver.sock"
            options = self.options(driver_endpoint=f"unix://{socket_path}")
            sidecar = self._local_driver("local-driver")
            server = serve(sidecar, f"unix:{socket_path}")
            self._stoppers.append(lambda: (server.stop(None), sidecar.close()))
        else:
            options = self.options(driver="fake")
            driver = self.fake
            kubelet = NodeSimulator(self.target, self.fake, heartbeat_interval=1.0, poll_interval=0.2).start()
            self._stoppers.append(kubelet.stop)

        def command() -> None:
            self.exit_code = run(options, driver, stop=self.stop, really_crash=False)

        thread = threading.Thread(target=command, daemon=True)
        thread.start()
        self._stoppers.insert(0, lambda: (self.stop.set(), thread.join(30)))

    def _local_driver(self, agent: str) -> LocalDriver:
        return LocalDriver(
            self._client("control", agent),
            target=self._client("target", agent),
            namespace=VM_NS,
            heartbeat_interval=1.0,
            poll_interval=0.2,
        )

    def close(self) -> None:
        for stopper in self._stoppers:
            stopper()
        self.control_emulator.close()
        self.target_emulator.close()

    def recorded(self) -> dict[str, set[Request]]:
        return {cluster: requests_in(path) for cluster, path in self.logs.items()}

    # --- objects ------------------------------------------------------------------------------

    def machine(self, name: str, **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "class": {"kind": "MachineClass", "name": "small"},
                "creationTimeout": "10m",
                "nodeTemplate": {"metadata": {"labels": {"pool": "workers"}}},
                **spec,
            },
        }
        return dict(self.control.resource(MACHINES).create(body, namespace=NS))

    def phase(self, name: str) -> str:
        try:
            stored = self.control.resource(MACHINES).get(name, namespace=NS)
        except NotFound:
            return "<gone>"
        return str(((stored.get("status") or {}).get("currentStatus") or {}).get("phase") or "")

    def wait_phase(self, name: str, phase: str) -> None:
        self.eventually(lambda: self.phase(name) == phase, f"machine {name} {phase}")

    def eventually(self, predicate: Callable[[], Any], what: str) -> Any:
        """:func:`eventually`, failing at once when the command has exited."""

        def running_and(check: Callable[[], Any]) -> Any:
            if self.exit_code is not None:
                raise AssertionError(f"{what}: the command exited with {self.exit_code}")
            return check()

        return eventually(lambda: running_and(predicate), what)

    def node(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.target.resource(NODES).get(name))
        except NotFound:
            return None


def _setup_classes(s: Scenario) -> None:
    s.control.resource(NAMESPACES).create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    if s.setup.startswith("local"):  # the chart creates the provider's namespace
        s.control.resource(NAMESPACES).create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": VM_NS}}
        )
    user_data = "#!/bin/sh\nkubeadm join --token <<BOOTSTRAP_TOKEN>> # <<MACHINE_NAME>>\n"
    secret = {"metadata": {"name": "cloud", "namespace": NS}, "data": {"userData": _b64(user_data)}}
    s.control.resource(SECRETS).create({"apiVersion": "v1", "kind": "Secret", **secret}, namespace=NS)
    machine_class = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": "small", "namespace": NS},
        "providerSpec": {"bootDelaySeconds": 0, "deleteDelaySeconds": 0.1},
        "secretRef": {"name": "cloud", "namespace": NS},
        "provider": "local",
    }
    s.control.resource(MACHINE_CLASSES).create(machine_class, namespace=NS)


def _finalized(s: Scenario, resource: Any, name: str, finalizer: str) -> bool:
    stored = s.control.resource(resource).get(name, namespace=NS)
    return finalizer in (stored["metadata"].get("finalizers") or [])


def _secret_finalizer(s: Scenario) -> None:
    """The class's Secret gets the controller's finalizer."""
    s.eventually(lambda: _finalized(s, SECRETS, "cloud", c.MC_FINALIZER), "secret finalizer")


def _pod(name: str, node: str) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "web"},
            "ownerReferences": [owner],
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "x:1"}],
        },
    }


def _join(s: Scenario, names: list[str]) -> None:
    """Machines created, Running, their Nodes finalized and templated; the class finalized."""
    for name in names:
        s.machine(name)
    s.eventually(lambda: _finalized(s, MACHINE_CLASSES, "small", c.MCM_FINALIZER), "class finalizer")
    for name in names:
        s.wait_phase(name, c.PHASE_RUNNING)
        s.eventually(
            lambda n=name: (
                c.NODE_FINALIZER in ((s.node(n) or {}).get("metadata", {}).get("finalizers") or [])
            ),
            f"node finalizer on {name}",
        )
        s.eventually(
            lambda n=name: ((s.node(n) or {}).get("metadata", {}).get("labels") or {}).get("pool"), "template"
        )
    first = _heartbeat(s, names[0])
    s.eventually(lambda: _heartbeat(s, names[0]) != first, "a kubelet heartbeat")


def _heartbeat(s: Scenario, name: str) -> str:
    conditions = ((s.node(name) or {}).get("status") or {}).get("conditions") or []
    return next((str(cd.get("lastHeartbeatTime")) for cd in conditions if cd.get("type") == "Ready"), "")


def _repeated_warning(s: Scenario) -> None:
    """An invalid Machine reconciled again: the same Warning, so its Event is patched (count 2)."""

    def counted(at_least: int) -> bool:
        events = s.control.resource(EVENTS).list(namespace=NS)["items"]
        return any(e.get("reason") == "InvalidSpec" and (e.get("count") or 0) >= at_least for e in events)

    s.machine("invalid", **{"class": {"kind": "", "name": "small"}})
    s.eventually(lambda: counted(1), "an InvalidSpec event")
    touch = {"spec": {"nodeTemplate": {"metadata": {"labels": {"touch": "1"}}}}}  # a new generation
    s.control.resource(MACHINES).patch("invalid", touch, namespace=NS)
    s.eventually(lambda: counted(2), "the InvalidSpec event counted twice")


def _orphans(s: Scenario) -> None:
    """A VM no Machine owns, and a Node no Machine claims."""
    if s.setup.startswith("local"):
        record = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "ghost",
                "namespace": VM_NS,
                "labels": {
                    "local.machine.sapcloud.io/vm": "true",
                    "local.machine.sapcloud.io/class": "small",
                },
            },
            "data": {"providerID": f"local:///{VM_NS}/ghost", "nodeName": "ghost", "machineName": "ghost"},
        }
        s.control.resource(CONFIG_MAPS).create(record, namespace=VM_NS)

        def ghost_gone() -> bool:
            try:
                s.control.resource(CONFIG_MAPS).get("ghost", namespace=VM_NS)
            except NotFound:
                return True
            return False

        s.eventually(ghost_gone, "orphan VM deleted")
    else:
        s.fake.add_vm("fake:///ghost", "ghost", class_name="small")
        s.eventually(lambda: "fake:///ghost" not in s.fake.vms, "orphan VM deleted")
    stray = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "stray"}, "spec": {}}
    s.target.resource(NODES).create(stray)
    s.eventually(
        lambda: (
            c.ANNOTATION_NOT_MANAGED_BY_MCM
            in ((s.node("stray") or {}).get("metadata", {}).get("annotations") or {})
        ),
        "stray node annotated",
    )


def _drain(s: Scenario) -> None:
    """Evictions under a PodDisruptionBudget."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}},
    }
    s.target.resource(POD_DISRUPTION_BUDGETS).create(pdb, namespace="default")
    s.target.resource(PODS).create(_pod("web-0", "drained"), namespace="default")
    s.control.resource(MACHINES).delete("drained", namespace=NS)
    s.eventually(lambda: s.phase("drained") == "<gone>", "drained machine gone")


def _attach_a_volume(s: Scenario, node: str) -> None:
    """A VolumeAttachment and the node's volumesAttached entry, long before the forced drain
    (so the controller's caches have both by then)."""
    attachment = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": "csi-forced"},
        "spec": {"attacher": "csi.example", "nodeName": node, "source": {"persistentVolumeName": "pv-1"}},
    }
    s.target.resource(VOLUME_ATTACHMENTS).create(attachment)
    volumes = {
        "status": {"volumesAttached": [{"name": "kubernetes.io/csi/csi.example^vol-1", "devicePath": ""}]}
    }
    s.target.resource(NODES).patch(node, volumes, subresource="status")


def _forced_drain(s: Scenario) -> None:
    """A forced deletion: pods deleted, then the node's VolumeAttachments."""
    s.target.resource(PODS).create(_pod("web-1", "forced"), namespace="default")
    s.control.resource(MACHINES).patch(
        "forced", {"metadata": {"labels": {c.LABEL_FORCE_DELETION: "true"}}}, namespace=NS
    )
    s.control.resource(MACHINES).delete("forced", namespace=NS)
    s.eventually(lambda: s.phase("forced") == "<gone>", "forced machine gone")
    assert s.target.resource(VOLUME_ATTACHMENTS).list()["items"] == [], "the VolumeAttachment was deleted"


def _node_deleted_by_a_user(s: Scenario) -> None:
    s.target.resource(NODES).delete("orphaned")
    s.eventually(lambda: s.phase("orphaned") == "<gone>", "machine of a deleted node gone")
    s.eventually(lambda: s.node("orphaned") is None, "node gone")


@contextmanager
def scenario(directory: Path, setup: str) -> Iterator[Scenario]:
    s = Scenario(directory, setup)
    try:
        yield s
    finally:
        s.close()


def record(directory: Path, setup: str) -> dict[str, set[Request]]:
    """Run the whole scenario with ``setup`` (one of :data:`DRIVER_SETUPS`); the requests made
    (read once everything stopped)."""
    with scenario(directory, setup) as s:
        _setup_classes(s)
        s.start()
        _secret_finalizer(s)
        _join(s, ["drained", "forced", "orphaned"])
        _attach_a_volume(s, "forced")
        _repeated_warning(s)
        _orphans(s)
        _drain(s)
        _forced_drain(s)
        _node_deleted_by_a_user(s)
    return s.recorded()

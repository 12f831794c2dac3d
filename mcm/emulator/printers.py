"""Table columns of the built-in kinds, as the real server's printers (``pkg/printers/internalversion``)
produce them for ``kubectl get`` and ``kubectl get -o wide``.

Guarantees:

- Columns (name, type, priority) and cell rules follow upstream for nodes, pods, namespaces,
  services, secrets, configmaps, serviceaccounts, deployments and events (core/v1, and
  events.k8s.io/v1 through the same storage); ``priority: 1`` columns are the ``-o wide`` ones.
  Absent values print as upstream does (``<none>``, ``<unknown>``).
- Other built-in kinds print ``Name`` and ``Age``.
- Cell functions never raise on odd objects: wrong shapes read as absent.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any

from mcm.emulator.store import Obj
from mcm.emulator.timefmt import human_duration, parse_time

__all__ = ["Printer", "printer_for"]

Cells = Callable[[Obj, str], list[Any]]


class Printer:
    """Column definitions (after ``Name``) and a function giving a row's cells (after the name).

    ``name_first=False``: the kind has no leading ``Name`` column (Events show it last, wide only);
    ``columns`` and ``cells`` are then the whole row.
    """

    def __init__(self, columns: list[tuple[str, str, int]], cells: Cells, *, name_first: bool = True) -> None:
        self.columns = [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": name,
                "priority": priority,
            }
            for name, kind, priority in columns
        ]
        self.cells = cells
        self.name_first = name_first


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _node_status(node: Obj) -> str:
    ready = "Unknown"
    for condition in _list(_dict(node.get("status")).get("conditions")):
        if _dict(condition).get("type") == "Ready":
            ready = "Ready" if condition.get("status") == "True" else "NotReady"
    if _dict(node.get("spec")).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready


def _node_roles(node: Obj) -> str:
    roles = set()
    for key, value in _dict(_dict(node.get("metadata")).get("labels")).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return ",".join(sorted(roles)) or "<none>"


def _address(node: Obj, kind: str) -> str:
    for address in _list(_dict(node.get("status")).get("addresses")):
        if _dict(address).get("type") == kind:
            return str(address.get("address", ""))
    return "<none>"


def _node_cells(node: Obj, age: str) -> list[Any]:
    info = _dict(_dict(node.get("status")).get("nodeInfo"))
    return [
        _node_status(node),
        _node_roles(node),
        age,
        info.get("kubeletVersion", ""),
        _address(node, "InternalIP"),
        _address(node, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _pod_reason(pod: Obj) -> str:
    status = _dict(pod.get("status"))
    reason = str(status.get("reason") or status.get("phase") or "")
    for container in reversed(_list(status.get("containerStatuses"))):
        state = _dict(_dict(container).get("state"))
        waiting, terminated = _dict(state.get("waiting")), _dict(state.get("terminated"))
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif terminated.get("reason"):
            reason = str(terminated["reason"])
        elif terminated:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
    if _dict(pod.get("metadata")).get("deletionTimestamp") and status.get("reason") != "NodeLost":
        reason = "Terminating"
    return reason


def _pod_cells(pod: Obj, age: str) -> list[Any]:
    spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
    statuses = [_dict(c) for c in _list(status.get("containerStatuses"))]
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    gates = _list(spec.get("readinessGates"))
    gates_text = "<none>"
    if gates:
        conditions = {_dict(c).get("type"): _dict(c).get("status") for c in _list(status.get("conditions"))}
        true = sum(1 for g in gates if conditions.get(_dict(g).get("conditionType")) == "True")
        gates_text = f"{true}/{len(gates)}"
    return [
        f"{ready}/{len(_list(spec.get('containers')))}",
        _pod_reason(pod),
        restarts,
        age,
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]


def _ports(service: Obj) -> str:
    parts = []
    for item in _list(_dict(service.get("spec")).get("ports")):
        port = _dict(item)
        text = f"{port.get('port')}"
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        parts.append(f"{text}/{port.get('protocol', 'TCP')}")
    return ",".join(parts) or "<none>"


def _selector(selector: Any) -> str:
    labels = _dict(selector)
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def _service_cells(service: Obj, age: str) -> list[Any]:
    spec = _dict(service.get("spec"))
    external = ",".join(_list(spec.get("externalIPs"))) or (
        spec.get("externalName") if spec.get("type") == "ExternalName" else "<none>"
    )
    return [
        spec.get("type", ""),
        spec.get("clusterIP") or "<none>",
        external or "<none>",
        _ports(service),
        age,
        _selector(spec.get("selector")),
    ]


def _deployment_cells(deployment: Obj, age: str) -> list[Any]:
    spec, status = _dict(deployment.get("spec")), _dict(deployment.get("status"))
    containers = [_dict(c) for c in _list(_dict(_dict(spec.get("template")).get("spec")).get("containers"))]
    return [
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        age,
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        _selector(_dict(spec.get("selector")).get("matchLabels")),
    ]


def _since(value: Any, now: _dt.datetime) -> str:
    """``translateTimestampSince``: ``<unknown>`` for an absent (zero) time."""
    if not isinstance(value, str) or not value:
        return "<unknown>"
    try:
        return human_duration((now - parse_time(value)).total_seconds())
    except ValueError:
        return "<unknown>"


def _event_source(event: Obj) -> str:
    """``formatEventSource``: component (else reporting controller), then host (else instance)."""
    source = _dict(event.get("source"))
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else str(component)


def _event_cells(event: Obj, _age: str) -> list[Any]:
    """``printEvent`` (always wide, as the server's table convertor asks) of a core/v1 Event."""
    now = _dt.datetime.now(_dt.UTC)
    first = (
        _since(event.get("firstTimestamp"), now)
        if event.get("firstTimestamp")
        else _since(event.get("eventTime"), now)
    )
    last = _since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") if isinstance(event.get("count"), int) else 0
    series = event.get("series")
    if isinstance(series, dict):
        last = _since(series.get("lastObservedTime"), now)
        count = series.get("count") if isinstance(series.get("count"), int) else 0
    elif count == 0:
        count = 1  # singleton events of the new API have no count
    involved = _dict(event.get("involvedObject"))
    kind, name = str(involved.get("kind") or "").lower(), involved.get("name") or ""
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        f"{kind}/{name}" if name else kind,
        involved.get("fieldPath", ""),
        _event_source(event),
        str(event.get("message") or "").strip(),
        first,
        count,
        _dict(event.get("metadata")).get("name", ""),
    ]


def _data_count(obj: Obj) -> int:
    return len(_dict(obj.get("data"))) + len(_dict(obj.get("binaryData")))


_PRINTERS: Mapping[tuple[str, str], Printer] = {
    ("", "Node"): Printer(
        [
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        _node_cells,
    ),
    ("", "Pod"): Printer(
        [
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        _pod_cells,
    ),
    ("", "Namespace"): Printer(
        [("Status", "string", 0), ("Age", "string", 0)],
        lambda ns, age: [_dict(ns.get("status")).get("phase", ""), age],
    ),
    ("", "Service"): Printer(
        [
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
            ("Selector", "string", 1),
        ],
        _service_cells,
    ),
    ("", "Secret"): Printer(
        [("Type", "string", 0), ("Data", "string", 0), ("Age", "string", 0)],
        lambda secret, age: [secret.get("type", ""), _data_count(secret), age],
    ),
    ("", "ConfigMap"): Printer(
        [("Data", "string", 0), ("Age", "string", 0)], lambda cm, age: [_data_count(cm), age]
    ),
    ("", "ServiceAccount"): Printer(
        [("Secrets", "string", 0), ("Age", "string", 0)],
        lambda sa, age: [len(_list(sa.get("secrets"))), age],
    ),
    ("", "Event"): Printer(
        [
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("Message", "string", 0),
            ("First Seen", "string", 1),
            ("Count", "string", 1),
            ("Name", "string", 1),
        ],
        _event_cells,
        name_first=False,
    ),
    ("apps", "Deployment"): Printer(
        [
            ("Ready", "string", 0),
            ("Up-to-date", "string", 0),
            ("Available", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _deployment_cells,
    ),
}


def printer_for(group: str, kind: str) -> Printer | None:
    """The printer of a built-in kind, if it has kind-specific columns."""
    return _PRINTERS.get((group, kind))

"""Server-side tables for kubectl (printer columns, ages, watch rows)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from mcm.emulator import Emulator
from mcm.emulator.tables import human_duration, wants_table
from tests.emulator.raw import Raw

TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
MACHINES = "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machines"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (20 * 86400, "20d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration_matches_apimachinery(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_wants_table() -> None:
    assert wants_table(TABLE)
    assert not wants_table("application/json")
    assert not wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io")


def test_table_list_get_and_watch_use_printer_columns(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    body = {
        "metadata": {"name": "m1", "labels": {"node": "n1"}},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    assert raw.post(MACHINES, body)[0] == 201
    code, _, listing = raw.request("GET", MACHINES, headers={"Accept": TABLE})
    assert code == 200 and listing["kind"] == "Table" and listing["apiVersion"] == "meta.k8s.io/v1"
    names = [c["name"] for c in listing["columnDefinitions"]]
    assert names[:4] == ["Name", "Status", "Age", "Node"]
    row = listing["rows"][0]
    assert row["cells"][0] == "m1" and row["cells"][3] == "n1" and row["cells"][2].endswith("s")
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "m1"
    code, _, single = raw.request("GET", f"{MACHINES}/m1", headers={"Accept": TABLE})
    assert single["kind"] == "Table" and len(single["rows"]) == 1
    code, _, plain = raw.request("GET", f"{MACHINES}/m1", headers={"Accept": "application/json"})
    assert plain["kind"] == "Machine"
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", emulator.port, timeout=5)
    conn.request("GET", f"{MACHINES}?watch=true&timeoutSeconds=1", headers={"Accept": TABLE})
    event = json.loads(conn.getresponse().readline())
    assert event["type"] == "ADDED" and event["object"]["kind"] == "Table"
    assert event["object"]["rows"][0]["cells"][0] == "m1"
    conn.close()


def test_builtin_table_without_printer_has_name_and_age(emulator: Emulator) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    code, _, listing = Raw(emulator.url).request("GET", path, headers={"Accept": TABLE})
    assert code == 200
    assert [c["name"] for c in listing["columnDefinitions"]] == ["Name", "Age"]


def test_namespace_table_has_status(emulator: Emulator) -> None:
    code, _, listing = Raw(emulator.url).request("GET", "/api/v1/namespaces", headers={"Accept": TABLE})
    assert code == 200
    assert [c["name"] for c in listing["columnDefinitions"]] == ["Name", "Status", "Age"]
    rows = {r["cells"][0]: r["cells"][1] for r in listing["rows"]}
    assert rows["default"] == "Active"


def test_node_and_pod_tables_match_the_real_printers(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    node = {
        "metadata": {
            "name": "n1",
            "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/role": "edge"},
        },
        "spec": {"unschedulable": True},
    }
    assert raw.post("/api/v1/nodes", node)[0] == 201
    status = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Garden Linux",
                "kernelVersion": "6.6",
                "containerRuntimeVersion": "containerd://1.7",
            },
        }
    }
    assert raw.patch("/api/v1/nodes/n1/status", status)[0] == 200
    code, _, table = raw.request("GET", "/api/v1/nodes", headers={"Accept": TABLE})
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Name", 0),
        ("Status", 0),
        ("Roles", 0),
        ("Age", 0),
        ("Version", 0),
        ("Internal-IP", 1),
        ("External-IP", 1),
        ("OS-Image", 1),
        ("Kernel-Version", 1),
        ("Container-Runtime", 1),
    ]
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["n1", "Ready,SchedulingDisabled", "edge,worker"]
    assert cells[4:] == ["v1.32.0", "10.0.0.5", "<none>", "Garden Linux", "6.6", "containerd://1.7"]
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "i"}]}}
    assert raw.post("/api/v1/namespaces/default/pods", pod)[0] == 201
    code, _, table = raw.request("GET", "/api/v1/namespaces/default/pods", headers={"Accept": TABLE})
    assert code == 200
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[:4] == ["p", "0/1", cells[2], 0] and cells[6] == "n1"


EVENT_COLUMNS = [
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
]
"""kube-apiserver's columns for Events (pkg/printers/internalversion, both Event APIs)."""


def _core_event(name: str, **fields: object) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Machine", "name": "m-1", "namespace": "default"},
        "type": "Normal",
        "reason": "MachineRunning",
        "message": "Machine m-1 is now Running\n",
        **fields,
    }


def test_events_print_the_real_servers_columns(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    path = "/api/v1/namespaces/default/events"
    counted = _core_event(
        "m-1.a",
        count=3,
        firstTimestamp="2020-01-01T00:00:00Z",
        lastTimestamp="2020-01-02T00:00:00Z",
        source={"component": "machine-controller", "host": "mc-0"},
    )
    new_api = _core_event(
        "m-1.b",
        eventTime="2020-01-01T00:00:00.000000Z",
        reportingComponent="machine-controller",
        reportingInstance="mc-1",
        series={"count": 7, "lastObservedTime": "2020-01-03T00:00:00.000000Z"},
    )
    assert raw.post(path, counted)[0] == 201 and raw.post(path, new_api)[0] == 201
    _, _, listing = raw.request("GET", path, headers={"Accept": TABLE})
    assert [(c["name"], c["priority"]) for c in listing["columnDefinitions"]] == EVENT_COLUMNS
    rows = {row["cells"][-1]: row["cells"] for row in listing["rows"]}
    last, kind, reason, target, subobject, source, message, first, count, _ = rows["m-1.a"]
    assert (kind, reason, target, subobject, source, count) == (
        "Normal", "MachineRunning", "machine/m-1", "", "machine-controller, mc-0", 3
    )  # fmt: skip
    assert message == "Machine m-1 is now Running"  # trimmed
    assert last.endswith(("d", "y")) and first.endswith(("d", "y")) and last != first
    series = rows["m-1.b"]
    assert series[5] == "machine-controller, mc-1" and series[8] == 7
    v1 = "/apis/events.k8s.io/v1/namespaces/default/events"
    _, _, through_v1 = raw.request("GET", v1, headers={"Accept": TABLE})
    assert [(c["name"], c["priority"]) for c in through_v1["columnDefinitions"]] == EVENT_COLUMNS
    assert {row["cells"][-1]: row["cells"] for row in through_v1["rows"]} == rows
    _, _, single = raw.request("GET", f"{v1}/m-1.a", headers={"Accept": TABLE})
    assert single["rows"][0]["cells"] == rows["m-1.a"]


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed on this machine")
def test_kubectl_get_events_shows_what_happened(emulator: Emulator, kubeconfig: str) -> None:
    Raw(emulator.url).post("/api/v1/namespaces/default/events", _core_event("m-1.a", count=1))
    result = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "get", "events"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    header, row = result.stdout.splitlines()[:2]
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert row.split()[1:] == [
        "Normal",
        "MachineRunning",
        "machine/m-1",
        "Machine",
        "m-1",
        "is",
        "now",
        "Running",
    ]

"""Server-side tables for kubectl (printer columns, ages, watch rows)."""

from __future__ import annotations

import json

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

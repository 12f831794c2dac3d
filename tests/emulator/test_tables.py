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


def test_builtin_table_has_name_and_age(emulator: Emulator) -> None:
    code, _, listing = Raw(emulator.url).request("GET", "/api/v1/namespaces", headers={"Accept": TABLE})
    assert code == 200
    assert [c["name"] for c in listing["columnDefinitions"]] == ["Name", "Age"]
    assert "default" in [r["cells"][0] for r in listing["rows"]]

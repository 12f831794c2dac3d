"""Fault injection and instrumentation: each fault visibly affects a raw client."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from mcm.emulator import Emulator
from tests.emulator.raw import Raw, WatchReader

NS = "/api/v1/namespaces/default"


def test_stop_start_same_port_same_data_rv_continues(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    _, _, obj = raw.post(f"{NS}/configmaps", {"metadata": {"name": "keep"}})
    port = emulator.port
    reader = WatchReader(
        emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={obj['metadata']['resourceVersion']}"
    )
    emulator.stop()
    assert list(reader.lines()) == []
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    emulator.start()
    assert emulator.port == port
    raw = Raw(emulator.url)
    code, _, again = raw.get(f"{NS}/configmaps/keep")
    assert code == 200 and again["metadata"]["uid"] == obj["metadata"]["uid"]
    _, _, new = raw.post(f"{NS}/configmaps", {"metadata": {"name": "after"}})
    assert int(new["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])


def test_restart_reset_history_compacts(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    raw.post(f"{NS}/configmaps", {"metadata": {"name": "h"}})
    emulator.restart(downtime=0.01, reset_history=True)
    events = list(WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion=1").events())
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410


def test_pause_refuse_connection_refused(emulator: Emulator) -> None:
    port = emulator.port
    emulator.pause("refuse")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    emulator.resume()
    assert Raw(emulator.url).get("/version")[0] == 200


def test_pause_hang_times_out_client(emulator: Emulator) -> None:
    emulator.pause("hang")
    conn = http.client.HTTPConnection("127.0.0.1", emulator.port, timeout=0.3)
    with pytest.raises(TimeoutError):
        conn.request("GET", "/version")
        conn.getresponse()
    conn.close()
    emulator.resume()
    assert Raw(emulator.url).get("/version")[0] == 200


def test_pause_error_503_and_healthz_500(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    emulator.pause("error")
    code, _, status = raw.get(f"{NS}/configmaps")
    assert code == 503 and status["reason"] == "ServiceUnavailable"
    for path in ("/healthz", "/livez", "/readyz"):
        code, headers, text = raw.get(path)
        assert code == 500 and headers["content-type"].startswith("text/plain")
        assert text.endswith("check failed")
    emulator.resume()
    code, _, text = raw.get("/healthz")
    assert (code, text) == (200, "ok")


def test_fault_rule_times_and_phase_after_commits(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    rule = emulator.faults.add(code=500, verb="create", resource="configmaps", phase="after", times=1)
    code, _, status = raw.post(f"{NS}/configmaps", {"metadata": {"name": "lost"}})
    assert code == 500 and status["reason"] == "InternalError"
    assert emulator.get("configmaps", "default", "lost") is not None
    assert rule.hits == 1
    code, _, _ = raw.post(f"{NS}/configmaps", {"metadata": {"name": "fine"}})
    assert code == 201


def test_fault_rule_before_commits_nothing_and_skip_first(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    emulator.faults.add(code=409, verb="create", resource="configmaps", skip_first=1, times=None)
    assert raw.post(f"{NS}/configmaps", {"metadata": {"name": "a"}})[0] == 201
    code, _, status = raw.post(f"{NS}/configmaps", {"metadata": {"name": "b"}})
    assert code == 409 and status["reason"] == "Conflict"
    assert emulator.get("configmaps", "default", "b") is None
    emulator.faults.clear()
    assert raw.post(f"{NS}/configmaps", {"metadata": {"name": "b"}})[0] == 201


def test_fault_429_retry_after_honoured_by_client_go_retries(emulator: Emulator, kubeconfig: str) -> None:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=kubeconfig)
    api_client.configuration.client_go_retries = True
    api_client.rest_client = type(api_client.rest_client)(api_client.configuration)
    rule = emulator.faults.add(code=429, verb="list", resource="configmaps", retry_after=0, times=1)
    code, headers, status = Raw(emulator.url).get(f"{NS}/configmaps")
    assert code == 429 and headers["retry-after"] == "0"
    assert status["details"]["retryAfterSeconds"] == 0
    emulator.faults.clear()
    rule = emulator.faults.add(code=429, verb="list", resource="configmaps", retry_after=0, times=1)
    listing = client.CoreV1Api(api_client).list_namespaced_config_map("default")
    assert listing.items == []
    assert rule.hits == 1
    assert emulator.stats.count("list", "configmaps", code=429) == 2


def test_latency_injection_applies_to_matching_requests_only(emulator: Emulator) -> None:
    """The delayed request takes at least the latency (load only adds to it); that the other was
    not delayed is read from the rule's count, not from a clock a loaded machine would upset."""
    raw = Raw(emulator.url)
    rule = emulator.latency(0.3, resource="secrets")
    raw.get(f"{NS}/configmaps")
    assert rule.hits == 0
    start = time.perf_counter()
    raw.get(f"{NS}/secrets")
    assert time.perf_counter() - start >= 0.3
    assert rule.hits == 1


def test_injected_410_on_watch_is_error_event(emulator: Emulator) -> None:
    emulator.faults.add(code=410, verb="watch", resource="configmaps")
    events = list(WatchReader(emulator.url, f"{NS}/configmaps?watch=true").events())
    assert [e["type"] for e in events] == ["ERROR"]


def test_stats_counts_by_verb_resource_subresource(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    with emulator.stats.delta() as delta:
        raw.post(
            f"{NS}/pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        )
        _, _, pod = raw.get(f"{NS}/pods/p")
        raw.put(f"{NS}/pods/p/status", pod)
        raw.get(f"{NS}/pods")
        raw.post(
            f"{NS}/pods/p/eviction",
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}},
        )
    assert delta.count("create", "pods") == 2
    assert delta.count("create", "pods", subresource="eviction") == 1
    assert delta.count("update", "pods", subresource="status") == 1
    assert delta.count("get", "pods") == 1 and delta.count("list", "pods") == 1
    assert emulator.stats.count(code=201) >= 1
    entry = emulator.stats.log[-1]
    assert entry.verb == "create" and entry.audit_id


def test_watch_stats_and_counts(emulator: Emulator) -> None:
    reader = WatchReader(emulator.url, "/api/v1/nodes?watch=true&timeoutSeconds=1")
    assert emulator.wait_for(lambda: emulator.watches.open_watches().get("nodes") == 1, 2)
    list(reader.lines())
    assert emulator.wait_for(lambda: emulator.stats.count("watch", "nodes") == 1, 2)


def test_stop_is_fast_with_open_watches(emulator: Emulator) -> None:
    readers = [WatchReader(emulator.url, f"{NS}/configmaps?watch=true") for _ in range(5)]
    start = time.perf_counter()
    emulator.stop()
    assert time.perf_counter() - start < 5.0  # does not wait for the watches to time out
    for reader in readers:
        assert list(reader.lines()) == []


def test_hang_then_resume_answers_parked_request(emulator: Emulator) -> None:
    emulator.pause("hang")
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(Raw(emulator.url).get("/version")[0]))
    thread.start()
    thread.join(0.2)
    assert thread.is_alive()
    emulator.resume()
    thread.join(5)
    assert results == [200]


def test_pause_hang_holds_watch_events_until_resume(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    _, _, obj = raw.post(f"{NS}/configmaps", {"metadata": {"name": "w"}})
    reader = WatchReader(
        emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={obj['metadata']['resourceVersion']}"
    )
    assert emulator.wait_for(lambda: emulator.watches.open_watches().get("configmaps") == 1, 2)
    emulator.pause("hang")
    emulator.storage.create(emulator.resource_type("configmaps"), {"metadata": {"name": "held"}}, "default")
    assert not emulator.wait_for(lambda: emulator.watches.events_sent > 0, 0.3)
    emulator.resume()
    event = reader.next_event()
    assert event["object"]["metadata"]["name"] == "held"


def test_request_log_written_as_json_lines(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with Emulator(log_file=log, controllers=False) as emu:
        Raw(emu.url).get(f"{NS}/configmaps?limit=1")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows[-1]["verb"] == "list" and rows[-1]["code"] == 200 and rows[-1]["query"] == "limit=1"
    assert rows[-1]["audit_id"] and rows[-1]["path"] == f"{NS}/configmaps"

"""Conformance: list and watch."""

from __future__ import annotations

import json
import threading
import time
from urllib.parse import quote

import pytest
from kubernetes import client, watch

from tests.conformance.semantics_support import Cluster, cluster, emulator_only, namespace, pod_body, within
from tests.conformance.wire import call, watch_lines

__all__ = ["cluster", "namespace"]


def _cm(cluster: Cluster, namespace: str, name: str, **labels: str) -> dict:
    body = {"metadata": {"name": name, "labels": labels}}
    reply = call(cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
    assert reply.status == 201
    return reply.json()


def _names(body: dict) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def test_list_items_typemeta_builtin_vs_custom(cluster: Cluster, namespace: str) -> None:
    _cm(cluster, namespace, "a")
    assert "kind" not in call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps").json()["items"][0]
    body = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": "mc"},
        "providerSpec": {},
    }
    path = f"/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machineclasses"
    call(cluster, "POST", path, body)
    assert call(cluster, "GET", path).json()["items"][0]["kind"] == "MachineClass"


def test_label_selector_equality_and_set_based(cluster: Cluster, namespace: str) -> None:
    _cm(cluster, namespace, "one", team="a", rank="1")
    _cm(cluster, namespace, "two", team="b", rank="2")
    _cm(cluster, namespace, "three")
    cases = {
        "team=a": ["one"],
        "team!=a": ["three", "two"],
        "team in (a,b)": ["one", "two"],
        "team notin (a)": ["three", "two"],
        "team": ["one", "two"],
        "!team": ["three"],
        "rank>1": ["two"],
    }
    for selector, expected in cases.items():
        body = call(
            cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?labelSelector={quote(selector)}"
        ).json()
        assert sorted(_names(body)) == expected, selector


def test_label_selector_invalid_400(cluster: Cluster, namespace: str) -> None:
    assert (
        call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?labelSelector=a%20in%20b").status
        == 400
    )


def test_field_selector_pod_spec_nodename(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("off"))
    cluster.core.create_namespaced_pod(namespace, pod_body("on", node="conf-nowhere"))
    on = cluster.core.list_namespaced_pod(namespace, field_selector="spec.nodeName=conf-nowhere")
    assert [p.metadata.name for p in on.items] == ["on"]
    off = cluster.core.list_namespaced_pod(namespace, field_selector="spec.nodeName=")
    assert [p.metadata.name for p in off.items] == ["off"]
    by_name = cluster.core.list_namespaced_pod(namespace, field_selector="metadata.name=off")
    assert [p.metadata.name for p in by_name.items] == ["off"]


def test_field_selector_event_involved_object(cluster: Cluster, namespace: str) -> None:
    for name, kind in (("e1", "Machine"), ("e2", "Node")):
        body = {
            "metadata": {"name": name},
            "involvedObject": {"kind": kind, "name": "x", "namespace": namespace},
            "reason": "R",
        }
        cluster.core.create_namespaced_event(namespace, body)
    events = cluster.core.list_namespaced_event(
        namespace, field_selector="involvedObject.kind=Machine,involvedObject.name=x"
    )
    assert [e.metadata.name for e in events.items] == ["e1"]


def test_field_selector_unsupported_400(cluster: Cluster, namespace: str) -> None:
    assert (
        call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?fieldSelector=spec.x%3Dy").status
        == 400
    )


def test_pagination_consistent_snapshot(cluster: Cluster, namespace: str) -> None:
    for i in range(4):
        _cm(cluster, namespace, f"p{i}")
    first = call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?limit=2").json()
    assert first["metadata"]["remainingItemCount"] == 2
    _cm(cluster, namespace, "p9")
    token = quote(first["metadata"]["continue"])
    second = call(
        cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?limit=2&continue={token}"
    ).json()
    assert _names(second) == ["p2", "p3"] and "continue" not in second["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_rv0_list_ignores_limit(cluster: Cluster, namespace: str) -> None:
    for i in range(3):
        _cm(cluster, namespace, f"r{i}")
    path = f"/api/v1/namespaces/{namespace}/configmaps?limit=2&resourceVersion=0"
    listed: list[int] = []

    def all_three() -> bool:
        # A real server answers resourceVersion=0 from its watch cache, which may not have seen
        # the last create yet on a loaded machine: poll; the limit must never cut the list.
        body = call(cluster, "GET", path).json()
        assert "continue" not in body["metadata"]
        listed.append(len(body["items"]))
        return len(body["items"]) == 3

    assert within(10, all_three), f"listed {listed}"


def test_continue_token_expired_410(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    for i in range(3):
        _cm(cluster, namespace, f"x{i}")
    first = call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?limit=1").json()
    _cm(cluster, namespace, "later")
    emu.compact()
    reply = call(
        cluster,
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps?limit=1&continue={quote(first['metadata']['continue'])}",
    )
    assert reply.status == 410 and reply.json()["reason"] == "Expired"


def test_list_option_validation_422(cluster: Cluster, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    reply = call(cluster, "GET", f"{base}?resourceVersionMatch=NotOlderThan")
    assert reply.status == 422
    assert reply.json()["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided"
    )
    assert call(cluster, "GET", f"{base}?resourceVersion=0&resourceVersionMatch=Exact").status == 422


def test_list_rv_exact_returns_past_state(cluster: Cluster, namespace: str) -> None:
    rv = _cm(cluster, namespace, "past")["metadata"]["resourceVersion"]
    _cm(cluster, namespace, "future")
    body = call(
        cluster,
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps?resourceVersion={rv}&resourceVersionMatch=Exact",
    ).json()
    assert _names(body) == ["past"]


@pytest.mark.slow
def test_list_rv_too_large_504(cluster: Cluster, namespace: str) -> None:
    rv = int(_cm(cluster, namespace, "big")["metadata"]["resourceVersion"]) + 1000
    reply = call(cluster, "GET", f"/api/v1/namespaces/{namespace}/configmaps?resourceVersion={rv}")
    assert reply.status == 504
    assert reply.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_watch_framing_chunked_ndjson(cluster: Cluster, namespace: str) -> None:
    _cm(cluster, namespace, "f")
    status, headers, lines = watch_lines(
        cluster, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=1"
    )
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    received = list(lines)
    assert received and all(line.strip() and line.endswith(b"\n") for line in received)
    assert json.loads(received[0])["type"] == "ADDED"


def test_watch_from_rv_delivers_later_events_only_and_in_order(cluster: Cluster, namespace: str) -> None:
    rv = _cm(cluster, namespace, "before")["metadata"]["resourceVersion"]
    _cm(cluster, namespace, "after")
    cluster.core.delete_namespaced_config_map("before", namespace)
    _, _, lines = watch_lines(
        cluster, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"
    )
    events = [json.loads(line) for line in lines]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "after"),
        ("DELETED", "before"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_selector_transition_added_deleted(cluster: Cluster, namespace: str) -> None:
    rv = _cm(cluster, namespace, "t", team="a")["metadata"]["resourceVersion"]
    cluster.core.patch_namespaced_config_map("t", namespace, {"metadata": {"labels": {"team": "b"}}})
    cluster.core.patch_namespaced_config_map("t", namespace, {"metadata": {"labels": {"team": "a"}}})
    query = f"watch=true&labelSelector=team%3Da&resourceVersion={rv}&timeoutSeconds=1"
    path = f"/api/v1/namespaces/{namespace}/configmaps?{query}"
    _, _, lines = watch_lines(cluster, path)
    assert [json.loads(line)["type"] for line in lines] == ["DELETED", "ADDED"]


def test_watch_bookmarks_when_allowed(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    emu.watches.bookmark_interval = 0.2
    try:
        rv = _cm(cluster, namespace, "b")["metadata"]["resourceVersion"]
        query = f"watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=1"
        path = f"/api/v1/namespaces/{namespace}/configmaps?{query}"
        _, _, lines = watch_lines(cluster, path)
        bookmark = json.loads(next(lines))
        assert bookmark["type"] == "BOOKMARK" and bookmark["object"]["kind"] == "ConfigMap"
        assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(rv)
    finally:
        emu.watches.bookmark_interval = 60.0


def test_watch_timeout_seconds_closes_cleanly(cluster: Cluster, namespace: str) -> None:
    start = time.monotonic()
    _, _, lines = watch_lines(
        cluster, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1"
    )
    assert list(lines) == []
    assert 0.9 <= time.monotonic() - start <= 10  # closed by the server, not held open


def test_watch_too_old_rv_error_410(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    rv = _cm(cluster, namespace, "o")["metadata"]["resourceVersion"]
    _cm(cluster, namespace, "o2")
    emu.compact()
    status, _, lines = watch_lines(
        cluster, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={rv}"
    )
    events = [json.loads(line) for line in lines]
    assert status == 200 and len(events) == 1
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410


def test_python_watch_resumes_after_server_close(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    rv = _cm(cluster, namespace, "r0")["metadata"]["resourceVersion"]
    seen: list[str] = []
    done = threading.Event()

    def run() -> None:
        stream = watch.Watch().stream(cluster.core.list_namespaced_config_map, namespace, resource_version=rv)
        for event in stream:
            seen.append(event["object"].metadata.name)
            if len(seen) == 2:
                done.set()
                return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert emu.wait_for(lambda: bool(emu.watches.open_watches()), 5)
    _cm(cluster, namespace, "r1")
    assert emu.wait_for(lambda: seen == ["r1"], 5)
    emu.watches.drop("close")
    _cm(cluster, namespace, "r2")
    assert done.wait(10)
    assert seen == ["r1", "r2"]


def test_python_watch_raises_410_after_one_retry(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    rv = _cm(cluster, namespace, "e0")["metadata"]["resourceVersion"]
    _cm(cluster, namespace, "e1")
    emu.compact()
    with emu.stats.delta() as delta, pytest.raises(client.ApiException) as info:
        for _ in watch.Watch().stream(
            cluster.core.list_namespaced_config_map, namespace, resource_version=rv
        ):
            pass
    assert info.value.status == 410
    assert delta.count("watch", "configmaps") == 2


def test_list_sorted_by_namespace_name(cluster: Cluster, namespace: str) -> None:
    for name in ("b", "a", "c"):
        _cm(cluster, namespace, name)
    items = call(cluster, "GET", "/api/v1/configmaps").json()["items"]
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]
    assert keys == sorted(keys)


def test_watch_no_bookmarks_when_not_requested(cluster: Cluster, namespace: str) -> None:
    emu = emulator_only(cluster)
    rv = _cm(cluster, namespace, "nb")["metadata"]["resourceVersion"]
    _, _, lines = watch_lines(
        cluster, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"
    )
    emu.watches.bookmark_now()
    assert [json.loads(line)["type"] for line in lines] == []


def test_watch_deleted_event_carries_final_state_and_new_rv(cluster: Cluster, namespace: str) -> None:
    created = _cm(cluster, namespace, "gone", keep="label")
    rv = created["metadata"]["resourceVersion"]
    cluster.core.delete_namespaced_config_map("gone", namespace)
    _, _, lines = watch_lines(
        cluster, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"
    )
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["DELETED"]
    obj = events[0]["object"]
    assert obj["metadata"]["labels"] == {"keep": "label"}
    assert int(obj["metadata"]["resourceVersion"]) > int(rv)


def test_watch_field_selector_nodename(cluster: Cluster, namespace: str) -> None:
    rv = cluster.core.list_namespaced_pod(namespace).metadata.resource_version
    cluster.core.create_namespaced_pod(namespace, pod_body("mine", node="conf-node-a"))
    cluster.core.create_namespaced_pod(namespace, pod_body("other", node="conf-node-b"))
    cluster.core.delete_namespaced_pod("mine", namespace, grace_period_seconds=0)
    query = f"watch=true&fieldSelector=spec.nodeName%3Dconf-node-a&resourceVersion={rv}&timeoutSeconds=1"
    _, _, lines = watch_lines(cluster, f"/api/v1/namespaces/{namespace}/pods?{query}")
    events = [(e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, lines)]
    assert events[0] == ("ADDED", "mine") and events[-1] == ("DELETED", "mine")
    assert all(name == "mine" for _, name in events)

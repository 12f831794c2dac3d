"""List (selectors, pagination, RV semantics) and watch (framing, start points, filters, bookmarks,
timeouts, 410) over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.emulator import Emulator
from tests.emulator.raw import Raw, WatchReader, pod

NS = "/api/v1/namespaces/default"


@pytest.fixture
def raw(emulator: Emulator) -> Iterator[Raw]:
    client = Raw(emulator.url)
    yield client
    client.close()


def _cm(raw: Raw, name: str, **labels: str) -> dict:
    code, _, obj = raw.post(f"{NS}/configmaps", {"metadata": {"name": name, "labels": labels}})
    assert code == 201
    return obj


def _names(body: dict) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def test_empty_list_has_items_array_and_string_rv(raw: Raw) -> None:
    code, _, body = raw.get(f"{NS}/configmaps")
    assert code == 200
    assert body["items"] == [] and body["kind"] == "ConfigMapList"
    assert isinstance(body["metadata"]["resourceVersion"], str)


def test_list_sorted_across_namespaces_and_builtin_items_without_typemeta(raw: Raw) -> None:
    raw.post("/api/v1/namespaces", {"metadata": {"name": "aaa"}})
    _cm(raw, "z")
    raw.post("/api/v1/namespaces/aaa/configmaps", {"metadata": {"name": "y"}})
    _, _, body = raw.get("/api/v1/configmaps")
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]
    assert keys == sorted(keys)
    assert "kind" not in body["items"][0]


def test_custom_list_items_carry_typemeta(raw: Raw) -> None:
    path = "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machineclasses"
    raw.post(path, {"metadata": {"name": "mc"}, "providerSpec": {}})
    _, _, body = raw.get(path)
    assert body["items"][0]["kind"] == "MachineClass"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=a", ["one", "three"]),
        ("team==a", ["one", "three"]),
        ("team!=a", ["two", "four"]),
        ("team in (a,b)", ["one", "two", "three"]),
        ("team notin (a)", ["two", "four"]),
        ("team", ["one", "two", "three"]),
        ("!team", ["four"]),
        ("rank>1", ["two", "three"]),
        ("rank<2", ["one"]),
        ("team=a,rank>2", ["three"]),
    ],
)
def test_label_selectors(raw: Raw, selector: str, expected: list[str]) -> None:
    _cm(raw, "one", team="a", rank="1")
    _cm(raw, "two", team="b", rank="2")
    _cm(raw, "three", team="a", rank="3")
    _cm(raw, "four")
    from urllib.parse import quote

    code, _, body = raw.get(f"{NS}/configmaps?labelSelector={quote(selector)}")
    assert code == 200
    assert sorted(_names(body)) == sorted(expected)


def test_invalid_selectors_are_400(raw: Raw) -> None:
    code, _, body = raw.get(f"{NS}/configmaps?labelSelector=a%20in%20b")
    assert code == 400
    # labels.Parse's own message, as kube-apiserver returns it (mcm.runtime.labels is the parser).
    assert body["message"] == "unable to parse requirement: found 'b' expected: '('"
    code, _, body = raw.get(f"{NS}/configmaps?labelSelector=a%3Db%2C")
    assert (code, body["message"]) == (400, "found '', expected: identifier after ','")
    assert raw.get(f"{NS}/configmaps?fieldSelector=spec.nope%3Dx")[0] == 400


def test_field_selector_pod_node_name_including_empty(raw: Raw) -> None:
    raw.post(f"{NS}/pods", pod("on", node="n1"))
    raw.post(f"{NS}/pods", pod("off"))
    _, _, body = raw.get(f"{NS}/pods?fieldSelector=spec.nodeName%3Dn1")
    assert _names(body) == ["on"]
    _, _, body = raw.get(f"{NS}/pods?fieldSelector=spec.nodeName%3D")
    assert _names(body) == ["off"]
    _, _, body = raw.get("/api/v1/pods?fieldSelector=metadata.name%3Doff,metadata.namespace%3Ddefault")
    assert _names(body) == ["off"]


def test_pagination_is_consistent_snapshot(raw: Raw) -> None:
    for i in range(5):
        _cm(raw, f"p{i}")
    code, _, first = raw.get(f"{NS}/configmaps?limit=2")
    assert code == 200 and _names(first) == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    raw.delete(f"{NS}/configmaps/p3")
    _cm(raw, "p5")
    _, _, second = raw.get(f"{NS}/configmaps?limit=2&continue={token}")
    assert _names(second) == ["p2", "p3"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    _, _, third = raw.get(f"{NS}/configmaps?limit=2&continue={second['metadata']['continue']}")
    assert _names(third) == ["p4"] and "continue" not in third["metadata"]


def test_remaining_item_count_absent_with_selector_and_rv0_ignores_limit(raw: Raw) -> None:
    for i in range(3):
        _cm(raw, f"r{i}", k="v")
    _, _, body = raw.get(f"{NS}/configmaps?limit=1&labelSelector=k%3Dv")
    assert "remainingItemCount" not in body["metadata"] and body["metadata"]["continue"]
    _, _, body = raw.get(f"{NS}/configmaps?limit=1&resourceVersion=0")
    assert len(body["items"]) == 3 and "continue" not in body["metadata"]


def test_continue_token_expired_and_malformed(raw: Raw, emulator: Emulator) -> None:
    for i in range(3):
        _cm(raw, f"e{i}")
    _, _, first = raw.get(f"{NS}/configmaps?limit=1")
    _cm(raw, "later")
    emulator.compact()
    code, _, status = raw.get(f"{NS}/configmaps?limit=1&continue={first['metadata']['continue']}")
    assert code == 410 and status["reason"] == "Expired"
    assert raw.get(f"{NS}/configmaps?continue=%21%21")[0] == 400


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "resourceVersionMatch=Exact",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        ("resourceVersion=1&resourceVersionMatch=Bogus", 'Unsupported value: "Bogus"'),
        ("resourceVersion=0&resourceVersionMatch=Exact", 'resourceVersionMatch "exact" is forbidden'),
    ],
)
def test_list_option_validation_422(raw: Raw, query: str, message: str) -> None:
    code, _, status = raw.get(f"{NS}/configmaps?{query}")
    assert code == 422
    assert status["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    assert message in status["message"]
    assert status["details"]["group"] == "meta.k8s.io" and status["details"]["kind"] == "ListOptions"


def test_list_exact_returns_past_state(raw: Raw) -> None:
    obj = _cm(raw, "past")
    rv = obj["metadata"]["resourceVersion"]
    raw.patch(f"{NS}/configmaps/past", {"data": {"a": "b"}})
    _cm(raw, "future")
    _, _, body = raw.get(f"{NS}/configmaps?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert _names(body) == ["past"] and "data" not in body["items"][0]
    assert body["metadata"]["resourceVersion"] == rv


def test_get_rv_too_large_is_504(emulator: Emulator) -> None:
    emulator.api.freshness_timeout = 0.2
    raw = Raw(emulator.url)
    code, headers, status = raw.get(f"{NS}/configmaps?resourceVersion={emulator.store.rv + 1000}")
    assert code == 504 and headers["retry-after"] == "1"
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_watch_framing_and_initial_added(raw: Raw, emulator: Emulator) -> None:
    _cm(raw, "w1")
    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&timeoutSeconds=1")
    assert reader.status == 200
    assert reader.headers["transfer-encoding"] == "chunked"
    assert reader.headers["content-type"] == "application/json"
    lines = list(reader.lines())
    assert lines and all(line.endswith(b"\n") and line.strip() for line in lines)
    assert [__import__("json").loads(x)["type"] for x in lines] == ["ADDED"]


def test_watch_from_rv_delivers_later_events_in_order(raw: Raw, emulator: Emulator) -> None:
    start = _cm(raw, "before")["metadata"]["resourceVersion"]
    _cm(raw, "after1")
    raw.patch(f"{NS}/configmaps/after1", {"data": {"x": "y"}})
    raw.delete(f"{NS}/configmaps/before")
    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=1&resourceVersion={start}&timeoutSeconds=1")
    events = list(reader.events())
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "after1"),
        ("MODIFIED", "after1"),
        ("DELETED", "before"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


def test_watch_selector_transitions(raw: Raw, emulator: Emulator) -> None:
    start = _cm(raw, "t", team="a")["metadata"]["resourceVersion"]
    raw.patch(f"{NS}/configmaps/t", {"metadata": {"labels": {"team": "b"}}})
    raw.patch(f"{NS}/configmaps/t", {"metadata": {"labels": {"team": "a"}}})
    path = f"{NS}/configmaps?watch=true&labelSelector=team%3Da&resourceVersion={start}&timeoutSeconds=1"
    events = list(WatchReader(emulator.url, path).events())
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]
    deleted = events[0]["object"]
    assert deleted["metadata"]["labels"] == {"team": "a"}
    assert int(deleted["metadata"]["resourceVersion"]) > int(start)


def test_watch_live_events_and_bookmark_now(raw: Raw, emulator: Emulator) -> None:
    rv = _cm(raw, "x")["metadata"]["resourceVersion"]
    reader = WatchReader(
        emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"
    )
    _cm(raw, "live")
    event = reader.next_event()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "live")
    emulator.watches.bookmark_now()
    bookmark = reader.next_event()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "ConfigMap" and bookmark["object"]["apiVersion"] == "v1"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(
        event["object"]["metadata"]["resourceVersion"]
    )
    emulator.watches.drop("close")
    assert list(reader.lines()) == []


def test_watch_no_bookmark_unless_allowed(raw: Raw, emulator: Emulator) -> None:
    rv = _cm(raw, "nb")["metadata"]["resourceVersion"]
    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    emulator.wait_for(lambda: bool(emulator.watches.open_watches()), 2)
    emulator.watches.bookmark_now()
    assert list(reader.lines()) == []


def test_watch_periodic_bookmarks(emulator: Emulator) -> None:
    emulator.watches.bookmark_interval = 0.1
    reader = WatchReader(
        emulator.url, f"{NS}/configmaps?watch=true&resourceVersion=1&allowWatchBookmarks=true"
    )
    assert reader.next_event()["type"] == "BOOKMARK"
    reader.close()


def test_watch_too_old_rv_gets_410_error_event(raw: Raw, emulator: Emulator) -> None:
    _cm(raw, "old")
    emulator.compact()
    for _ in range(2):
        reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion=1")
        assert reader.status == 200
        events = list(reader.events())
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


def test_watch_non_numeric_rv_is_400(raw: Raw) -> None:
    assert raw.get(f"{NS}/configmaps?watch=true&resourceVersion=abc")[0] == 400


def test_watch_drop_expire_and_reset(raw: Raw, emulator: Emulator) -> None:
    rv = _cm(raw, "d")["metadata"]["resourceVersion"]
    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={rv}")
    emulator.wait_for(lambda: bool(emulator.watches.open_watches()), 2)
    emulator.watches.drop("expire")
    events = list(reader.events())
    assert events[-1]["type"] == "ERROR" and events[-1]["object"]["code"] == 410
    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={rv}")
    emulator.wait_for(lambda: bool(emulator.watches.open_watches()), 2)
    emulator.watches.drop("reset")
    with pytest.raises(Exception):  # noqa: B017 - any protocol error: the stream was aborted
        list(reader.lines())


def test_slow_watcher_is_ended_without_blocking_writers() -> None:
    from mcm.emulator.store import VersionedStore
    from mcm.emulator.watch import Watcher

    store = VersionedStore()
    watcher = Watcher("configmaps", "ConfigMap", "v1", None, lambda obj: True, bookmarks=False, max_queue=3)
    store.add_watcher("configmaps", watcher)
    for i in range(6):
        store.commit("configmaps", "ADDED", {"metadata": {"name": f"q{i}", "namespace": "d"}}, None)
    assert watcher.closed == "slow"
    assert not watcher.queue
    assert len(store.items("configmaps")) == 6


def test_python_client_watch_and_typed_list(emulator: Emulator, kubeconfig: str) -> None:
    from kubernetes import client, config, watch

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    api.create_namespaced_config_map("default", {"metadata": {"name": "typed"}, "data": {"a": "b"}})
    listing = api.list_namespaced_config_map("default")
    assert [c.metadata.name for c in listing.items] == ["typed"]
    seen: list[tuple[str, str]] = []
    stream = watch.Watch().stream(
        api.list_namespaced_config_map,
        "default",
        resource_version=listing.metadata.resource_version,
        timeout_seconds=2,
    )
    api.patch_namespaced_config_map("typed", "default", {"data": {"a": "c"}})
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        break
    assert seen == [("MODIFIED", "typed")]


def test_rechunked_watch_still_parses_in_python_client(emulator: Emulator, kubeconfig: str) -> None:
    from kubernetes import client, config, watch

    emulator.watches.rechunk = True
    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    for i in range(5):
        api.create_namespaced_config_map(
            "default", {"metadata": {"name": f"rc{i}"}, "data": {"k": "v" * 100}}
        )
    names = [
        e["object"].metadata.name
        for e in watch.Watch().stream(api.list_namespaced_config_map, "default", timeout_seconds=1)
    ]
    assert names == [f"rc{i}" for i in range(5)]


def test_pods_by_node_index_follows_rebinding_and_deletion(raw: Raw, emulator: Emulator) -> None:
    raw.post(f"{NS}/pods", pod("a", node="n1"))
    raw.post(f"{NS}/pods", pod("b", node="n2"))
    raw.post(f"{NS}/pods", pod("c"))
    assert emulator.store.items_by_index("pods", "spec.nodeName", "n1") is not None
    _, _, body = raw.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
    assert _names(body) == ["a"]
    raw.delete(f"{NS}/pods/a", {"gracePeriodSeconds": 0})
    _, _, body = raw.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
    assert _names(body) == []
    _, _, body = raw.get(f"{NS}/pods?fieldSelector=spec.nodeName%3Dn2,metadata.name%3Db")
    assert _names(body) == ["b"]


def test_history_size_and_age_limits_raise_the_floor() -> None:
    from mcm.emulator.store import VersionedStore

    store = VersionedStore(history_size=2)
    for i in range(4):
        store.commit("configmaps", "ADDED", {"metadata": {"name": f"h{i}", "namespace": "d"}}, None)
    assert [c.rv for c in store.history("configmaps")] == [4, 5]
    assert store.floor("configmaps") == 3
    aged = VersionedStore(history_age=0.0)
    aged.commit("configmaps", "ADDED", {"metadata": {"name": "a", "namespace": "d"}}, None)
    aged.commit("configmaps", "ADDED", {"metadata": {"name": "b", "namespace": "d"}}, None)
    assert [c.rv for c in aged.history("configmaps")] == [3]
    assert aged.floor("configmaps") == 2


def test_initial_events_do_not_count_against_the_slow_watcher_limit() -> None:
    from mcm.emulator.store import VersionedStore
    from mcm.emulator.watch import Watcher

    store = VersionedStore()
    watcher = Watcher("configmaps", "ConfigMap", "v1", None, lambda obj: True, bookmarks=False, max_queue=2)
    for _ in range(5):
        watcher.push(b'{"type":"ADDED"}\n')
    store.add_watcher("configmaps", watcher)
    store.commit("configmaps", "ADDED", {"metadata": {"name": "live", "namespace": "d"}}, None)
    assert watcher.closed is None and len(watcher.queue) == 6

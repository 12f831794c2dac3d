"""Watch fan-out: commits never encode; each change is encoded once per event type for all watchers."""

from __future__ import annotations

import threading
from typing import Any

from mcm.emulator.store import VersionedStore
from mcm.emulator.watch import Watcher


def _watcher(labels: dict[str, str] | None = None) -> Watcher:
    def match(obj: dict[str, Any]) -> bool:
        return labels is None or obj["metadata"].get("labels") == labels

    return Watcher("configmaps", "ConfigMap", "v1", None, match, bookmarks=False)


def test_commit_queues_events_without_encoding() -> None:
    store = VersionedStore()
    watchers = [_watcher() for _ in range(3)]
    for watcher in watchers:
        store.add_watcher("configmaps", watcher)
    change = store.commit("configmaps", "ADDED", {"metadata": {"name": "a", "namespace": "d"}}, None)
    assert change.new._full is None and change.new._item is None
    lines = [watcher.render(watcher.queue[0]) for watcher in watchers]
    assert lines[0].startswith(b'{"type":"ADDED","object":{"kind":')
    assert all(line is lines[0] for line in lines)


def test_selector_exit_is_a_deleted_event_rendered_once() -> None:
    store = VersionedStore()
    watchers = [_watcher({"a": "1"}) for _ in range(2)]
    for watcher in watchers:
        store.add_watcher("configmaps", watcher)
    first = store.commit(
        "configmaps", "ADDED", {"metadata": {"name": "x", "namespace": "d", "labels": {"a": "1"}}}, None
    )
    second = store.commit("configmaps", "MODIFIED", {"metadata": {"name": "x", "namespace": "d"}}, first.new)
    rendered = [[w.render(item) for item in w.queue] for w in watchers]
    assert [line.split(b",")[0] for line in rendered[0]] == [b'{"type":"ADDED"', b'{"type":"DELETED"']
    assert rendered[0][1] is rendered[1][1]
    assert f'"resourceVersion":"{second.rv}"'.encode() in rendered[0][1]


def test_racing_renderers_share_one_encoding() -> None:
    store = VersionedStore()
    watchers = [_watcher() for _ in range(8)]
    for watcher in watchers:
        store.add_watcher("configmaps", watcher)
    big = {"metadata": {"name": "big", "namespace": "d"}, "data": {str(i): "v" * 50 for i in range(2000)}}
    store.commit("configmaps", "ADDED", big, None)
    results: list[bytes] = []
    gate = threading.Barrier(len(watchers))

    def render(watcher: Watcher) -> None:
        gate.wait()
        results.append(watcher.render(watcher.queue[0]))

    threads = [threading.Thread(target=render, args=(w,)) for w in watchers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(results) == len(watchers)
    assert all(r is results[0] for r in results)

"""RealFIFO (client-go 0.33+ in-order queue) and an informer running on it."""

from __future__ import annotations

import threading
from typing import Any

from mcm.runtime.cache import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Deltas,
    DeltaType,
    Indexer,
    RealFIFO,
    SharedIndexInformer,
    meta_namespace_index_func,
    wait_for_cache_sync,
)
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, make_obj
from .recorder import Recorder

A, U, D, R, S = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED, DeltaType.REPLACED, DeltaType.SYNC


def obj(name: str, value: int = 0) -> dict[str, Any]:
    o = make_obj(name)
    o["value"] = value
    return o


def drain(fifo: RealFIFO) -> list[tuple[DeltaType, str, Any]]:
    out: list[tuple[DeltaType, str, Any]] = []

    def take(deltas: Deltas, initial: bool) -> None:
        assert len(deltas) == 1
        d = deltas[0]
        if isinstance(d.object, DeletedFinalStateUnknown):
            out.append((d.type, d.object.key, ("tombstone", d.object.obj["value"] if d.object.obj else None)))
        else:
            out.append((d.type, d.object["metadata"]["name"], d.object["value"]))

    while len(fifo):
        fifo.pop(take, timeout=1)
    return out


def test_one_entry_per_event_in_arrival_order() -> None:
    fifo = RealFIFO()
    fifo.add(obj("a", 1))
    fifo.add(obj("b", 2))
    fifo.update(obj("a", 3))
    fifo.delete(obj("a", 4))
    assert drain(fifo) == [(A, "a", 1), (A, "b", 2), (U, "a", 3), (D, "a", 4)]


def test_replace_queues_tombstones_first_then_replaced() -> None:
    known = Indexer()
    known.add(obj("k", 5))
    fifo = RealFIFO(known_objects=known)
    fifo.add(obj("q", 1))
    fifo.add(obj("gone", 2))
    fifo.delete(obj("gone", 3))  # last entry already a deletion: no extra tombstone
    fifo.replace([obj("new", 8)], "9")
    assert drain(fifo) == [
        (A, "q", 1),
        (A, "gone", 2),
        (D, "gone", 3),
        (D, "ns/q", ("tombstone", 1)),
        (D, "ns/k", ("tombstone", 5)),
        (R, "new", 8),
    ]


def test_resync_skips_keys_with_queued_entries_and_sync_counts_initial_entries() -> None:
    known = Indexer()
    known.add(obj("a", 1))
    known.add(obj("b", 2))
    fifo = RealFIFO(known_objects=known)
    fifo.replace([obj("a", 1), obj("b", 2)], "1")
    assert not fifo.has_synced()
    assert [(t, n) for t, n, _ in drain(fifo)] == [(R, "a"), (R, "b")]
    assert fifo.has_synced()
    fifo.update(obj("a", 3))
    fifo.resync()
    assert [(t, n) for t, n, _ in drain(fifo)] == [(U, "a"), (S, "b")]


def test_informer_on_real_fifo_delivers_every_event() -> None:
    server = FakeServer()
    server.create(make_obj("a"))
    informer = SharedIndexInformer(
        server, 0.0, {NAMESPACE_INDEX: meta_namespace_index_func}, clock=FakeClock(), use_real_fifo=True
    )
    handler = Recorder()
    informer.add_event_handler(handler)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert wait_for_cache_sync(stop, informer.has_synced, timeout=5)
        server.update(make_obj("a"))
        server.create(make_obj("b"))
        server.delete("ns/a")
        assert handler.wait_for(4) == [
            ("add", "a", True),
            ("update", "a", "change"),
            ("add", "b", False),
            ("delete", "a"),
        ]
    finally:
        stop.set()
        thread.join(5)

"""SharedIndexInformer: handler sequences, late handlers, resync, isolation of slow or failing handlers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcm.runtime import errors as runtime_errors
from mcm.runtime.cache import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Delta,
    DeltaType,
    FilteringResourceEventHandler,
    Indexer,
    InformerStartedError,
    InformerStoppedError,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    deletion_handling_meta_namespace_key_func,
    meta_namespace_index_func,
    process_deltas,
    wait_for_cache_sync,
)
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, make_obj
from .recorder import Recorder, name_of


class Running:
    def __init__(self, default_resync: float = 0.0, clock: FakeClock | None = None) -> None:
        self.server = FakeServer()
        self.server.create(make_obj("a"))
        self.clock = clock or FakeClock()
        self.informer = SharedIndexInformer(
            self.server,
            default_resync,
            {NAMESPACE_INDEX: meta_namespace_index_func},
            clock=self.clock,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.informer.run, args=(self.stop,), daemon=True)

    def start(self) -> None:
        self.thread.start()
        assert wait_for_cache_sync(self.stop, self.informer.has_synced, timeout=5)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(5)
        assert not self.thread.is_alive()


@pytest.fixture
def running() -> Iterator[Running]:
    r = Running()
    yield r
    r.stop.set()


def test_handler_sees_initial_add_then_update_then_delete(running: Running) -> None:
    handler = Recorder()
    registration = running.informer.add_event_handler(ResourceEventHandlerFuncs(None, None, None))
    running.informer.add_event_handler(handler)
    running.start()
    running.server.update(make_obj("a"))
    running.server.create(make_obj("b"))
    running.server.delete("ns/a")
    events = handler.wait_for(4)
    # order is guaranteed per object (one key's deltas are popped together), not across objects
    assert [e for e in events if e[1] == "a"] == [
        ("add", "a", True),
        ("update", "a", "change"),
        ("delete", "a"),
    ]
    assert [e for e in events if e[1] == "b"] == [("add", "b", False)]
    assert registration.has_synced()
    assert sorted(running.informer.get_indexer().list_keys()) == ["ns/b"]
    running.finish()


def test_indexer_is_updated_before_the_notification(running: Running) -> None:
    seen: list[bool] = []
    indexer = running.informer.get_indexer()
    running.informer.add_event_handler(
        ResourceEventHandlerFuncs(on_add=lambda o: seen.append(indexer.get(o) is o))
    )
    running.start()
    running.server.create(make_obj("b"))
    wait_for_cache_sync(running.stop, lambda: len(seen) == 2, timeout=5)
    assert seen == [True, True]
    running.finish()


def test_late_handler_gets_existing_objects_as_initial_adds(running: Running) -> None:
    running.server.create(make_obj("b"))
    early = Recorder()
    running.informer.add_event_handler(early)
    running.start()
    gate = threading.Event()
    late = Recorder(gate=gate)
    registration = running.informer.add_event_handler(late)
    assert not registration.has_synced()  # its replay has not been processed yet
    gate.set()
    assert sorted(late.wait_for(2)) == [("add", "a", True), ("add", "b", True)]
    assert wait_for_cache_sync(running.stop, registration.has_synced, timeout=5)
    running.server.create(make_obj("c"))
    assert late.wait_for(3)[-1] == ("add", "c", False)
    assert early.wait_for(3)[-1] == ("add", "c", False)
    running.finish()


def test_resync_delivers_equal_objects_only_to_handlers_due() -> None:
    r = Running(default_resync=30.0)
    resyncing, quiet = Recorder(), Recorder()
    r.informer.add_event_handler(resyncing)
    r.informer.add_event_handler(quiet, resync_period=0)
    r.start()
    r.clock.block_until_waiters()  # the reflector's resync timer
    r.clock.step(30)
    assert resyncing.wait_for(2)[-1] == ("update", "a", "sync")
    r.server.create(make_obj("b"))
    assert quiet.wait_for(2) == [("add", "a", True), ("add", "b", False)]
    assert resyncing.wait_for(3)[-1] == ("add", "b", False)
    assert r.server.list_calls and len(r.server.list_calls) == 1  # resync never lists
    r.finish()


def test_resync_period_below_one_second_is_raised_and_below_check_period_lowers_it() -> None:
    r = Running(default_resync=60.0)
    registration = r.informer.add_event_handler(Recorder(), resync_period=0.2)
    assert registration.resync_period == 1.0
    assert r.informer.resync_check_period == 1.0
    r.start()
    late = r.informer.add_event_handler(Recorder(), resync_period=0.5)
    assert late.resync_period == 1.0
    r.finish()


def test_slow_handler_does_not_block_other_handlers_or_the_cache(running: Running) -> None:
    gate = threading.Event()
    slow, fast = Recorder(gate=gate), Recorder()
    running.informer.add_event_handler(slow)
    running.informer.add_event_handler(fast)
    running.thread.start()
    for i in range(50):
        running.server.create(make_obj(f"o{i}"))
    assert len(fast.wait_for(51)) == 51
    assert len(running.informer.get_indexer().list_keys()) == 51
    assert slow.events == []
    gate.set()
    events = slow.wait_for(51)
    assert events == fast.events  # same notifications, same order, on its own thread
    assert slow.threads.isdisjoint(fast.threads)
    running.finish()


def test_handler_exception_is_reported_and_delivery_goes_on(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[BaseException] = []
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", False)
    monkeypatch.setattr(runtime_errors, "PANIC_HANDLERS", [reported.append])
    failing = Recorder(fail_on="a")
    running.informer.add_event_handler(failing)
    running.start()
    running.server.create(make_obj("b"))
    assert failing.wait_for(2) == [("add", "a", True), ("add", "b", False)]
    assert any("handler failed on a" in str(e) for e in reported)
    running.finish()


def test_deletion_missed_during_a_gap_arrives_as_tombstone_with_last_state(running: Running) -> None:
    running.server.create(make_obj("b"))
    handler = Recorder()
    running.informer.add_event_handler(handler)
    running.start()
    running.server.delete_silently("ns/b")  # deleted and compacted while nobody watched
    running.server.close_watches()
    running.clock.block_until_waiters()
    running.clock.step(2.0)  # one jittered back-off step, then relist
    assert handler.wait_for(3)[-1] == ("delete", "tombstone:ns/b")
    assert running.informer.get_indexer().list_keys() == ["ns/a"]
    running.finish()


def test_removed_handler_gets_nothing_more(running: Running) -> None:
    keep, removed = Recorder(), Recorder()
    running.informer.add_event_handler(keep)
    registration = running.informer.add_event_handler(removed)
    running.start()
    removed.wait_for(1)
    running.informer.remove_event_handler(registration)
    running.informer.remove_event_handler(registration)  # idempotent
    running.server.create(make_obj("b"))
    keep.wait_for(2)
    assert removed.events == [("add", "a", True)]
    running.finish()


def test_lifecycle_errors(running: Running) -> None:
    assert not running.informer.has_synced()
    running.start()
    with pytest.raises(InformerStartedError, match="informer has already started"):
        running.informer.add_indexers({"x": meta_namespace_index_func})
    running.informer.run(running.stop)  # a second run returns at once
    running.finish()
    assert running.informer.is_stopped()
    with pytest.raises(InformerStoppedError, match="because it has stopped already"):
        running.informer.add_event_handler(Recorder())


def test_process_deltas_maps_added_for_cached_key_to_update_and_updated_for_new_key_to_add() -> None:
    store = Indexer(deletion_handling_meta_namespace_key_func)
    handler = Recorder()
    cached = make_obj("a", rv="1")
    store.add(cached)
    process_deltas(
        handler,
        store,
        [Delta(DeltaType.ADDED, make_obj("a", rv="2")), Delta(DeltaType.UPDATED, make_obj("b", rv="3"))],
        False,
    )
    process_deltas(handler, store, [Delta(DeltaType.DELETED, DeletedFinalStateUnknown("ns/b", None))], False)
    assert handler.events == [("update", "a", "change"), ("add", "b", False), ("delete", "tombstone:ns/b")]
    assert store.list_keys() == ["ns/a"]


def test_filtering_handler_turns_updates_into_adds_and_deletes() -> None:
    inner = Recorder()
    handler = FilteringResourceEventHandler(
        lambda o: o["metadata"].get("labels", {}).get("keep") == "y", inner
    )
    kept, dropped = make_obj("k", rv="1", keep="y"), make_obj("k", rv="2", keep="n")
    handler.on_add(dropped, True)
    handler.on_update(dropped, kept)
    handler.on_update(kept, kept)
    handler.on_update(kept, dropped)
    handler.on_update(dropped, dropped)
    handler.on_delete(kept)
    assert inner.events == [("add", "k", False), ("update", "k", "sync"), ("delete", "k"), ("delete", "k")]


def _marker_segments(events: list[tuple[Any, ...]]) -> list[list[str]]:
    """Names synced between consecutive marker adds (``mN``), sorted per segment."""
    segments: list[list[str]] = [[]]
    for event in events:
        if event[0] == "add" and event[1].startswith("m"):
            segments.append([])
        elif event[0] == "update" and event[2] == "sync":
            segments[-1].append(event[1])
    return [sorted(s) for s in segments]


def test_listener_resync_periods_are_honoured_per_handler() -> None:
    r = Running(default_resync=1.0)
    h1, h2, h3 = Recorder(), Recorder(), Recorder()
    r.informer.add_event_handler(h1, resync_period=1.0)
    r.informer.add_event_handler(h2, resync_period=2.0)
    r.informer.add_event_handler(h3, resync_period=3.0)
    r.start()
    r.clock.block_until_waiters()
    for second in (1, 2, 3):
        r.clock.step(1.0)
        r.clock.block_until_waiters()  # the resync timer is re-armed: this round's syncs are queued
        marker = ("add", f"m{second}", False)
        r.server.create(make_obj(f"m{second}"))  # a live add reaches every handler after its syncs
        for handler in (h1, h2, h3):
            with handler.cond:
                assert handler.cond.wait_for(lambda h=handler, m=marker: m in h.events, 5)
    assert _marker_segments(h1.events) == [["a"], ["a", "m1"], ["a", "m1", "m2"], []]
    assert _marker_segments(h2.events) == [[], ["a", "m1"], [], []]
    assert _marker_segments(h3.events) == [[], [], ["a", "m1", "m2"], []]
    r.finish()


def test_same_handler_registered_twice_gets_two_independent_registrations(running: Running) -> None:
    handler = Recorder()
    first = running.informer.add_event_handler(handler)
    running.informer.add_event_handler(handler)
    running.start()
    assert handler.wait_for(2) == [("add", "a", True), ("add", "a", True)]
    running.informer.remove_event_handler(first)
    running.server.create(make_obj("b"))
    running.server.create(make_obj("c"))
    events = handler.wait_for(4)
    assert events[2:] == [("add", "b", False), ("add", "c", False)]
    running.finish()


def test_wait_for_cache_sync_gives_up_on_stop_or_timeout() -> None:
    stop = threading.Event()
    assert not wait_for_cache_sync(stop, lambda: False, timeout=0.2)
    stop.set()
    assert not wait_for_cache_sync(stop, lambda: False)
    assert wait_for_cache_sync(stop, lambda: True)


def test_detailed_funcs_receive_the_initial_list_flag() -> None:
    seen: list[tuple[str, bool]] = []
    handler = ResourceEventHandlerDetailedFuncs(on_add=lambda o, initial: seen.append((name_of(o), initial)))
    handler.on_add(make_obj("a"), True)
    handler.on_update(make_obj("a"), make_obj("a"))  # no update function: ignored
    handler.on_delete(make_obj("a"))
    ResourceEventHandlerFuncs(on_add=lambda o: seen.append((name_of(o), False))).on_add(make_obj("b"), True)
    assert seen == [("a", True), ("b", False)]


def test_transform_applies_before_caching_and_only_before_start() -> None:
    r = Running()
    r.server.create({**make_obj("b"), "bulk": "x" * 100})

    def strip(obj: Any) -> Any:
        if isinstance(obj, dict) and "bulk" in obj:
            return {k: v for k, v in obj.items() if k != "bulk"}
        return obj

    r.informer.set_transform(strip)
    r.start()
    cached = r.informer.get_indexer().get_by_key("ns/b")
    assert cached is not None and "bulk" not in cached
    with pytest.raises(InformerStartedError):
        r.informer.set_transform(strip)
    r.finish()


def test_watch_error_handler_sees_list_failures() -> None:
    r = Running()
    errors: list[BaseException] = []
    r.informer.set_watch_error_handler(lambda reflector, err: errors.append(err))
    r.server.list_errors = [RuntimeError("list broke")]
    r.thread.start()
    r.clock.block_until_waiters()  # backing off after the failed list
    assert [str(e) for e in errors] == ["list broke"]
    r.clock.step(2.0)
    assert wait_for_cache_sync(r.stop, r.informer.has_synced, timeout=5)
    r.finish()


def test_inline_handler_runs_on_the_informers_thread_in_order_and_delivery_goes_on_after_a_failure(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[BaseException] = []
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", False)
    monkeypatch.setattr(runtime_errors, "PANIC_HANDLERS", [reported.append])
    inline, buffered = Recorder(fail_on="a"), Recorder()
    registration = running.informer.add_event_handler(inline, inline=True)
    running.informer.add_event_handler(buffered)
    running.start()
    assert registration.has_synced()
    for i in range(20):
        running.server.create(make_obj(f"o{i}"))
    running.server.delete("ns/a")
    assert inline.wait_for(22) == buffered.wait_for(22)  # same notifications, same order
    assert len(inline.threads) == 1
    assert inline.threads.isdisjoint(buffered.threads)  # not the listener thread of the other
    assert any("handler failed on a" in str(e) for e in reported)
    running.finish()


def test_inline_handler_added_late_gets_the_replay_before_registration_returns(running: Running) -> None:
    running.server.create(make_obj("b"))
    running.start()
    late = Recorder()
    registration = running.informer.add_event_handler(late, inline=True)
    assert sorted(late.events) == [("add", "a", True), ("add", "b", True)]  # no wait: already delivered
    assert registration.has_synced()
    running.server.create(make_obj("c"))
    assert late.wait_for(3)[-1] == ("add", "c", False)
    running.informer.remove_event_handler(registration)
    running.server.create(make_obj("d"))
    marker = Recorder()
    running.informer.add_event_handler(marker)
    marker.wait_for(4)  # a, b, c and d cached: "d" has been distributed
    assert sorted(e[1] for e in late.events) == ["a", "b", "c"]
    running.finish()

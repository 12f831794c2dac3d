"""Shared-informer cases of client-go's shared_informer_test.go not covered by test_shared_informer.py.

``TestResyncCheckPeriod`` (every listener's effective period as the check period drops),
``TestSharedInformerHandlerAbuse`` (handlers added and removed from many threads while events
flow) and the per-handler sync state of ``TestStateSharedInformer``: a registration is synced only
once its own handler has returned from every initial-list add.
"""

from __future__ import annotations

import threading
from typing import Any

from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedIndexInformer, wait_for_cache_sync
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, make_obj
from .recorder import Recorder
from .test_shared_informer import Running

HOUR, MINUTE = 3600.0, 60.0


def test_resync_check_period_follows_the_smallest_request_before_start() -> None:
    informer = SharedIndexInformer(FakeServer(), 12 * HOUR, clock=FakeClock())
    never = informer.add_event_handler(Recorder(), resync_period=0)
    assert informer.resync_check_period == 12 * HOUR
    assert never.resync_period == 0

    minute = informer.add_event_handler(Recorder(), resync_period=MINUTE)
    assert informer.resync_check_period == MINUTE
    assert (never.resync_period, minute.resync_period) == (0, MINUTE)

    fifty_five = informer.add_event_handler(Recorder(), resync_period=55.0)
    assert informer.resync_check_period == 55.0
    assert (never.resync_period, minute.resync_period, fifty_five.resync_period) == (0, MINUTE, 55.0)

    five = informer.add_event_handler(Recorder(), resync_period=5.0)
    assert informer.resync_check_period == 5.0
    periods = [r.resync_period for r in (never, minute, fifty_five, five)]
    assert periods == [0, MINUTE, 55.0, 5.0]


def test_an_informer_that_never_resyncs_gives_handlers_no_resync() -> None:
    informer = SharedIndexInformer(FakeServer(), 0.0, clock=FakeClock())
    registration = informer.add_event_handler(Recorder(), resync_period=30.0)
    assert informer.resync_check_period == 0.0  # 30 s is not below 0 s: nothing lowered
    assert registration.resync_period == 0.0


def test_registration_syncs_only_after_its_handler_processed_the_initial_list() -> None:
    r = Running()
    r.server.create(make_obj("b"))
    gate = threading.Event()
    slow, fast = Recorder(gate=gate), Recorder()
    slow_registration = r.informer.add_event_handler(slow)
    fast_registration = r.informer.add_event_handler(fast)
    r.start()  # the informer itself has synced
    assert wait_for_cache_sync(r.stop, fast_registration.has_synced, timeout=5)
    assert r.informer.has_synced()
    assert not slow_registration.has_synced()
    gate.set()
    assert wait_for_cache_sync(r.stop, slow_registration.has_synced, timeout=5)
    assert sorted(slow.wait_for(2)) == [("add", "a", True), ("add", "b", True)]
    r.finish()


def test_handlers_added_and_removed_from_many_threads_while_events_flow() -> None:
    r = Running()
    r.start()
    failures: list[BaseException] = []
    writer_done = threading.Event()

    def churn() -> None:
        try:
            while not writer_done.is_set():
                seen: list[Any] = []
                registration = r.informer.add_event_handler(
                    ResourceEventHandlerFuncs(on_add=seen.append, on_update=lambda o, n: None)
                )
                r.informer.remove_event_handler(registration)
        except BaseException as exc:
            failures.append(exc)

    churners = [threading.Thread(target=churn, daemon=True) for _ in range(4)]
    for thread in churners:
        thread.start()
    for i in range(200):
        r.server.create(make_obj(f"o{i}"))
        r.server.update(make_obj("a"))
    writer_done.set()
    for thread in churners:
        thread.join(5)
        assert not thread.is_alive()
    assert failures == []

    final = Recorder()
    registration = r.informer.add_event_handler(final)
    expected = {"a", *(f"o{i}" for i in range(200))}

    def final_saw_every_object() -> bool:
        with final.cond:
            return {event[1] for event in final.events if event[0] == "add"} == expected

    assert wait_for_cache_sync(r.stop, final_saw_every_object, registration.has_synced, timeout=5)
    assert len(r.informer.get_indexer().list_keys()) == 201
    r.finish()


def test_an_update_without_a_resource_version_change_is_a_sync_even_when_both_lack_one() -> None:
    informer = SharedIndexInformer(FakeServer(), 30.0, clock=FakeClock())
    registrations = [informer.add_event_handler(Recorder(), resync_period=p) for p in (0, 30.0)]
    assert not informer._processor.should_resync()  # nobody is due: no listener is syncing now
    bare_old = {"kind": "Thing", "metadata": {"name": "x", "namespace": "ns"}}
    bare_new = {"kind": "Thing", "metadata": {"name": "x", "namespace": "ns", "labels": {"a": "b"}}}
    informer.on_update(bare_old, bare_new)  # "" == "": a sync, and nobody is due
    informer.on_update(make_obj("x", rv="1"), make_obj("x", rv="1"))
    assert [r.pending() for r in registrations] == [0, 0]
    informer.on_update(make_obj("x", rv="1"), make_obj("x", rv="2"))
    assert [r.pending() for r in registrations] == [1, 1]


def test_every_handler_sees_each_objects_updates_in_order_and_ends_on_its_last_state() -> None:
    """client-go's controller ``TestUpdate``/``TestHammerController``: per object, notifications
    never go backwards, and the last one carries the object's final state."""
    r = Running()
    seen: dict[str, list[int]] = {}
    seen_lock = threading.Lock()
    out_of_order: list[str] = []

    def record(obj: Any) -> None:
        if "value" not in obj:  # the fixture's pre-existing object
            return
        name, value = obj["metadata"]["name"], int(obj["value"])
        with seen_lock:
            history = seen.setdefault(name, [])
            if history and value <= history[-1]:
                out_of_order.append(f"{name}: {value} after {history[-1]}")
            history.append(value)

    r.informer.add_event_handler(
        ResourceEventHandlerFuncs(on_add=record, on_update=lambda old, new: record(new))
    )
    r.start()
    names = [f"o{i}" for i in range(10)]

    def write(name: str) -> None:
        r.server.create({**make_obj(name), "value": 0})
        for value in range(1, 30):
            r.server.update({**make_obj(name), "value": value})

    writers = [threading.Thread(target=write, args=(name,)) for name in names]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(5)

    def all_final() -> bool:
        with seen_lock:
            return all(seen.get(name, [-1])[-1] == 29 for name in names)

    assert wait_for_cache_sync(r.stop, all_final, timeout=5)
    assert out_of_order == []
    r.finish()

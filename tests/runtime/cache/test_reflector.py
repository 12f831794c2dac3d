"""Reflector list/watch/relist rules, with a fake ListerWatcher and a fake clock."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from mcm.runtime.cache import Reflector
from mcm.runtime.client.errors import ConnectionFailed, InternalError, Timeout
from mcm.runtime.client.types import WatchEvent
from mcm.runtime.clock import FakeClock
from mcm.runtime.wait import ExponentialBackoffManager

from .fake_server import FakeServer, FakeWatch, api_error, gone, make_obj


class RecordingStore:
    """Records what a reflector writes; waits are bounded."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.ops: list[tuple[str, Any]] = []

    def _record(self, op: str, value: Any) -> None:
        with self.cond:
            self.ops.append((op, value))
            self.cond.notify_all()

    def add(self, obj: Any) -> None:
        self._record("add", obj["metadata"]["name"])

    def update(self, obj: Any) -> None:
        self._record("update", obj["metadata"]["name"])

    def delete(self, obj: Any) -> None:
        self._record("delete", obj["metadata"]["name"])

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        self._record("replace", (sorted(o["metadata"]["name"] for o in objects), resource_version))

    def resync(self) -> None:
        self._record("resync", None)

    def wait_for(self, count: int, timeout: float = 5.0) -> list[tuple[str, Any]]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.ops) >= count, timeout):
                raise TimeoutError(f"store saw {self.ops}")
            return list(self.ops)


def no_jitter(clock: FakeClock) -> ExponentialBackoffManager:
    return ExponentialBackoffManager(0.8, 30.0, 120.0, 2.0, 0.0, clock=clock)


class Harness:
    def __init__(self, store: RecordingStore | None = None, **kwargs: Any) -> None:
        self.server = FakeServer()
        self.server.create(make_obj("a"))
        self.store = store or RecordingStore()
        self.clock = FakeClock()
        self.stop = threading.Event()
        self.reflector = Reflector(
            self.server,
            self.store,
            clock=self.clock,
            rng=random.Random(7),
            backoff_manager=no_jitter(self.clock),
            init_conn_backoff_manager=no_jitter(self.clock),
            **kwargs,
        )
        self.errors: list[BaseException] = []
        self.thread: threading.Thread | None = None

    def start(self, target: str = "run") -> None:
        def body() -> None:
            try:
                if target == "run":
                    self.reflector.run(self.stop)
                else:
                    self.reflector.list_and_watch(self.stop)
            except BaseException as exc:
                self.errors.append(exc)

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(5)
        assert not self.thread.is_alive(), "reflector did not stop"


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.stop.set()


def test_lists_from_rv_zero_then_watches_from_the_lists_rv(harness: Harness) -> None:
    harness.start()
    watch = harness.server.wait_for_watches(1)
    assert harness.server.list_calls[0].resource_version == "0"
    assert harness.store.wait_for(1)[0] == ("replace", (["a"], "101"))
    opts = watch.options
    assert opts.resource_version == "101"
    assert opts.allow_watch_bookmarks is True
    assert opts.timeout_seconds is not None and 300 <= opts.timeout_seconds < 600

    harness.server.create(make_obj("b"))
    harness.server.update(make_obj("a"))
    harness.server.delete("ns/b")
    assert harness.store.wait_for(4)[1:] == [("add", "b"), ("update", "a"), ("delete", "b")]
    assert harness.reflector.last_sync_resource_version() == "104"
    harness.finish()
    assert watch.stopped.is_set()


def test_bookmark_moves_the_resource_version_without_store_changes(harness: Harness) -> None:
    harness.start()
    harness.server.wait_for_watches(1)
    harness.server.rv = 150
    harness.server.bookmark()
    harness.server.close_watches()
    second = harness.server.wait_for_watches(2)
    assert second.options.resource_version == "150"
    assert [op for op, _ in harness.store.ops] == ["replace"]
    assert len(harness.server.list_calls) == 1
    harness.finish()


def test_stream_break_after_events_rewatches_from_last_rv_without_relist(harness: Harness) -> None:
    harness.start()
    watch = harness.server.wait_for_watches(1)
    harness.server.create(make_obj("b"))
    watch.fail(ConnectionFailed("connection reset"))
    second = harness.server.wait_for_watches(2)
    assert second.options.resource_version == "102"
    assert len(harness.server.list_calls) == 1
    harness.finish()


def test_normal_close_of_a_long_watch_rewatches_at_once(harness: Harness) -> None:
    harness.start()
    harness.server.wait_for_watches(1)
    harness.clock.step(400)  # the watch lasted long enough, even with no events
    harness.server.close_watches()
    harness.server.wait_for_watches(2)
    assert len(harness.server.list_calls) == 1
    harness.finish()


def test_very_short_watch_ends_list_and_watch_and_relists_after_backoff(harness: Harness) -> None:
    harness.start()
    harness.server.wait_for_watches(1)
    harness.server.close_watches()  # closed at once with nothing received
    harness.clock.block_until_waiters()
    assert len(harness.server.list_calls) == 1
    harness.clock.step(0.8)
    harness.server.wait_for_lists(2)
    assert harness.server.list_calls[1].resource_version == "101"
    harness.finish()


def test_watch_410_relists_at_last_rv_then_falls_back_to_consistent_read(harness: Harness) -> None:
    harness.server.list_errors = [None, gone()]
    harness.start()
    watch = harness.server.wait_for_watches(1)
    watch.send(WatchEvent("ERROR", gone().status))
    harness.clock.block_until_waiters()
    harness.clock.step(0.8)
    harness.server.wait_for_lists(3)
    assert [c.resource_version for c in harness.server.list_calls] == ["0", "101", ""]
    harness.server.wait_for_watches(2)
    assert [op for op, _ in harness.store.ops] == ["replace", "replace"]
    assert watch.stopped.is_set()  # the failed watch was closed, not leaked
    harness.finish()


@pytest.mark.parametrize(
    "error",
    [gone(), Timeout({"message": "Too large resource version: 200, current: 101"})],
    ids=["expired", "too-large"],
)
def test_list_expired_or_too_large_is_retried_at_once_with_empty_rv(
    harness: Harness, error: Exception
) -> None:
    harness.server.list_errors = [error]
    harness.start()
    harness.server.wait_for_watches(1)
    assert [c.resource_version for c in harness.server.list_calls] == ["0", ""]
    # the next relist goes back to "not older than" the last synced RV
    harness.server.close_watches()
    harness.clock.block_until_waiters()
    harness.clock.step(0.8)
    harness.server.wait_for_lists(3)
    assert harness.server.list_calls[2].resource_version == "101"
    harness.finish()


@pytest.mark.parametrize(
    "error",
    [ConnectionFailed("refused", refused=True), api_error(429, "TooManyRequests")],
    ids=["refused", "429"],
)
def test_retriable_watch_open_errors_back_off_without_relisting(harness: Harness, error: Exception) -> None:
    harness.server.watch_errors = [error, error]
    harness.start()
    harness.server.wait_for_watches(1)
    harness.clock.block_until_waiters()
    harness.clock.step(0.79)
    assert len(harness.server.watch_calls) == 1
    harness.clock.step(0.011)
    harness.server.wait_for_watches(2)
    harness.clock.block_until_waiters()
    harness.clock.step(1.6)  # the init-connection back-off grows too
    harness.server.wait_for_watches(3)
    assert len(harness.server.list_calls) == 1
    harness.finish()


def test_other_watch_open_errors_end_list_and_watch(harness: Harness) -> None:
    harness.server.watch_errors = [InternalError({"message": "boom"})]
    with pytest.raises(InternalError):
        harness.reflector.list_and_watch(harness.stop)


def test_429_error_event_during_watch_backs_off_and_rewatches(harness: Harness) -> None:
    harness.start()
    watch = harness.server.wait_for_watches(1)
    watch.send(WatchEvent("ERROR", api_error(429, "TooManyRequests").status))
    harness.clock.block_until_waiters()
    harness.clock.step(0.8)
    harness.server.wait_for_watches(2)
    assert len(harness.server.list_calls) == 1
    harness.finish()


def test_backoff_doubles_to_30s_between_failed_lists_and_resets_after_quiet_period(
    harness: Harness,
) -> None:
    harness.server.list_errors = [InternalError({"message": "down"})] * 8
    harness.start()
    for n, delay in enumerate([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0], start=1):
        harness.server.wait_for_lists(n)
        harness.clock.block_until_waiters()
        harness.clock.step(delay - 0.05)
        assert len(harness.server.list_calls) == n, f"relisted before {delay}s"
        harness.clock.step(0.05 + 1e-6)  # float sums may miss the deadline by one ulp
    harness.server.wait_for_watches(1)  # the 9th list succeeded
    harness.clock.step(121)  # a long healthy watch: the back-off starts over
    harness.server.close_watches()
    harness.server.wait_for_watches(2)
    harness.server.watches[-1].send(WatchEvent("ERROR", gone().status))
    harness.clock.block_until_waiters()
    harness.clock.step(0.8)
    harness.server.wait_for_lists(10)
    harness.finish()


def test_resync_calls_store_resync_every_period_when_should_resync_agrees() -> None:
    allow = threading.Event()
    h = Harness(resync_period=30.0, should_resync=allow.is_set)
    h.start()
    h.server.wait_for_watches(1)
    h.clock.block_until_waiters()
    h.clock.step(30)
    h.clock.block_until_waiters()
    assert [op for op, _ in h.store.ops] == ["replace"]
    allow.set()
    h.clock.step(30)
    assert h.store.wait_for(2)[-1] == ("resync", None)
    h.finish()


def test_wrong_kind_and_metadata_less_events_are_skipped() -> None:
    h = Harness(expected_kind="Thing")
    h.start()
    watch = h.server.wait_for_watches(1)
    watch.send(WatchEvent("ADDED", {"kind": "Other", "metadata": {"name": "x", "resourceVersion": "500"}}))
    watch.send(WatchEvent("ADDED", {"kind": "Thing"}))
    h.server.create(make_obj("b"))
    assert h.store.wait_for(2)[1] == ("add", "b")
    assert h.reflector.last_sync_resource_version() == "102"
    h.finish()


def test_stop_ends_a_blocked_watch_promptly(harness: Harness) -> None:
    harness.start(target="list_and_watch")
    watch: FakeWatch = harness.server.wait_for_watches(1)
    harness.finish()
    assert watch.stopped.is_set()
    assert harness.errors == []


def test_watch_timeouts_are_jittered_between_300_and_600_seconds(harness: Harness) -> None:
    harness.start()
    harness.server.wait_for_watches(1)
    for n in range(2, 6):
        harness.clock.step(400)
        harness.server.close_watches()
        harness.server.wait_for_watches(n)
    timeouts = {c.timeout_seconds for c in harness.server.watch_calls}
    assert len(timeouts) > 1
    assert all(t is not None and 300 <= t < 600 for t in timeouts)
    harness.finish()


def _relist(h: Harness, count: int) -> None:
    h.clock.step(400)
    h.server.watches[-1].send(WatchEvent("ERROR", gone().status))
    h.clock.block_until_waiters()
    h.clock.step(0.8)
    h.server.wait_for_lists(count)


def test_later_relists_are_unpaginated_unless_the_first_list_was_paginated() -> None:
    h = Harness()
    h.start()
    h.server.wait_for_watches(1)
    assert h.server.list_calls[0].limit == 500  # RV "0": paginated request, served whole
    _relist(h, 2)
    assert (h.server.list_calls[1].resource_version, h.server.list_calls[1].limit) == ("101", None)
    h.finish()


def test_a_paginated_first_list_keeps_later_relists_paginated() -> None:
    h = Harness()
    for i in range(600):
        h.server.create(make_obj(f"o{i:03d}"))
    h.start()
    h.server.wait_for_watches(1)
    assert [c.continue_ for c in h.server.list_calls] == [None, "500"]
    _relist(h, 3)
    assert h.server.list_calls[2].limit == 500
    h.finish()


def test_watch_list_page_size_forces_the_page_size() -> None:
    h = Harness(watch_list_page_size=2)
    h.server.create(make_obj("b"))
    h.server.create(make_obj("c"))
    h.start()
    h.server.wait_for_watches(1)
    assert [(c.limit, c.continue_) for c in h.server.list_calls] == [(2, None), (2, "2")]
    assert h.store.wait_for(1)[0] == ("replace", (["a", "b", "c"], "103"))
    h.finish()


def test_a_resource_version_updater_store_hears_every_watch_event_rv_but_not_the_lists() -> None:
    class UpdaterStore(RecordingStore):
        def __init__(self) -> None:
            super().__init__()
            self.resource_versions: list[str] = []

        def update_resource_version(self, rv: str) -> None:
            self._record("rv", rv)
            self.resource_versions.append(rv)

    store = UpdaterStore()
    h = Harness(store)
    h.start()
    watch = h.server.wait_for_watches(1)
    for event_type, rv in (("ADDED", "110"), ("MODIFIED", "120"), ("BOOKMARK", "130"), ("DELETED", "140")):
        watch.send(WatchEvent(event_type, make_obj("b", rv=rv)))
    store.wait_for(1 + 3 + 4)  # replace, three store changes, four RV updates
    assert store.resource_versions == ["110", "120", "130", "140"]
    assert store.ops[0] == ("replace", (["a"], "101"))
    h.finish()

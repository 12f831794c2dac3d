"""The cache mutation detector, and that the informer pipeline never changes the objects it caches."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcm.runtime import errors as runtime_errors
from mcm.runtime.cache import (
    CacheMutationDetector,
    CacheMutationError,
    DeletedFinalStateUnknown,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    wait_for_cache_sync,
)
from mcm.runtime.cache.mutation_detector import ENV_VAR
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, make_obj


def test_detector_reports_changed_objects_and_forgets_old_copies() -> None:
    clock = FakeClock()
    failures: list[CacheMutationError] = []
    detector = CacheMutationDetector("things", retain=10.0, clock=clock, on_failure=failures.append)
    kept, changed = make_obj("kept"), make_obj("changed")
    detector.add_object(kept)
    detector.add_object(changed)
    detector.add_object(DeletedFinalStateUnknown("ns/x", None))
    detector.compare_objects()
    assert failures == []
    changed["metadata"]["labels"] = {"oops": "1"}
    detector.compare_objects()
    assert [str(f) for f in failures] == ["things: cached object modified: Thing ns/changed"]
    clock.step(11)
    detector.compare_objects()  # the copy expired: no second report
    assert len(failures) == 1


def _informer(server: FakeServer, clock: FakeClock) -> SharedIndexInformer:
    return SharedIndexInformer(server, 0.0, None, clock=clock, detect_mutations=True)


def _run(mutate: bool, monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    reported: list[BaseException] = []
    monkeypatch.setattr(runtime_errors, "ERROR_HANDLERS", [lambda err, ctx: reported.append(err)])
    server, clock = FakeServer(), FakeClock()
    server.create(make_obj("a"))
    informer = _informer(server, clock)
    seen = threading.Event()

    def on_update(old: Any, new: Any) -> None:
        if mutate:
            new["metadata"].setdefault("annotations", {})["touched"] = "yes"
        seen.set()

    informer.add_event_handler(ResourceEventHandlerFuncs(on_update=on_update))
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert wait_for_cache_sync(stop, informer.has_synced, timeout=5)
        server.update(make_obj("a"))
        assert seen.wait(5)
        clock.block_until_waiters()
        clock.step(1.0)
        clock.block_until_waiters()  # the detector compared and is waiting for its next round
    finally:
        stop.set()
        thread.join(5)
    return [e for e in reported if isinstance(e, CacheMutationError)]


def test_the_informer_pipeline_leaves_cached_objects_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(mutate=False, monkeypatch=monkeypatch) == []


def test_a_handler_mutating_a_cached_object_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    failures = _run(mutate=True, monkeypatch=monkeypatch)
    assert failures and "cached object modified: Thing ns/a" in str(failures[0])


def test_detection_follows_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "true")
    assert SharedIndexInformer(FakeServer()).mutation_detector is not None
    monkeypatch.setenv(ENV_VAR, "false")
    assert SharedIndexInformer(FakeServer()).mutation_detector is None

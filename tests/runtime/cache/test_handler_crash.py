"""REALLY_CRASH really crashes for informer handlers (client-go ``TestPanicPropagated``).

With it on, a handler exception reaches ``ON_FATAL``, whose default ends the process. With it
off, the exception is logged with its traceback and the listener keeps delivering. client-go's
``ReallyCrash`` defaults to true; mcm's ``REALLY_CRASH`` defaults to false (the
``machine-controller`` command turns it on), see :mod:`mcm.runtime.errors`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import structlog

from mcm.runtime import errors as runtime_errors
from mcm.runtime.cache import (
    Config,
    Controller,
    DeltaFIFO,
    Indexer,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    deletion_handling_meta_namespace_key_func,
    process_deltas,
    wait_for_cache_sync,
)
from mcm.runtime.clock import FakeClock

from .fake_server import FakeServer, make_obj
from .recorder import Recorder

REPO_ROOT = Path(__file__).resolve().parents[3]


class _Fatal:
    def __init__(self) -> None:
        self.seen: list[BaseException] = []
        self.called = threading.Event()

    def __call__(self, exc: BaseException) -> None:
        self.seen.append(exc)
        self.called.set()


def _panic_on_add(obj: object) -> None:
    raise RuntimeError("Just panic.")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_informer_handler_exception_is_fatal_with_really_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    fatal = _Fatal()
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", True)
    monkeypatch.setattr(runtime_errors, "ON_FATAL", fatal)
    monkeypatch.setattr(runtime_errors, "PANIC_HANDLERS", [])
    server = FakeServer()
    informer = SharedIndexInformer(server, 0.0, clock=FakeClock())
    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=_panic_on_add))
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        server.create(make_obj("test"))
        assert fatal.called.wait(5), "the handler's exception never reached ON_FATAL"
        assert [str(e) for e in fatal.seen] == ["Just panic."]
    finally:
        stop.set()
        thread.join(5)


def test_controller_handler_exception_is_fatal_with_really_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shape of client-go's TestPanicPropagated: NewInformer (controller + process_deltas) with
    # a panicking AddFunc. Go recovers the panic from controller.Run; here ON_FATAL receives it.
    fatal = _Fatal()
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", True)
    monkeypatch.setattr(runtime_errors, "ON_FATAL", fatal)
    monkeypatch.setattr(runtime_errors, "PANIC_HANDLERS", [])
    monkeypatch.setattr(runtime_errors, "ERROR_HANDLERS", [])
    server = FakeServer()
    store = Indexer(deletion_handling_meta_namespace_key_func)
    queue = DeltaFIFO(key_function=deletion_handling_meta_namespace_key_func, known_objects=store)
    handler = ResourceEventHandlerFuncs(on_add=_panic_on_add)
    controller = Controller(
        Config(
            queue=queue,
            lister_watcher=server,
            process=lambda deltas, initial: process_deltas(handler, store, deltas, initial),
            clock=FakeClock(),
        )
    )
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    try:
        server.create(make_obj("test"))
        assert fatal.called.wait(5), "the handler's exception never reached ON_FATAL"
        assert [str(e) for e in fatal.seen] == ["Just panic."]
    finally:
        stop.set()
        thread.join(5)


def test_without_really_crash_the_exception_is_logged_with_its_traceback_and_the_listener_lives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fatal = _Fatal()
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", False)
    monkeypatch.setattr(runtime_errors, "ON_FATAL", fatal)
    server = FakeServer()
    server.create(make_obj("a"))
    informer = SharedIndexInformer(server, 0.0, clock=FakeClock())
    failing = Recorder(fail_on="a")
    informer.add_event_handler(failing)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    with structlog.testing.capture_logs() as logs:
        thread.start()
        try:
            assert wait_for_cache_sync(stop, informer.has_synced, timeout=5)
            server.create(make_obj("b"))
            assert failing.wait_for(2) == [("add", "a", True), ("add", "b", False)]
        finally:
            stop.set()
            thread.join(5)
    panics = [entry for entry in logs if entry["event"] == "observed_a_panic"]
    assert len(panics) == 1
    stack = str(panics[0]["stack"])
    assert "Traceback (most recent call last)" in stack
    assert "in _record" in stack  # the handler's own frame
    assert "RuntimeError: handler failed on a" in stack
    assert fatal.seen == []


CRASHING_PROCESS = textwrap.dedent(
    """
    import threading
    from mcm.runtime import errors
    from mcm.runtime.cache import ResourceEventHandlerFuncs, SharedIndexInformer
    from tests.runtime.cache.fake_server import FakeServer, make_obj

    errors.configure_crash(really_crash=True)
    server = FakeServer()
    server.create(make_obj("a"))

    def explode(obj):
        raise RuntimeError("Just panic.")

    informer = SharedIndexInformer(server, 0.0)
    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=explode))
    stop = threading.Event()
    threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
    stop.wait(30)
    print("survived")
    """
)


def test_really_crash_ends_the_process() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CRASHING_PROCESS],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "survived" not in result.stdout
    assert "Just panic." in result.stdout + result.stderr

"""Unit tests for the controller plumbing: reactor ordering and isolation, UID index, scheduler."""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Any

from mcm.emulator.controllers.base import ObjectRef, Reactor, Scheduler, UidIndex
from mcm.emulator.emulator import Emulator
from mcm.emulator.store import Change
from mcm.runtime.clock import FakeClock
from tests.emulator.ctl import create


def obj(name: str, uid: str, owners: tuple[str, ...] = (), namespace: str = "ns") -> dict[str, Any]:
    refs = [{"apiVersion": "v1", "kind": "X", "name": o, "uid": o} for o in owners]
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid, "ownerReferences": refs}}


def test_uid_index_tracks_objects_and_dependents() -> None:
    index = UidIndex()
    index.observe("things", obj("owner", "u1"), deleted=False)
    index.observe("things", obj("dep", "u2", ("u1",)), deleted=False)
    assert index.objects["u1"] == ObjectRef("things", "ns", "owner")
    assert index.dependents_of("u1") == [ObjectRef("things", "ns", "dep")]
    index.observe("things", obj("dep", "u2"), deleted=False)  # owner reference removed
    assert index.dependents_of("u1") == []
    index.observe("things", obj("owner", "u1"), deleted=True)
    assert "u1" not in index.objects
    index.observe("gone", obj("x", "u3", ("u2",)), deleted=False)
    index.forget_resource("gone")
    assert "u3" not in index.objects and index.dependents_of("u2") == []


def test_reactor_runs_work_after_commit_without_recursion_and_isolates_failures() -> None:
    with Emulator(controllers=False) as emu:
        reactor = Reactor(emu.storage)
        seen: list[str] = []
        depth = {"now": 0, "max": 0}

        def handler(change: Change) -> None:
            name = change.key[1]
            if change.resource != "configmaps":
                return
            if name == "boom":
                raise RuntimeError("handler failure")

            def work() -> None:
                depth["now"] += 1
                depth["max"] = max(depth["max"], depth["now"])
                seen.append(name)
                if name.startswith("chain") and len(name) < 8:
                    create(emu, "configmaps", {"metadata": {"name": name + "x"}}, "default")
                depth["now"] -= 1

            reactor.defer(("cm", name), work)

        reactor.add_handler(handler)
        reactor.start()
        try:
            created = create(emu, "configmaps", {"metadata": {"name": "boom"}}, "default")
            assert created["metadata"]["name"] == "boom"  # the request is not affected
            create(emu, "configmaps", {"metadata": {"name": "chain"}}, "default")
            assert seen == ["chain", "chainx", "chainxx", "chainxxx"]
            assert depth["max"] == 1
        finally:
            reactor.stop()


def test_scheduler_fires_on_fake_clock_and_cancels() -> None:
    clock = FakeClock(_dt.datetime.now(_dt.UTC))
    scheduler = Scheduler(clock)
    fired: list[str] = []
    done = threading.Event()
    scheduler.start()
    try:
        scheduler.schedule("a", 5, lambda: (fired.append("a"), done.set()))
        scheduler.schedule("b", 1, lambda: fired.append("b"))
        scheduler.cancel("b")
        scheduler.schedule_once("a", 10, lambda: fired.append("late"))  # keeps the earlier deadline
        clock.step(4.9)
        assert not done.wait(0.1)
        clock.step(0.2)
        assert done.wait(5)
        assert fired == ["a"]
        assert scheduler.pending() == 0
    finally:
        scheduler.stop()

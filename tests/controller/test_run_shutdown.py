"""``Controller.run``: setting ``stop`` shuts every queue down with drain and joins the workers, so
a reconcile already in progress finishes before ``run`` returns (issue 11, Wiring)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.controller import Controller
from mcm.runtime.worker import Result

from .fixtures import NS, Env, eventually, machine


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    try:
        yield environment
    finally:
        environment.close()


def test_stop_lets_an_in_flight_reconcile_finish(env: Env) -> None:
    controller = Controller(env.control, env.target, env.driver, env.options, drainer=env.drainer)
    started, gate, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_reconcile(key: str) -> Result | None:
        started.set()
        gate.wait(20)
        finished.set()
        return None

    controller.reconcilers["machine"] = slow_reconcile
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(1, stop), daemon=True)
    thread.start()
    env.setup_class()
    env.machines.create(machine("machine-one"), namespace=NS)
    assert started.wait(20), "the machine was never reconciled"

    stop.set()
    thread.join(0.3)
    assert thread.is_alive(), "run returned while a reconcile was still in progress"
    assert not finished.is_set()

    gate.set()
    thread.join(20)
    assert not thread.is_alive()
    assert finished.is_set()


def test_after_sync_runs_once_the_caches_synced_and_before_any_reconcile(env: Env) -> None:
    """The command freezes its start-up heap in ``after_sync``: the initial lists must be in
    the caches by then, and no worker may have started."""
    env.setup_class()
    env.machines.create(machine("machine-one"), namespace=NS)
    reconciled: list[str] = []
    seen: list[tuple[list[str], list[str]]] = []

    def after_sync() -> None:
        cached = [m["metadata"]["name"] for m in controller.deps.listers.machines.list()]
        seen.append((cached, list(reconciled)))

    controller = Controller(
        env.control, env.target, env.driver, env.options, drainer=env.drainer, after_sync=after_sync
    )

    def record(key: str) -> Result | None:
        reconciled.append(key)
        return None

    controller.reconcilers["machine"] = record
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(1, stop), daemon=True)
    thread.start()
    try:
        eventually(lambda: reconciled, what="the first reconcile")
        assert seen == [(["machine-one"], [])]
    finally:
        stop.set()
        thread.join(20)

"""The UpdateController's status writes: counts alone at most every STATUS_INTERVAL, anything else
at once, and a failed write retried rather than taken for "nothing new"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.status import PoolCounts
from mcm.machineconfig.update import STATUS_INTERVAL, UpdateController
from mcm.runtime.client.errors import ConnectionFailed
from mcm.runtime.clock import FakeClock

Obj = dict[str, Any]


class _Api:
    """``client.resource(MACHINE_POOLS).update_status``: stores the body with a new version."""

    def __init__(self) -> None:
        self.writes: list[Obj] = []
        self.fail = False
        self.version = 10

    def resource(self, _resource: object) -> _Api:
        return self

    def update_status(self, body: Obj) -> Obj:
        if self.fail:
            raise ConnectionFailed("connection refused")
        self.version += 1
        written = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        self.writes.append(written)
        return written


def _controller(clock: FakeClock, client: _Api) -> UpdateController:
    controller = UpdateController.__new__(UpdateController)  # only the status path is exercised
    controller.ctx = SimpleNamespace(clock=clock, metrics=None, client=client)  # type: ignore[assignment]
    controller.pools = SimpleNamespace(record=lambda obj: obj)  # type: ignore[assignment]
    controller.recorder = SimpleNamespace(event=lambda *_: None)  # type: ignore[assignment]
    controller._rollouts, controller._status_written, controller._status_inputs = {}, {}, {}
    return controller


def _counts(updated: int, degraded: int = 0) -> PoolCounts:
    reasons = tuple(f"Node n{i} is reporting: 'broken'" for i in range(degraded))
    unavailable = 10 - updated
    return PoolCounts(10, updated, 10, unavailable, unavailable - degraded, degraded, reasons)


def test_counts_wait_for_the_interval_conditions_do_not_and_a_failed_write_is_retried() -> None:
    clock, client = FakeClock(), _Api()
    controller = _controller(clock, client)
    pool: Obj = {"metadata": {"name": "worker", "generation": 1, "resourceVersion": "10"}, "spec": {}}

    def write(counts: PoolCounts) -> float | None:
        nonlocal pool
        due = controller._write_status(pool, counts, "rendered-worker-1", None)
        pool = client.writes[-1] if client.writes else pool
        return due

    assert write(_counts(0)) is None and len(client.writes) == 1  # first status: at once
    for updated in (1, 2, 1):  # counts alone, within the interval: deferred (the pass requeues)
        due = write(_counts(updated))
        assert due is not None and 0 < due <= STATUS_INTERVAL and len(client.writes) == 1
    assert write(_counts(0)) is None and len(client.writes) == 1  # back to what is written
    client.fail = True
    with pytest.raises(ConnectionFailed):
        write(_counts(0, degraded=1))  # a condition changes: written at once, but the write fails
    client.fail = False
    assert write(_counts(0, degraded=1)) is None and len(client.writes) == 2  # not skipped
    degraded = api.status_of(client.writes[-1])["conditions"]
    assert any(c["type"] == api.POOL_NODE_DEGRADED and c["status"] == "True" for c in degraded)
    assert write(_counts(1, degraded=1)) is not None and len(client.writes) == 2
    clock.step(STATUS_INTERVAL)
    assert write(_counts(1, degraded=1)) is None and len(client.writes) == 3  # the interval passed
    assert api.status_of(client.writes[-1])["updatingMachines"] == 1


@pytest.mark.parametrize(("paused", "reason"), [(True, api.Reason.PAUSED), (False, "NoRenderedConfig")])
def test_a_pool_without_a_rendered_config_says_paused_when_it_is(paused: bool, reason: str) -> None:
    """A paused pool renders nothing: without a rendered config yet (its nodes run an older
    one), its Updating condition says it is paused (the user's action to take), not that it
    waits for the RenderController."""
    from mcm.machineconfig.status import count_nodes, pool_status
    from mcm.testing.machineconfig import node_manifest

    node = node_manifest("n1", {"role/worker": ""}, ready=True)
    node["metadata"]["annotations"] = {
        api.CURRENT_CONFIG_ANNOTATION: "older",
        api.DESIRED_CONFIG_ANNOTATION: "older",
        api.STATE_ANNOTATION: api.STATE_DONE,
    }
    pool = {"metadata": {"name": "worker", "generation": 1}, "spec": {"paused": paused}}
    counts = count_nodes([node], "")
    assert not counts.all_updated
    status = pool_status(pool, counts, "", None, FakeClock())
    updating = next(c for c in status["conditions"] if c["type"] == api.POOL_UPDATING)
    assert (updating["status"], updating["reason"]) == ("False", reason)


def test_a_changed_machine_selector_enqueues_every_pool_another_change_only_its_own() -> None:
    """A pool's new ``machineSelector`` can move nodes to any other pool, so every pool is looked
    at again; pausing it concerns only itself."""
    pools: list[Obj] = [
        {"metadata": {"name": n, "generation": 1}, "spec": {"machineSelector": {"matchLabels": {n: ""}}}}
        for n in "ab"
    ]
    controller = UpdateController.__new__(UpdateController)  # only the pool handler is exercised
    controller.pools = SimpleNamespace(list=lambda: pools)  # type: ignore[assignment]
    enqueued: list[str] = []
    controller.enqueue = lambda key, delay=0.0: enqueued.append(key)  # type: ignore[method-assign]
    old = pools[0]
    newer = {"name": "a", "generation": 2}  # the API server counts spec changes
    moved = {"metadata": newer, "spec": {"machineSelector": {"matchLabels": {"other": ""}}}}
    controller._pool_updated(old, moved)
    assert sorted(enqueued) == ["a", "b"]
    enqueued.clear()
    controller._pool_updated(old, {"metadata": newer, "spec": {**old["spec"], "paused": True}})
    assert enqueued == ["a"]

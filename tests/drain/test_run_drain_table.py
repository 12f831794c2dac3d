"""Upstream's ``DescribeTable("RunDrain")`` (v0.47.0 ``pkg/util/provider/drain/drain_test.go``, 16
entries) on a fake cluster and a FakeClock.

Same pod mixes, PVs, grace periods, handlers and expected eviction counts as upstream; "finish
within" is measured in fake seconds. Upstream's minimum durations are not asserted: they come
from its fixed 5 s polls, and mcm's detach wait wakes early on VolumeAttachment events.

One deliberate difference (docs/drain.md): upstream counts PV pods without tracked volumes
(only shared PVs) as done right after the eviction call; mcm waits for them to terminate like
any other pod, so entry 8 (evicted shared-PV pods that vanish after 1.25 s) takes one 5 s
termination poll per pod: its bound is 15 s instead of 5 s.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from mcm.drain import DrainOptions, VolumeAttachmentHub, run_drain
from mcm.driver import FakeDriver
from mcm.runtime.clock import FakeClock
from tests.drain.fakes import ClockDriver, FakeCluster, too_many_requests
from tests.drain.scenario import NODE, Scenario, build

SHORT = 5
EIGHTH = SHORT / 8
QUARTER = SHORT / 4


@dataclass(frozen=True)
class Entry:
    name: str
    nopv: int = 0
    expv: int = 0
    shpv: int = 0
    exshpv: int = 0
    pvs_per_pod: int = 1
    eviction: bool = True
    tgp: int = SHORT
    handlers: tuple[str, ...] = ()
    attachments: bool = False
    reattach: float = 0.001
    force: bool = False
    max_retries: int = 3
    refuse_evictions: bool = False
    within: float = 5
    evictions: int = 0


ENTRIES = [
    Entry("Successful drain without support for eviction pods without volume", nopv=10, eviction=False),
    Entry(
        "Successful drain with support for eviction of pods without volume",
        nopv=10,
        handlers=("delete",),
        within=10,
        evictions=10,
    ),
    Entry(
        "Successful drain without support for eviction of pods with exclusive volumes",
        expv=2,
        eviction=False,
        handlers=("sleep-detach",),
        within=20,
    ),
    Entry(
        "Successful drain with support for eviction of pods with exclusive volumes",
        expv=2,
        handlers=("delete", "sleep-detach"),
        within=20,
        evictions=2,
    ),
    Entry(
        "Successful drain with support for eviction of pods with exclusive volumes with volume attachments",
        expv=2,
        attachments=True,
        reattach=30,
        handlers=("delete", "sleep-detach"),
        within=120,
        evictions=2,
    ),
    Entry(
        "Successful drain with support for eviction of pods with 2 exclusive volumes with volume attachments",
        expv=1,
        pvs_per_pod=2,
        attachments=True,
        reattach=30,
        handlers=("delete", "sleep-detach"),
        within=20,
        evictions=1,
    ),
    Entry(
        "Successful drain without support for eviction of pods with shared volumes", shpv=2, eviction=False
    ),
    Entry(
        "Successful drain with support for eviction of pods with shared volumes",
        shpv=2,
        handlers=("sleep-quarter-delete",),
        within=15,
        evictions=2,
    ),
    Entry(
        "Successful drain without support for eviction of pods with exclusive and shared volumes",
        exshpv=2,
        eviction=False,
        handlers=("sleep-detach",),
        within=20,
    ),
    Entry(
        "Successful drain with support for eviction of pods with exclusive and shared volumes",
        exshpv=2,
        handlers=("delete", "sleep-detach"),
        within=20,
        evictions=2,
    ),
    Entry(
        "Successful drain without support for eviction of pods with and without volume",
        nopv=10,
        expv=2,
        eviction=False,
        handlers=("sleep-detach",),
        within=20,
    ),
    Entry(
        "Successful drain with support for eviction of pods with and without volume",
        nopv=10,
        expv=2,
        handlers=("delete", "sleep-detach"),
        within=20,
        evictions=12,
    ),
    Entry(
        "Successful forced drain without support for eviction of pods with and without volume",
        nopv=10,
        expv=2,
        eviction=False,
        force=True,
    ),
    Entry(
        "Successful forced drain with support for eviction of pods with and without volume",
        nopv=10,
        expv=2,
        force=True,
        handlers=("delete",),
    ),
    Entry(
        "Successful forced drain with support for eviction of pods with and without volume "
        "when eviction fails",
        nopv=10,
        expv=2,
        force=True,
        max_retries=1,
        refuse_evictions=True,
        within=10,
    ),
    Entry(
        "Successful drain for pods with long termination grace period",
        nopv=10,
        expv=2,
        tgp=120,
        handlers=("delete", "sleep-detach"),
        within=120,
        evictions=12,
    ),
]


def install_handlers(s: Scenario, names: tuple[str, ...]) -> None:
    for name in names:
        if name == "delete":
            s.cluster.handlers.append(s.delete_pod)
        elif name == "sleep-detach":
            s.cluster.handlers.append(s.sleep_then(EIGHTH, "detach"))
        elif name == "sleep-quarter-delete":
            s.cluster.handlers.append(s.sleep_then(QUARTER, "delete"))


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{i + 1:02d}" for i in range(len(ENTRIES))])
def test_run_drain(entry: Entry) -> None:
    clock = FakeClock()
    cluster = FakeCluster(eviction=entry.eviction)
    s = build(
        cluster,
        clock,
        nopv=entry.nopv,
        expv=entry.expv,
        shpv=entry.shpv,
        exshpv=entry.exshpv,
        pvs_per_pod=entry.pvs_per_pod,
        tgp=entry.tgp,
    )
    s.hub = VolumeAttachmentHub() if entry.attachments else None
    install_handlers(s, entry.handlers)
    if entry.refuse_evictions:

        def refuse(_pod: object) -> None:
            raise too_many_requests()

        cluster.evict_reactor = refuse
    options = DrainOptions(
        timeout=120,
        max_evict_retries=entry.max_retries,
        pv_detach_timeout=30,
        pv_reattach_timeout=entry.reattach,
        force=entry.force,
        grace_period=30,
    )

    with ClockDriver(clock, lambda: sum(cluster.calls.values())) as driver:
        result = run_drain(
            cluster.as_client(),
            s.listers(),
            FakeDriver(),
            NODE,
            options,
            clock=clock,
            stop=threading.Event(),
            hub=s.hub,
        )
        for thread in cluster.handler_threads:
            thread.join(timeout=10)

    assert result.error is None, result
    assert result.left_behind == ()
    assert cluster.count("pods.evict") == entry.evictions
    assert driver.elapsed <= entry.within
    assert s.left() == {}
    total = entry.nopv + entry.expv + entry.shpv + entry.exshpv
    assert len(result.evicted) + len(result.deleted) + len(result.gone) == total
    if entry.force:
        assert cluster.count("pods.delete.grace0") == total

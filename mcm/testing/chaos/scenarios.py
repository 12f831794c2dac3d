"""The chaos scenarios: one fault each, the mix of all of them, and the manager's
(:mod:`~mcm.testing.chaos.pool`).

A :class:`Scenario` names a fault program (a function that keeps injecting its fault for the
scenario's fault phase, drawing every choice from the seeded generator it is given), the
controller :class:`~mcm.testing.chaos.harness.Settings` it needs, how fast the owner churns
Machines meanwhile, and the convergence bound: how long after the faults stop every Machine
must be where it should be. :data:`SCENARIOS` lists them in the order a run uses;
``docs/reliability.md`` describes each.
"""

from __future__ import annotations

import queue
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from mcm.apis.machine import constants as c
from mcm.testing.chaos.cloud import DriverFaults
from mcm.testing.chaos.harness import Harness, Settings
from mcm.testing.chaos.invariants import RESUMED_PAST_DEADLINE
from mcm.testing.chaos.pool import manager_api_faults, manager_kills, manager_mix
from mcm.testing.chaos.processes import EXIT_WINDOW, Managed
from mcm.testing.chaos.tracker import Event

__all__ = ["SCENARIOS", "SWEEP", "Scenario", "by_name", "short_plan"]

Program = Callable[[Harness, random.Random, float], None]

BASE = Settings()
FAILOVER = Settings(replicas=2, lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)
RETRYABLE = ("Unavailable", "DeadlineExceeded", "Aborted", "Unknown")
"""The codes the controller retries after ShortRetry whichever call failed."""


@dataclass(frozen=True)
class Scenario:
    """One fault program and what it needs."""

    name: str
    summary: str
    program: Program
    settings: Settings = BASE
    churn: float = 1.0
    """Owner deletions per second during the fault phase."""
    bound: float = 60.0
    """Seconds after the faults stop within which everything must have converged."""


def _until(deadline: float) -> bool:
    return time.monotonic() < deadline


def _wait(seconds: float, deadline: float) -> None:
    time.sleep(max(0.0, min(seconds, deadline - time.monotonic())))


def _cluster(h: Harness, rng: random.Random) -> tuple[str, object]:
    name = rng.choice(("control", "target"))
    return name, h.world.control if name == "control" else h.world.target


# --- API server faults ------------------------------------------------------------------------


def watch_drops(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    while _until(deadline):
        name, emulator = _cluster(h, rng)
        mode = rng.choice(("close", "reset"))
        h.note("watch-drop", name, mode=mode, dropped=emulator.watches.drop(mode))  # type: ignore[attr-defined]
        _wait(rng.uniform(0.3, 1.5), deadline)


def compaction(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    while _until(deadline):
        name, emulator = _cluster(h, rng)
        emulator.compact()  # type: ignore[attr-defined]
        h.note("compact-410", name, dropped=emulator.watches.drop("expire"))  # type: ignore[attr-defined]
        _wait(rng.uniform(0.5, 2.0), deadline)


def restarts(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    while _until(deadline):
        name, emulator = _cluster(h, rng)
        downtime = rng.uniform(0.2, 2.0)
        h.note("apiserver-restart", name, downtime=round(downtime, 2))
        emulator.restart(downtime=downtime, reset_history=rng.random() < 0.5)  # type: ignore[attr-defined]
        _wait(rng.uniform(1.0, 3.0), deadline)


def _pause(h: Harness, rng: random.Random, seconds: float, deadline: float) -> None:
    name, emulator = _cluster(h, rng)
    mode = rng.choice(("hang", "refuse", "error"))
    h.note("pause", name, mode=mode, seconds=round(seconds, 2))
    emulator.pause(mode, drop_on_resume=rng.random() < 0.5)  # type: ignore[attr-defined]
    try:
        time.sleep(seconds)
    finally:
        emulator.resume()  # type: ignore[attr-defined]
        h.note("resume", name)


def pause_short(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    timeout = h.settings.freeze_timeout if h.settings else BASE.freeze_timeout
    while _until(deadline):
        _pause(h, rng, rng.uniform(0.5, 0.6 * timeout), deadline)
        _wait(rng.uniform(0.5, 2.0), deadline)


def pause_long(h: Harness, rng: random.Random, duration: float) -> None:
    timeout = h.settings.freeze_timeout if h.settings else BASE.freeze_timeout
    _pause(h, rng, max(duration, timeout + rng.uniform(2.0, 4.0)), time.monotonic() + duration)


def api_errors(h: Harness, rng: random.Random, duration: float) -> None:
    h.api_errors(0.1)
    time.sleep(duration)


# --- transport faults (the proxies) -----------------------------------------------------------


def proxy_resets(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    for proxy in h.world.proxies:
        proxy.refuse_new = 0.2
    h.note("proxy-refuse", share=0.2)
    while _until(deadline):
        proxy = rng.choice(h.world.proxies)
        h.note("proxy-reset", proxy.name, connections=proxy.reset_all())
        _wait(rng.uniform(0.3, 1.5), deadline)


def proxy_blackhole(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    while _until(deadline):
        proxies = rng.sample(h.world.proxies, rng.randint(1, len(h.world.proxies)))
        seconds, reset = rng.uniform(0.5, 4.0), rng.random() < 0.5
        h.note("blackhole", ",".join(p.name for p in proxies), seconds=round(seconds, 2), reset_on_heal=reset)
        for proxy in proxies:
            proxy.blackhole()
        time.sleep(seconds)
        for proxy in proxies:
            proxy.heal(reset=reset)
        _wait(rng.uniform(0.5, 2.0), deadline)


def proxy_write_resets(h: Harness, rng: random.Random, duration: float) -> None:
    for proxy in h.world.proxies:
        proxy.reset_writes = 0.2
        proxy.reset_writes_when = rng.choice(("mid", "after"))
    h.note("write-resets", share=0.2, when=",".join(p.reset_writes_when for p in h.world.proxies))
    time.sleep(duration)


def proxy_latency(h: Harness, rng: random.Random, duration: float) -> None:
    for proxy in h.world.proxies:
        proxy.latency, proxy.jitter = rng.uniform(0.05, 0.3), 0.2
    h.note("latency", seconds=",".join(f"{p.latency:.2f}" for p in h.world.proxies))
    time.sleep(duration)


# --- driver faults ----------------------------------------------------------------------------


def driver_errors(h: Harness, rng: random.Random, duration: float) -> None:
    h.driver_faults(
        DriverFaults(
            error_rate=0.2, error_codes=RETRYABLE, create_codes=("ResourceExhausted",), after_effect=0.5
        )
    )
    time.sleep(duration)


def slow_driver(h: Harness, rng: random.Random, duration: float) -> None:
    timeout = h.settings.driver_call_timeout if h.settings else BASE.driver_call_timeout
    h.driver_faults(DriverFaults(slow_seconds=timeout * 1.7, slow_rate=0.5))
    time.sleep(duration)


# --- process faults ---------------------------------------------------------------------------


def sidecar_kills(h: Harness, rng: random.Random, duration: float) -> None:
    deadline = time.monotonic() + duration
    while _until(deadline):
        _wait(rng.uniform(1.0, 3.0), deadline)
        sidecar = rng.choice(h.sidecars)
        h.signal(sidecar, signal.SIGKILL, "sidecar killed")
        time.sleep(rng.uniform(0.2, 1.5))
        h.ensure_running()


KILL_POINTS = (
    "create_machine:start",
    "create_machine:end",
    "initialize_machine:start",
    "delete_machine:start",
    "delete_machine:end",
    "get_machine_status:start",
)
"""Driver calls at which the controller may be SIGKILLed (and any machine status write)."""


def _kill_point(event: Event) -> bool:
    if event.source == "call":
        return event.kind in KILL_POINTS
    return event.source == "machine" and (
        event.data.get("deleting") or event.data.get("phase") == c.PHASE_PENDING
    )


def controller_kills(h: Harness, rng: random.Random, duration: float) -> None:
    """SIGKILL the leader right at (or just after) a random point of a creation or deletion."""
    deadline = time.monotonic() + duration
    points: queue.SimpleQueue[Event] = queue.SimpleQueue()
    remove = h.tracker.listen(lambda e: points.put(e) if _kill_point(e) else None)
    try:
        while _until(deadline):
            _wait(rng.uniform(0.5, 2.0), deadline)
            _drain(points)
            try:
                point = points.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            time.sleep(rng.choice((0.0, 0.0, rng.uniform(0.0, 0.3))))
            target = h.leader() or rng.choice(h.controllers)
            h.signal(target, signal.SIGKILL, f"at {point.source} {point.kind} {point.key}")
            time.sleep(rng.uniform(0.2, 1.0))
            h.ensure_running()
    finally:
        remove()


def _drain(points: queue.SimpleQueue[Event]) -> None:
    while True:
        try:
            points.get_nowait()
        except queue.Empty:
            return


def leader_failover(h: Harness, rng: random.Random, duration: float) -> None:
    """Take the leader away (SIGKILL, SIGTERM, network partition, SIGSTOP) and let the standby
    take over; the old one comes back as a standby."""
    deadline = time.monotonic() + duration
    settings = h.settings or FAILOVER
    while _until(deadline):
        leader = _await_leader(h, deadline)
        if leader is None:
            return
        how = rng.choice(("kill", "term", "partition", "stop"))
        h.note("failover", leader.name, how=how)
        if how in ("kill", "term"):
            h.signal(leader, signal.SIGKILL if how == "kill" else signal.SIGTERM, f"failover ({how})")
        elif how == "partition":
            replica = h.world.replicas[int(leader.name.rsplit("-", 1)[1])]
            cut = settings.renew_deadline + 2.0
            leader.expect_exit("leaderelection lost (partitioned)", within=cut + EXIT_WINDOW)
            for proxy in replica.proxies:
                proxy.blackhole()
            time.sleep(cut)
            for proxy in replica.proxies:
                proxy.heal(reset=True)
        else:
            _pause_past_the_lease(h, leader, settings)
        time.sleep(rng.uniform(0.5, 1.5))
        h.ensure_running()


def leader_pause(h: Harness, rng: random.Random, duration: float) -> None:
    """SIGSTOP the leader past its Lease, so that the standby takes over and goes on with the
    owner's deletions, then SIGCONT it: the resumed process must step down without changing a
    VM (``fenced``), however its renewer and its deadline watchdog wake."""
    deadline = time.monotonic() + duration
    settings = h.settings or FAILOVER
    while _until(deadline):
        leader = _await_leader(h, deadline)
        if leader is None:
            return
        h.note("leader-pause", leader.name)
        _pause_past_the_lease(h, leader, settings)
        time.sleep(rng.uniform(0.5, 1.5))
        h.ensure_running()


def _pause_past_the_lease(h: Harness, leader: Managed, settings: Settings) -> None:
    """SIGSTOP ``leader`` for the Lease duration + 2 s and until another replica leads (at most
    10 s more), then note the resumption (``fenced`` checks from that note on) and SIGCONT it."""
    stopped = settings.lease_duration + 2.0
    h.signal(leader, signal.SIGSTOP, "failover (stopped)")
    leader.expect_exit("leaderelection lost (stopped)", within=stopped + 10.0 + EXIT_WINDOW)
    time.sleep(stopped)
    successor_by = time.monotonic() + 10.0
    while h.leader() in (None, leader) and time.monotonic() < successor_by:
        time.sleep(0.2)
    h.note(RESUMED_PAST_DEADLINE, leader.name, pid=leader.pid)
    h.signal(leader, signal.SIGCONT, "failover (continued)")


def _await_leader(h: Harness, deadline: float) -> Managed | None:
    while _until(deadline):
        leader = h.leader()
        if leader is not None:
            return leader
        time.sleep(0.2)
    return None


def heartbeats(h: Harness, rng: random.Random, duration: float) -> None:
    """Kubelets die on some nodes (their Machines go Unknown, then Failed and are replaced)
    while the owner deletes other Machines."""
    deadline = time.monotonic() + duration
    while _until(deadline):
        nodes = [n for n, obj in h.world.nodes().items() if not obj["metadata"].get("deletionTimestamp")]
        if nodes:
            h.world.stop_heartbeats(rng.choice(nodes))
        _wait(rng.uniform(2.0, 5.0), deadline)


# --- the mix ----------------------------------------------------------------------------------

MIXABLE: tuple[Program, ...] = (
    watch_drops,
    compaction,
    restarts,
    pause_short,
    api_errors,
    proxy_resets,
    proxy_blackhole,
    proxy_write_resets,
    proxy_latency,
    driver_errors,
    slow_driver,
    sidecar_kills,
    controller_kills,
    leader_failover,
    leader_pause,
    heartbeats,
)


def mixed(h: Harness, rng: random.Random, duration: float) -> None:
    """Several fault programs at once, each for a random slice of the phase, in threads."""
    deadline = time.monotonic() + duration
    threads: list[threading.Thread] = []
    while _until(deadline):
        program = rng.choice(MIXABLE)
        if program is sidecar_kills and not h.sidecars:
            continue
        seconds = min(rng.uniform(2.0, 8.0), max(0.5, deadline - time.monotonic()))
        threads.append(_start(h, rng, program, seconds))
        _wait(rng.uniform(0.5, 3.0), deadline)
    _join(threads)


def sweep(h: Harness, rng: random.Random, duration: float) -> None:
    """Every fault program of the mix once, in a random order, each for 2-4 s, their starts
    spread evenly over the phase so that they overlap: the CI profile's mix. Leader failovers
    and pauses are left to their own scenarios (under this 30 s Lease a takeover alone takes
    half a minute)."""
    takeovers = (leader_failover, leader_pause)
    programs = [p for p in MIXABLE if p not in takeovers and (p is not sidecar_kills or h.sidecars)]
    rng.shuffle(programs)
    deadline = time.monotonic() + duration
    spacing = duration / len(programs)
    threads = []
    for program in programs:
        seconds = min(rng.uniform(2.0, 4.0), max(0.5, deadline - time.monotonic()))
        threads.append(_start(h, rng, program, seconds))
        _wait(spacing, deadline)
    _join(threads)


def _start(h: Harness, rng: random.Random, program: Program, seconds: float) -> threading.Thread:
    """Run ``program`` for ``seconds`` in a thread with its own generator drawn from ``rng``."""
    own = random.Random(rng.random())
    h.note("mix", program.__name__, seconds=round(seconds, 2))
    thread = threading.Thread(
        target=program, args=(h, own, seconds), name=f"mix-{program.__name__}", daemon=True
    )
    thread.start()
    return thread


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(60)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("watch-drops", "watches of both clusters closed or reset every 0.3-1.5 s", watch_drops),
    Scenario("compaction-410", "history compacted and watches ended with 410 Gone", compaction),
    Scenario("apiserver-restart", "an API server stopped for 0.2-2 s and started again", restarts),
    Scenario(
        "pause-short",
        "an API server hangs, refuses or answers 503, shorter than the freeze timeout",
        pause_short,
    ),
    Scenario(
        "pause-long",
        "an API server paused longer than the freeze timeout: freeze, then unfreeze",
        pause_long,
        bound=90.0,
    ),
    Scenario("api-errors", "409, 429 and 500 (before and after the commit) on 10% of writes", api_errors),
    Scenario("proxy-resets", "connections reset, 20% of new ones refused", proxy_resets),
    Scenario(
        "proxy-blackhole",
        "traffic held 0.5-4 s, then delivered or the connections reset",
        proxy_blackhole,
        bound=90.0,
    ),
    Scenario(
        "proxy-write-resets", "20% of write requests cut mid-request or after the commit", proxy_write_resets
    ),
    Scenario("proxy-latency", "every chunk delayed 50-300 ms (+ up to 200 ms jitter)", proxy_latency),
    Scenario(
        "driver-errors", "20% of driver calls fail with retryable codes, half after the effect", driver_errors
    ),
    Scenario("slow-driver", "half of creates and deletes take 1.7x --driver-call-timeout", slow_driver),
    Scenario(
        "sidecar-kill",
        "the gRPC driver sidecar SIGKILLed and restarted",
        sidecar_kills,
        settings=replace(BASE, sidecar=True),
    ),
    Scenario(
        "controller-kill",
        "the controller SIGKILLed at random points of creation and deletion",
        controller_kills,
    ),
    Scenario(
        "leader-failover",
        "the leader of two replicas killed, stopped, partitioned or terminated",
        leader_failover,
        settings=FAILOVER,
        bound=60.0,
    ),
    Scenario(
        "leader-pause",
        "the leader of two replicas SIGSTOPped past its Lease while the standby deletes Machines",
        leader_pause,
        settings=FAILOVER,
        bound=60.0,
    ),
    Scenario(
        "heartbeats",
        "kubelets stop on some nodes while the owner deletes others",
        heartbeats,
        settings=replace(BASE, health_timeout=6.0),
        churn=0.3,
    ),
    Scenario(
        "manager-kill",
        "a MachineDeployment rolled out again and again, the manager SIGKILLed or SIGSTOPped mid-roll-out",
        manager_kills,
        churn=0.3,
    ),
    Scenario(
        "manager-api-faults",
        "roll-outs while the manager's connections break and 10% of its writes fail",
        manager_api_faults,
        churn=0.3,
    ),
    Scenario(
        "manager-mix",
        "roll-outs under both: manager kills and stops, its transport faults and API errors",
        manager_mix,
        churn=0.3,
    ),
    Scenario(
        "mixed",
        "random overlapping faults from all of the above (the manager scenarios aside)",
        mixed,
        settings=replace(BASE, replicas=2, sidecar=True, health_timeout=8.0),
        bound=120.0,
    ),
)


SWEEP = Scenario(
    "sweep",
    "every fault program of the mix once, overlapping (leader failover aside)",
    sweep,
    settings=replace(BASE, replicas=2, sidecar=True, health_timeout=8.0),
    bound=120.0,
)
"""The CI profile's mix; not part of the long profile, whose ``mixed`` runs cover the same."""


def by_name(name: str) -> Scenario:
    """The scenario called ``name`` (``sweep`` included)."""
    for scenario in (*SCENARIOS, SWEEP):
        if scenario.name == name:
            return scenario
    known = ", ".join(s.name for s in (*SCENARIOS, SWEEP))
    raise KeyError(f"no chaos scenario {name!r}; known: {known}")


SWEEP_PHASE = 16.0
"""Seconds over which the short profile's sweep starts its fault programs."""
FAILOVER_PHASE = 4.0
"""Seconds of leader failovers in the short profile."""
PAUSE_PHASE = 1.0
"""Seconds in which the short profile starts leader pauses (one: a pause itself takes 6-16 s)."""
MANAGER_PHASE = 6.0
"""Seconds of roll-outs under the manager's faults in the short profile (its pool comes up
before and goes away after them: some 30 s in all)."""


def short_plan() -> list[tuple[Scenario, float]]:
    """The CI profile, about two minutes: :data:`SWEEP` (every fault but failover, overlapping,
    with two replicas and gRPC sidecars), then ``leader-failover`` and one ``leader-pause`` with
    their short Lease, then ``manager-mix`` (a MachineDeployment rolled out under the manager's
    faults)."""
    return [
        (SWEEP, SWEEP_PHASE),
        (by_name("leader-failover"), FAILOVER_PHASE),
        (by_name("leader-pause"), PAUSE_PHASE),
        (by_name("manager-mix"), MANAGER_PHASE),
    ]

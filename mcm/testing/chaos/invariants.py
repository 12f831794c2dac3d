"""The invariants of the chaos suite, checked over the tracker's events.

Each check is a pure function of the event list (plus, for calls, when processes died), so it
can be tested on hand-written histories. The harness adds the checks that need the live system
(convergence, liveness, baselines) as :class:`Violation` values of its own.

====================  =====================================================================
invariant             holds when
====================  =====================================================================
``one-vm``            no Machine (by UID) ever has two VMs at once
``one-create``        no CreateMachine for a Machine starts while another for it runs (a
                      call runs from its start until its end, or until its process died)
``no-false-delete``   no VM is deleted while its Machine exists without a deletionTimestamp
``no-leak``           when a Machine's deletion is done (its MCM finalizer removed, or the
                      object gone) it has no VM left, and no VM is created for it afterwards
``fenced``            a controller paused (SIGSTOP) past its renew deadline starts no
                      CreateMachine, InitializeMachine or DeleteMachine once it resumes
``converges``         after the faults stop, every Machine reaches its wanted state within
                      the stated bound (harness)
``bystander``         every finalizer, label and annotation the bystander wrote is on every
                      later version of its object (until the bystander removes it)
``alive``             no controller or sidecar process exits unless the harness ended it
                      (harness)
``baseline``          a leader reports its work-queue depth and thread count, and they
                      return to their baseline (harness; :func:`await_baseline` is the check,
                      a missing leader fails it)
====================  =====================================================================
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mcm.apis.machine import constants as c
from mcm.testing.chaos.cloud import PROVIDER_PREFIX
from mcm.testing.chaos.tracker import Event

__all__ = [
    "INVARIANTS",
    "RESUMED_PAST_DEADLINE",
    "Sample",
    "Violation",
    "await_baseline",
    "check_all",
    "check_fenced",
    "measure_baseline",
]

INVARIANTS: tuple[tuple[str, str], ...] = (
    ("one-vm", "no Machine ever has two VMs"),
    ("one-create", "no CreateMachine starts while another for the same Machine runs"),
    ("no-false-delete", "no VM of an existing Machine is deleted"),
    ("no-leak", "no VM is left for a deleted Machine"),
    ("fenced", "a leader paused past its renew deadline changes no VM when it resumes"),
    ("converges", "no Machine stays stuck past the stated bound"),
    ("bystander", "nothing the bystander wrote is lost"),
    ("alive", "the processes are alive (the harness's own kills aside)"),
    ("baseline", "queue depth and thread count return to baseline"),
    # the manager scenarios' (mcm.testing.chaos.rollout)
    ("md-surge", "never more machines than replicas + maxSurge (+ the overshoot allowance)"),
    ("md-available", "never fewer Running than replicas - maxUnavailable during a roll-out"),
    ("md-converges", "the pool settles at replicas Running machines on its template"),
)
"""Every invariant: name and what it promises."""


@dataclass(frozen=True)
class Violation:
    """One broken invariant: when, for which machine (or object), and what was seen."""

    invariant: str
    t: float
    key: str
    message: str
    uid: str = ""


Sample = tuple[int, float]
"""The leader's thread count and total work-queue depth; ``None`` where no leader answered."""


def measure_baseline(
    sample: Callable[[], Sample | None],
    bound: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int | None:
    """The settled leader's thread count: the first sample within ``bound`` seconds, ``None``
    when no leader answered in that time (the caller reports it; it never skips the check)."""
    deadline = clock() + bound
    while True:
        current = sample()
        if current is not None and current[0] > 0:
            return current[0]
        if clock() >= deadline:
            return None
        sleep(0.5)


def await_baseline(
    sample: Callable[[], Sample | None],
    threads: int,
    slack: int,
    bound: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Violation | None:
    """``baseline``: within ``bound`` seconds a leader reports a work-queue depth of 0 and at
    most ``threads`` + ``slack`` threads. No leader answering counts as not at baseline, so the
    check cannot pass for want of someone to ask."""
    deadline = clock() + bound
    current = sample()
    while not _at_baseline(current, threads, slack) and clock() < deadline:
        sleep(0.5)
        current = sample()
    if _at_baseline(current, threads, slack):
        return None
    if current is None:
        seen = "no leader reported its threads and queue depth"
    else:
        seen = f"threads {current[0]} (baseline {threads} + {slack}), queue depth {current[1]:g}"
    return Violation("baseline", clock(), "controller", f"after {bound:g}s: {seen}")


def _at_baseline(sample: Sample | None, threads: int, slack: int) -> bool:
    return sample is not None and 0 < sample[0] <= threads + slack and sample[1] == 0


def check_all(events: Sequence[Event], deaths: Mapping[int, float], now: float) -> list[Violation]:
    """Every event-based check over ``events`` (``deaths``: pid → when the process died)."""
    ordered = sorted(events, key=lambda e: e.seq)
    return [
        *check_one_vm(ordered),
        *check_one_create(events, deaths, now),
        *check_vm_deletions(ordered),
        *check_fenced(events),
        *check_bystander(ordered),
    ]


RESUMED_PAST_DEADLINE = "resume-past-deadline"
"""The harness's note (``fault`` event, ``pid`` in its data) made just before it sends SIGCONT
to a controller it stopped for longer than the renew deadline."""
VM_CHANGING_STARTS = frozenset({"create_machine:start", "initialize_machine:start", "delete_machine:start"})


def check_fenced(events: Iterable[Event]) -> list[Violation]:
    """``fenced``: no VM-changing driver call starts in a process after the harness resumed it
    from a pause past its renew deadline (its elector must step down, not renew). Calls are
    compared by time (the driver's call log carries the system-wide monotonic clock)."""
    events = list(events)
    resumed = {
        int(e.data.get("pid", 0)): e.t
        for e in events
        if e.source == "fault" and e.kind == RESUMED_PAST_DEADLINE
    }
    found: list[Violation] = []
    for event in events:
        if event.source != "call" or event.kind not in VM_CHANGING_STARTS:
            continue
        pid = int(event.data.get("pid", 0))
        since = resumed.get(pid)
        if since is not None and event.t > since:
            found.append(
                Violation(
                    "fenced",
                    event.t,
                    event.key,
                    f"{event.kind.split(':')[0]} started by pid {pid} {event.t - since:.2f}s after it "
                    "resumed from a pause past its renew deadline",
                    event.uid,
                )
            )
    return found


def check_one_vm(events: Iterable[Event]) -> list[Violation]:
    """``one-vm``: at most one live VM per Machine UID at any moment."""
    live: dict[str, set[str]] = defaultdict(set)
    found: list[Violation] = []
    for event in events:
        if event.source != "vm" or not event.uid:
            continue
        vm = str(event.data.get("vm"))
        if event.kind == "created":
            live[event.uid].add(vm)
            if len(live[event.uid]) > 1:
                found.append(
                    Violation(
                        "one-vm", event.t, event.key, f"VMs {sorted(live[event.uid])} at once", event.uid
                    )
                )
        else:
            live[event.uid].discard(vm)
    return found


@dataclass
class _Call:
    call: str
    pid: int
    start: float
    end: float | None = None


def _create_calls(events: Iterable[Event], deaths: Mapping[int, float]) -> dict[str, list[_Call]]:
    calls: dict[str, _Call] = {}
    owner: dict[str, str] = {}
    for event in events:
        if event.source != "call" or not event.kind.startswith("create_machine:"):
            continue
        call_id = str(event.data.get("call"))
        if event.kind.endswith(":start"):
            calls[call_id] = _Call(call_id, int(event.data.get("pid", 0)), event.t)
            owner[call_id] = event.uid or event.key
        elif call_id in calls:
            calls[call_id].end = event.t
    for call in calls.values():
        death = deaths.get(call.pid)
        if call.end is None and death is not None:
            call.end = death
    by_machine: dict[str, list[_Call]] = defaultdict(list)
    for call_id, call in calls.items():
        by_machine[owner[call_id]].append(call)
    return by_machine


def check_one_create(events: Iterable[Event], deaths: Mapping[int, float], now: float) -> list[Violation]:
    """``one-create``: the CreateMachine calls of one Machine never overlap in time."""
    found: list[Violation] = []
    for machine, calls in _create_calls(events, deaths).items():
        calls.sort(key=lambda x: x.start)
        running: _Call | None = None
        for call in calls:
            if running is not None and call.start < (running.end if running.end is not None else now):
                found.append(
                    Violation(
                        "one-create",
                        call.start,
                        machine,
                        f"CreateMachine {call.call} started while {running.call} (pid {running.pid}) "
                        f"was running",
                    )
                )
            if running is None or (call.end or now) > (running.end or now):
                running = call
    return found


@dataclass
class _MachineState:
    name: str
    exists: bool = True
    deleting: bool = False
    released: bool = False
    provider_id: str = ""


def _machine_step(state: _MachineState, event: Event) -> bool:
    """Apply a machine event; True when the machine's deletion is done with this event."""
    was_released = state.released
    if event.kind == "DELETED":
        state.exists = False
        state.released = True
        return not was_released
    state.deleting = bool(event.data.get("deleting"))
    state.provider_id = str(event.data.get("providerID") or "")
    finalizers = event.data.get("finalizers") or []
    if state.deleting and c.MCM_FINALIZER not in finalizers:
        state.released = True
    return state.released and not was_released


def check_vm_deletions(events: Iterable[Event]) -> list[Violation]:
    """``no-false-delete`` and ``no-leak`` over machine and VM events in commit order."""
    machines: dict[str, _MachineState] = {}
    live: dict[str, set[str]] = defaultdict(set)
    found: list[Violation] = []
    for event in events:
        if event.source == "machine" and event.uid:
            state = machines.setdefault(event.uid, _MachineState(event.key))
            if _machine_step(state, event) and live[event.uid]:
                found.append(
                    Violation(
                        "no-leak",
                        event.t,
                        event.key,
                        f"deletion done with VMs {sorted(live[event.uid])} left",
                        event.uid,
                    )
                )
        elif event.source == "vm" and event.uid:
            found += _vm_event(event, machines.get(event.uid), live[event.uid])
    return found


def _vm_event(event: Event, machine: _MachineState | None, live: set[str]) -> list[Violation]:
    vm = str(event.data.get("vm"))
    if event.kind == "created":
        live.add(vm)
        if machine is not None and machine.released:
            return [
                Violation(
                    "no-leak", event.t, event.key, f"VM {vm} created after the deletion was done", event.uid
                )
            ]
        return []
    others = live - {vm}
    live.discard(vm)
    if machine is None or not machine.exists or machine.deleting:
        return []
    duplicate = others and machine.provider_id != f"{PROVIDER_PREFIX}{vm}"
    if duplicate:
        return []  # a second VM being cleaned up: already a one-vm violation
    return [
        Violation(
            "no-false-delete",
            event.t,
            event.key,
            f"VM {vm} deleted while the Machine is not being deleted",
            event.uid,
        )
    ]


def check_bystander(events: Iterable[Event]) -> list[Violation]:
    """``bystander``: each mark is on every version after the write that put it there."""
    required: dict[tuple[str, str], dict[str, tuple[int, int | None]]] = defaultdict(dict)
    versions: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for event in events:
        ident = (event.key, event.uid)
        if event.source == "bystander" and event.kind == "marked":
            for mark in event.data.get("marks") or []:
                required[ident].setdefault(str(mark), (int(event.data["rv"]), None))
        elif event.source == "bystander" and event.kind == "unmarked":
            for mark in event.data.get("marks") or []:
                window = required[ident].get(str(mark))
                if window is not None:
                    required[ident][str(mark)] = (window[0], int(event.data["rv"]))
        elif event.source == "marks" and event.kind != "DELETED":
            versions[ident].append(event)
    found: list[Violation] = []
    for ident, marks in required.items():
        for mark, (since, until) in marks.items():
            lost = next(
                (
                    v
                    for v in versions[ident]
                    if int(v.data["rv"]) > since
                    and (until is None or int(v.data["rv"]) < until)
                    and mark not in (v.data.get("marks") or [])
                ),
                None,
            )
            if lost is not None:
                found.append(
                    Violation(
                        "bystander",
                        lost.t,
                        ident[0],
                        f"{mark} (written at rv {since}) missing at rv {lost.data['rv']}",
                        ident[1],
                    )
                )
    return found

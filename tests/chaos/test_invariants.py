"""The chaos invariants on hand-written histories: each check catches what it promises to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcm.apis.machine import constants as c
from mcm.testing.chaos.invariants import (
    await_baseline,
    check_all,
    check_bystander,
    check_fenced,
    check_one_create,
    check_one_vm,
    check_vm_deletions,
    measure_baseline,
)
from mcm.testing.chaos.processes import Managed, ProcessMonitor
from mcm.testing.chaos.tracker import Event

FIN = [c.MCM_FINALIZER]


class History:
    """Builds an event list in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, source: str, kind: str, key: str = "m1", uid: str = "u1", **data: Any) -> History:
        self.events.append(Event(len(self.events), float(len(self.events)), source, kind, key, uid, data))
        return self

    def machine(self, kind: str = "MODIFIED", **data: Any) -> History:
        base = {"deleting": False, "finalizers": FIN, "providerID": ""}
        return self.add("machine", kind, **{**base, **data})

    def vm(self, kind: str, vm: str, uid: str = "u1") -> History:
        return self.add("vm", kind, uid=uid, vm=vm)

    def call(self, phase: str, call: str, pid: int = 10, op: str = "create_machine") -> History:
        return self.add("call", f"{op}:{phase}", call=call, pid=pid)


def test_one_vm_catches_a_second_vm_and_allows_a_replacement() -> None:
    ok = History().vm("created", "a").vm("deleted", "a").vm("created", "b")
    assert check_one_vm(ok.events) == []
    bad = History().vm("created", "a").vm("created", "b")
    [violation] = check_one_vm(bad.events)
    assert violation.invariant == "one-vm" and "['a', 'b']" in violation.message
    other_machine = History().vm("created", "a").vm("created", "b", uid="u2")
    assert check_one_vm(other_machine.events) == []


def test_one_create_catches_overlapping_calls_and_counts_a_dead_process_as_ended() -> None:
    sequential = History().call("start", "1").call("end", "1").call("start", "2").call("end", "2")
    assert check_one_create(sequential.events, {}, now=100.0) == []
    overlapping = History().call("start", "1").call("start", "2").call("end", "1").call("end", "2")
    [violation] = check_one_create(overlapping.events, {}, now=100.0)
    assert "started while 1" in violation.message
    killed = History().call("start", "1", pid=10).call("start", "2", pid=11).call("end", "2", pid=11)
    assert check_one_create(killed.events, {10: 0.5}, now=100.0) == []
    assert len(check_one_create(killed.events, {10: 1.5}, now=100.0)) == 1
    still_running = History().call("start", "1").call("start", "2")
    assert len(check_one_create(still_running.events, {}, now=100.0)) == 1
    other_ops = History().call("start", "1", op="delete_machine").call("start", "2", op="delete_machine")
    assert check_one_create(other_ops.events, {}, now=100.0) == []


def test_deleting_the_vm_of_a_machine_that_is_not_being_deleted_is_caught() -> None:
    history = (
        History().machine("ADDED").vm("created", "a").machine(providerID="chaos:///a").vm("deleted", "a")
    )
    [violation] = check_vm_deletions(history.events)
    assert violation.invariant == "no-false-delete"
    deleting = History().machine("ADDED").vm("created", "a").machine(deleting=True).vm("deleted", "a")
    assert check_vm_deletions(deleting.events) == []


def test_cleaning_up_a_duplicate_vm_is_not_a_false_delete() -> None:
    history = (
        History()
        .machine("ADDED")
        .vm("created", "a")
        .vm("created", "b")
        .machine(providerID="chaos:///a")
        .vm("deleted", "b")
    )
    assert check_vm_deletions(history.events) == []


def test_a_machine_released_with_a_vm_left_or_a_vm_created_afterwards_is_a_leak() -> None:
    released_with_vm = History().machine("ADDED").vm("created", "a").machine(deleting=True, finalizers=[])
    [violation] = check_vm_deletions(released_with_vm.events)
    assert violation.invariant == "no-leak" and "left" in violation.message
    created_late = (
        History().machine("ADDED").machine(deleting=True, finalizers=[]).machine("DELETED").vm("created", "a")
    )
    [late] = check_vm_deletions(created_late.events)
    assert "after the deletion was done" in late.message
    clean = (
        History()
        .machine("ADDED")
        .vm("created", "a")
        .machine(deleting=True)
        .vm("deleted", "a")
        .machine(deleting=True, finalizers=[])
        .machine("DELETED")
    )
    assert check_vm_deletions(clean.events) == []


def test_a_lost_bystander_mark_is_caught_until_the_bystander_removes_it() -> None:
    def version(rv: int, marks: list[str]) -> dict[str, Any]:
        return {"rv": rv, "marks": marks}

    kept = (
        History()
        .add("bystander", "marked", "machines/ns/m1", rv=5, marks=["l:k=v"])
        .add("marks", "MODIFIED", "machines/ns/m1", **version(5, ["l:k=v"]))
        .add("marks", "MODIFIED", "machines/ns/m1", **version(7, ["l:k=v"]))
    )
    assert check_bystander(kept.events) == []
    lost = kept.add("marks", "MODIFIED", "machines/ns/m1", **version(9, []))
    [violation] = check_bystander(lost.events)
    assert violation.invariant == "bystander" and "rv 9" in violation.message
    released = (
        History()
        .add("bystander", "marked", "nodes//n", rv=3, marks=["f:x"])
        .add("marks", "MODIFIED", "nodes//n", **version(4, ["f:x"]))
        .add("bystander", "unmarked", "nodes//n", rv=6, marks=["f:x"])
        .add("marks", "MODIFIED", "nodes//n", **version(6, []))
    )
    assert check_bystander(released.events) == []
    before_the_write = (
        History()
        .add("marks", "MODIFIED", "secrets/ns/s", **version(2, []))
        .add("bystander", "marked", "secrets/ns/s", rv=3, marks=["a:k=v"])
    )
    assert check_bystander(before_the_write.events) == []


def test_a_vm_changing_call_after_resuming_from_a_pause_past_the_deadline_is_caught() -> None:
    """Issue 36 #1: a leader SIGSTOPped past its renew deadline must not create (or delete) a VM
    once it resumes; reads are fine, and so is every call of other processes or before."""
    history = (
        History()
        .call("start", "1", pid=10)
        .call("end", "1", pid=10)
        .add("fault", "resume-past-deadline", "controller-0", "", pid=10)
        .call("start", "2", pid=11)
        .call("start", "3", pid=10, op="get_machine_status")
    )
    assert check_fenced(history.events) == []
    history.call("start", "4", pid=10)
    [violation] = check_fenced(history.events)
    assert violation.invariant == "fenced" and "create_machine started by pid 10" in violation.message
    history.call("start", "5", pid=10, op="delete_machine")
    assert len(check_fenced(history.events)) == 2
    assert {v.invariant for v in check_all(history.events, {}, now=100.0)} >= {"fenced"}


def test_check_all_combines_the_checks() -> None:
    history = (
        History().machine("ADDED").vm("created", "a").vm("created", "b").call("start", "1").call("start", "2")
    )
    found = {v.invariant for v in check_all(history.events, {}, now=100.0)}
    assert found == {"one-vm", "one-create"}


class Samples:
    """A scripted sampler (``None``: no leader answered; the last sample repeats) on a fake clock."""

    def __init__(self, *samples: tuple[int, float] | None) -> None:
        self.samples = list(samples)
        self.now = 0.0

    def sample(self) -> tuple[int, float] | None:
        return self.samples.pop(0) if len(self.samples) > 1 else self.samples[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def clock(self) -> float:
        return self.now


def _await(samples: Samples, threads: int = 100, slack: int = 4) -> str | None:
    violation = await_baseline(samples.sample, threads, slack, 45.0, clock=samples.clock, sleep=samples.sleep)
    assert violation is None or violation.invariant == "baseline"
    return None if violation is None else violation.message


def test_baseline_fails_without_a_leader_instead_of_passing_vacuously() -> None:
    """Issue 36 #5: no leader sampled used to read as threads 0 and depth 0, which passed."""
    message = _await(Samples(None))
    assert message is not None and "no leader reported" in message
    assert _await(Samples(None, None, (101, 0.0))) is None  # a leader elected meanwhile is fine


def test_baseline_fails_on_a_queue_that_does_not_drain_or_threads_that_stay() -> None:
    assert "queue depth 3" in (_await(Samples((100, 3.0))) or "")
    assert "threads 105 (baseline 100 + 4)" in (_await(Samples((105, 0.0))) or "")
    assert _await(Samples((120, 7.0), (104, 1.0), (104, 0.0))) is None


def test_the_baseline_is_measured_on_a_leader_or_reported_missing() -> None:
    """The thread-count baseline used to be skipped (0) when no leader answered at settle time."""
    none = Samples(None)
    assert measure_baseline(none.sample, 45.0, clock=none.clock, sleep=none.sleep) is None
    assert none.now >= 45.0, "it waits for a leader before giving up"
    late = Samples(None, None, (98, 2.0))
    assert measure_baseline(late.sample, 45.0, clock=late.clock, sleep=late.sleep) == 98


def test_an_expected_exit_lapses_so_a_later_exit_is_unexpected(tmp_path: Path) -> None:
    """Issue 36 #5: ``expect_exit`` used to stay set until a restart, so any later exit of the
    same process (a crash) was taken as the harness's doing."""
    now = [0.0]
    process = Managed("p", ["true"], {}, tmp_path / "p.log", clock=lambda: now[0])
    process.start()
    assert process.proc is not None and process.proc.wait(10) == 0
    process.expect_exit("leaderelection lost (stopped)", within=30.0)
    now[0] = 29.0
    assert process.exit_status() == (0, True, "leaderelection lost (stopped)")
    now[0] = 31.0
    code, expected, reason = process.exit_status() or (None, None, "")
    assert (code, expected) == (0, False) and "had lapsed" in reason
    exits: list[tuple[str, bool]] = []
    monitor = ProcessMonitor(lambda p, code, expected, reason: exits.append((p.name, expected)), interval=60)
    try:
        monitor.watch(process)
        monitor.poll()
    finally:
        monitor.close()
    assert exits == [("p", False)], "the late exit is reported as unexpected (an 'alive' violation)"

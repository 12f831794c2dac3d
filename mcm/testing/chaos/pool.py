"""The manager under chaos: a MachineDeployment, the ``machine-controller-manager`` process, and
the fault programs of the manager scenarios.

A manager scenario's program (:func:`manager_kills`, :func:`manager_api_faults`,
:func:`manager_mix`) brings up a :class:`Pool` for its own run and takes it down at the end:

1. **up**: a second MachineClass (``chaos-class-b``, once per harness); the MachineDeployment
   ``chaos-pool`` (``replicas``, ``maxSurge`` and ``maxUnavailable`` drawn from
   :data:`STRATEGIES`) on ``chaos-class``; ``machine-controller-manager`` as a process of the
   harness (``alive`` watches it), through fault proxies of its own; then the pool must settle
   within :data:`POOL_BOUND` (else ``md-converges``).
2. **faults**: roll-outs one after the other (the template's class switched between the two
   classes), and meanwhile the program's faults: the manager SIGKILLed (and started again, as
   Kubernetes restarts a container) or SIGSTOPped for less than its renew deadline, each at a
   random point of a roll-out (a pool machine created or deleted); or transport faults on its
   proxies (resets, refused connections, blackholes, writes cut mid-request or after the
   commit, latency) and 409/429/500 answers to its writes. Faults that may commit a create the
   manager never hears of switch on the overshoot allowance (``--safety-up``).
3. **converge**: faults off, the manager running; the pool must settle within
   :data:`POOL_BOUND`.
4. **down**: the MachineDeployment deleted (its sets and machines go with it, through the
   manager's and the controller's finalizers), the manager stopped, the proxies closed. The
   world's own convergence check follows: every VM and Node of the pool must be gone.

Then :func:`~mcm.testing.chaos.rollout.check_rollout` checks ``md-surge``, ``md-available``
and ``md-converges`` over the events recorded since the pool came up, and adds what broke to
the harness's violations. The pool's changes are recorded from the control emulator's store
(:class:`PoolRecorder`), so a fault on the manager's connections hides nothing from the check.
The owner of the world's other Machines (:class:`~mcm.testing.chaos.world.Owner`) leaves the
pool's machines alone.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import structlog

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINE_DEPLOYMENTS
from mcm.emulator.kubeconfig import write_kubeconfig
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import AlreadyExists, NotFound
from mcm.testing.chaos.harness import Harness
from mcm.testing.chaos.invariants import Violation
from mcm.testing.chaos.processes import Managed, free_port
from mcm.testing.chaos.rollout import (
    CONVERGE,
    OVERSHOOT_ALLOWED,
    check_rollout,
    deployment_view,
    machine_view,
    settled_problems,
)
from mcm.testing.chaos.tracker import Event, Tracker
from mcm.testing.chaos.world import CLASS_NAME, NAMESPACE, SECRET_NAME
from mcm.testing.faultproxy import FaultProxy

__all__ = [
    "CLASS_B",
    "POOL",
    "POOL_BOUND",
    "POOL_LABEL",
    "STRATEGIES",
    "Pool",
    "PoolRecorder",
    "manager_api_faults",
    "manager_command",
    "manager_kills",
    "manager_mix",
]

log = structlog.get_logger(__name__)

POOL = "chaos-pool"
POOL_LABEL = "chaos.mcm.dev/pool"
CLASS_B = "chaos-class-b"
POOL_BOUND = 60.0
"""Seconds the pool may take to settle: when it comes up, after the faults, and to go away."""
SAFETY_UP = 2
"""``--safety-up`` of the manager: the overshoot allowance while lossy faults are on."""
RENEW_DEADLINE = 10.0
"""``--leader-elect-renew-deadline`` of the manager (seconds); a SIGSTOP stays well below it."""
STRATEGIES: tuple[tuple[int, int | str, int | str], ...] = (
    (3, 1, 0),
    (3, 0, 1),
    (4, 1, 1),
    (4, "50%", "25%"),
)
"""``(replicas, maxSurge, maxUnavailable)`` a pool is drawn from: surge only, unavailability
only, both, and percentages (2 and 1 of 4)."""

MACHINES_RESOURCE = "machines.machine.sapcloud.io"
DEPLOYMENTS_RESOURCE = "machinedeployments.machine.sapcloud.io"
MANAGER_AGENT = "machine-controller-manager"
"""The user agent of the manager's clients (API faults on its writes only)."""


def manager_command() -> list[str]:
    """The ``machine-controller-manager`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("machine-controller-manager")
    if script.exists():
        return [str(script)]
    found = shutil.which("machine-controller-manager")
    if found:
        return [found]
    return [sys.executable, "-m", "mcm.app.manager.cli"]


def _manager_flags(kubeconfigs: tuple[Path, Path], port: int) -> list[str]:
    return [
        f"--control-kubeconfig={kubeconfigs[0]}",
        f"--target-kubeconfig={kubeconfigs[1]}",
        f"--namespace={NAMESPACE}",
        "--address=127.0.0.1",
        f"--port={port}",
        "--concurrent-syncs=5",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--machine-safety-overshooting-period=1s",
        f"--safety-up={SAFETY_UP}",
        "--leader-elect=true",
        "--leader-elect-lease-duration=15s",
        f"--leader-elect-renew-deadline={int(RENEW_DEADLINE)}s",
        "--leader-elect-retry-period=2s",
        "--log-format=json",
    ]


class PoolRecorder:
    """Records every change of the pool's MachineDeployment and of the Machines its label marks
    on the tracker (source ``pool``; see :mod:`~mcm.testing.chaos.rollout`), from the control
    emulator's store hooks: under the store's lock, only appending."""

    def __init__(self, tracker: Tracker, control: Any) -> None:
        self.tracker = tracker
        self.control = control
        self._last: dict[str, dict[str, Any]] = {}
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        self._unsubscribe = self.control.store.subscribe(self._change)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _change(self, change: Any) -> None:
        if change.key[0] != NAMESPACE:
            return
        obj = change.new.obj
        meta = obj.get("metadata") or {}
        if change.resource == DEPLOYMENTS_RESOURCE and change.key[1] == POOL:
            self._record("deployment", change, deployment_view(obj))
        elif change.resource == MACHINES_RESOURCE and (meta.get("labels") or {}).get(POOL_LABEL) == POOL:
            self._record("machine", change, machine_view(obj))

    def _record(self, kind: str, change: Any, view: dict[str, Any]) -> None:
        meta = change.new.obj.get("metadata") or {}
        ident = f"{kind}/{meta.get('uid', '')}"
        if change.type == "MODIFIED" and self._last.get(ident) == view:
            return
        self._last[ident] = view
        self.tracker.record(
            "pool", kind, meta.get("name", ""), meta.get("uid", ""), t=change.at, type=change.type, **view
        )


def _deployment(replicas: int, surge: int | str, unavailable: int | str) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineDeployment",
        "metadata": {"name": POOL, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {POOL_LABEL: POOL}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
            },
            "template": {
                "metadata": {"labels": {POOL_LABEL: POOL}},
                "spec": {"class": {"kind": "MachineClass", "name": CLASS_NAME}},
            },
        },
    }


class Pool:
    """One run's MachineDeployment and manager; see the module docstring."""

    def __init__(self, h: Harness, rng: random.Random) -> None:
        self.h = h
        self.rng = rng
        world = h.world
        self.client: ClusterClient = load_config(
            str(world.pair.control_kubeconfig), qps=-1, burst=0, user_agent_suffix="chaos-pool"
        )
        self.proxies = [
            FaultProxy((emu.host, emu.port), seed=rng.randrange(2**31), name=f"manager-{emu.name}").start()
            for emu in (world.control, world.target)
        ]
        kubeconfigs = (
            write_kubeconfig(
                h.directory / "manager-control.kubeconfig",
                "control",
                self.proxies[0].url,
                namespace=NAMESPACE,
            ),
            write_kubeconfig(h.directory / "manager-target.kubeconfig", "target", self.proxies[1].url),
        )
        port = free_port()
        self.process = Managed(
            "manager",
            [*manager_command(), *_manager_flags(kubeconfigs, port)],
            # TMPDIR: the lock that keeps the Lease identity its own (another run on this host
            # holds its own), so a restarted manager takes its Lease back at once
            {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(h.directory)},
            h.directory / "manager.log",
            port=port,
        )
        self.recorder = PoolRecorder(h.tracker, world.control)
        self.strategy = rng.choice(STRATEGIES)
        self.template = CLASS_NAME
        self.rolls = 0
        self._api_rules: list[Any] = []
        self.first_seq = 0

    # --- up and down ----------------------------------------------------------------------------

    def up(self) -> None:
        """Class, recorder, MachineDeployment, manager; then wait for the pool to settle."""
        self._ensure_class_b()
        self.first_seq = self.h.tracker.record("scenario", "pool-up", POOL, strategy=list(self.strategy)).seq
        self.recorder.start()
        self.client.resource(MACHINE_DEPLOYMENTS).create(_deployment(*self.strategy), namespace=NAMESPACE)
        self.h.start_process(self.process)
        self.h.tracker.record("check", CONVERGE, POOL, bound=POOL_BOUND, why="the pool came up")
        self.await_settled(POOL_BOUND)

    def _ensure_class_b(self) -> None:
        body = {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "MachineClass",
            "metadata": {"name": CLASS_B, "namespace": NAMESPACE},
            "providerSpec": {"flavour": "chaos-b"},
            "secretRef": {"name": SECRET_NAME, "namespace": NAMESPACE},
            "provider": "chaos",
        }
        with contextlib.suppress(AlreadyExists):
            self.client.resource(MACHINE_CLASSES).create(body, namespace=NAMESPACE)

    def down(self) -> None:
        """Delete the MachineDeployment and wait (up to :data:`POOL_BOUND`, the manager kept
        running) until it, its sets and machines are gone (else ``md-converges``)."""
        with contextlib.suppress(NotFound):
            self.client.resource(MACHINE_DEPLOYMENTS).delete(POOL, namespace=NAMESPACE)
        deadline = time.monotonic() + POOL_BOUND
        while self._leftovers() and time.monotonic() < deadline:
            self.ensure_running()
            time.sleep(0.25)
        left = self._leftovers()
        if left:
            message = f"{POOL_BOUND:g}s after its deletion, still there: {', '.join(left)}"
            self.h.violations.append(Violation("md-converges", time.monotonic(), POOL, message))

    def _leftovers(self) -> list[str]:
        world = self.h.world
        left = [
            f"MachineDeployment {o['metadata']['name']}"
            for o in world.control.list(DEPLOYMENTS_RESOURCE, NAMESPACE)
        ]
        left += [
            f"MachineSet {o['metadata']['name']}"
            for o in world.control.list("machinesets.machine.sapcloud.io", NAMESPACE)
        ]
        left += [f"Machine {m['metadata']['name']}" for m in self._machines()]
        return left

    def close(self) -> None:
        """Faults off, the manager stopped, proxies and recorder closed (whatever happened)."""
        self.clear_faults()
        self.process.stop()
        self.h.monitor.poll()
        self.recorder.stop()
        for proxy in self.proxies:
            proxy.close()
        self.client.close()

    def check(self) -> None:
        """The roll-out invariants over what was recorded since :meth:`up`. A record without a
        single pool Machine means the recorder is broken (the checks would pass on nothing):
        a harness error."""
        events = [e for e in self.h.tracker.events() if e.seq >= self.first_seq]
        self._write_history(events)
        if not any(e.source == "pool" and e.kind == "machine" for e in events):
            raise RuntimeError("the pool's recorder saw no Machine of the pool: nothing to check")
        self.h.violations.extend(check_rollout(events, POOL))

    def _write_history(self, events: list[Event]) -> None:
        """The pool's record, one event a line, in ``pool-<seq>.log`` of the run's directory."""
        origin = self.h.tracker.origin
        lines = [e.describe(origin) for e in events if e.source in ("pool", "check", "fault", "process")]
        path = self.h.directory / f"pool-{self.first_seq}.log"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    # --- the pool -------------------------------------------------------------------------------

    def _machines(self) -> list[dict[str, Any]]:
        machines = self.h.world.control.list(MACHINES_RESOURCE, NAMESPACE)
        return [m for m in machines if (m["metadata"].get("labels") or {}).get(POOL_LABEL) == POOL]

    def problems(self) -> list[str]:
        """Why the pool has not settled now (:func:`~mcm.testing.chaos.rollout.settled_problems`)."""
        deployments = [
            o
            for o in self.h.world.control.list(DEPLOYMENTS_RESOURCE, NAMESPACE)
            if o["metadata"]["name"] == POOL
        ]
        view = deployment_view(deployments[0]) if deployments else None
        return settled_problems(view, [machine_view(m) for m in self._machines()])

    def await_settled(self, seconds: float) -> bool:
        """Wait until the pool settles, at most ``seconds``; keeps the manager running."""
        deadline = time.monotonic() + seconds
        while self.problems():
            if time.monotonic() >= deadline:
                return False
            self.ensure_running()
            time.sleep(0.25)
        return True

    def roll(self) -> None:
        """Start a roll-out: the template's class switched to the other class."""
        self.rolls += 1
        self.template = CLASS_B if self.template == CLASS_NAME else CLASS_NAME
        patch = {"spec": {"template": {"spec": {"class": {"name": self.template}}}}}
        self.client.resource(MACHINE_DEPLOYMENTS).patch(POOL, patch, namespace=NAMESPACE)
        self.h.note("pool-roll", POOL, to=self.template)

    def converge(self) -> None:
        """Faults off, manager running, then wait for the pool to settle (``md-converges``)."""
        self.clear_faults()
        self.ensure_running()
        self.h.tracker.record("check", CONVERGE, POOL, bound=POOL_BOUND, why="the faults stopped")
        self.await_settled(POOL_BOUND)
        self.h.note(OVERSHOOT_ALLOWED, POOL, extra=0)

    # --- the manager's faults -------------------------------------------------------------------

    def ensure_running(self) -> None:
        """SIGCONT a stopped manager; start a dead one again."""
        if self.process.stopped:
            self.h.signal(self.process, signal.SIGCONT, "resumed")
        if not self.process.alive():
            self.h.monitor.poll()
            self.h.start_process(self.process)

    def kill(self, reason: str) -> None:
        """SIGKILL the manager; start it again after 0.2-1 s."""
        self.h.signal(self.process, signal.SIGKILL, reason)
        deadline = time.monotonic() + 10
        while self.process.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.ensure_running()

    def stop_for(self, seconds: float, reason: str) -> None:
        """SIGSTOP the manager for ``seconds`` (below its renew deadline: it keeps leading)."""
        self.h.signal(self.process, signal.SIGSTOP, reason)
        time.sleep(seconds)
        self.h.signal(self.process, signal.SIGCONT, "resumed")

    def api_errors(self, rate: float) -> None:
        """409, 429 (Retry-After 1 s) and 500 (half of them after the commit) on ``rate`` of the
        manager's writes to both clusters; the overshoot allowance goes on."""
        self.h.note(OVERSHOOT_ALLOWED, POOL, extra=SAFETY_UP)
        share = rate / 4
        for emulator in (self.h.world.control, self.h.world.target):
            for verb in ("create", "update", "patch", "delete"):
                remaining = 1.0
                for code, phase, retry_after in (
                    (409, "before", None),
                    (429, "before", 1),
                    (500, "before", None),
                    (500, "after", None),
                ):
                    rule = emulator.faults.add(
                        code=code,
                        verb=verb,
                        times=None,
                        probability=min(1.0, share / remaining),
                        phase=phase,
                        user_agent=MANAGER_AGENT,
                        retry_after=retry_after,
                    )
                    remaining -= share
                    self._api_rules.append(rule)
        self.h.note("manager-api-errors", POOL, rate=rate)

    def clear_faults(self) -> None:
        for rule in self._api_rules:
            rule.remove()
        self._api_rules.clear()
        for proxy in self.proxies:
            proxy.clear()


@contextlib.contextmanager
def _pool(h: Harness, rng: random.Random) -> Iterator[Pool]:
    """A pool up for the block; then converged, checked and taken down (see the module docstring)."""
    pool = Pool(h, rng)
    marks = [time.monotonic()]
    try:
        pool.up()
        marks.append(time.monotonic())
        yield pool
        marks.append(time.monotonic())
        pool.converge()
        marks.append(time.monotonic())
        pool.down()
        marks.append(time.monotonic())
        pool.check()
    finally:
        pool.close()
        spans = dict(
            zip(
                ("up", "faults", "converge", "down"),
                (round(b - a, 1) for a, b in itertools.pairwise(marks)),
                strict=False,  # a run that failed part-way has fewer spans
            )
        )
        h.tracker.record("scenario", "pool-down", POOL, rolls=pool.rolls, seconds=spans)
        log.info("chaos_pool_done", strategy=list(pool.strategy), rolls=pool.rolls, seconds=spans)


# --- the fault programs -----------------------------------------------------------------------


def _until(deadline: float) -> bool:
    return time.monotonic() < deadline


def _kill_point(event: Event) -> bool:
    """A pool machine created, or one whose deletion starts."""
    if event.source != "pool" or event.kind != "machine":
        return False
    return event.data.get("type") == "ADDED" or bool(event.data.get("deleting"))


def _rolls_and_kills(pool: Pool, rng: random.Random, deadline: float, kills: bool) -> None:
    """Roll-outs back to back until ``deadline``; with ``kills``, the manager SIGKILLed or
    SIGSTOPped at 1-3 random points of each (a pool machine created or being deleted)."""
    points: queue.SimpleQueue[Event] = queue.SimpleQueue()
    remove = pool.h.tracker.listen(lambda e: points.put(e) if _kill_point(e) else None)
    try:
        while _until(deadline):
            pool.roll()
            _drain(points)
            for _ in range(rng.randint(1, 3) if kills else 0):
                with contextlib.suppress(queue.Empty):
                    point = points.get(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                    time.sleep(rng.choice((0.0, rng.uniform(0.0, 0.3))))
                    where = f"at {point.kind} {point.key} ({point.data.get('type')})"
                    if rng.random() < 0.6:
                        pool.kill(where)
                    else:
                        pool.stop_for(rng.uniform(0.5, 0.4 * RENEW_DEADLINE), where)
            pool.await_settled(max(0.0, deadline - time.monotonic()))
    finally:
        remove()


def _drain(points: queue.SimpleQueue[Event]) -> None:
    while True:
        try:
            points.get_nowait()
        except queue.Empty:
            return


def _transport_faults(pool: Pool, rng: random.Random, deadline: float) -> None:
    """The manager's proxies: resets and refused connections, blackholes, writes cut mid-request
    or after the commit, latency; one at a time, 1-3 s each, until ``deadline``."""
    pool.h.note(OVERSHOOT_ALLOWED, POOL, extra=SAFETY_UP)
    while _until(deadline):
        fault = rng.choice(("resets", "blackhole", "write-resets", "latency"))
        seconds = min(rng.uniform(1.0, 3.0), max(0.1, deadline - time.monotonic()))
        pool.h.note("manager-proxy", POOL, fault=fault, seconds=round(seconds, 2))
        for proxy in pool.proxies:
            if fault == "resets":
                proxy.refuse_new = 0.2
                proxy.reset_all()
            elif fault == "blackhole":
                proxy.blackhole()
            elif fault == "write-resets":
                proxy.reset_writes, proxy.reset_writes_when = 0.2, rng.choice(("mid", "after"))
            else:
                proxy.latency, proxy.jitter = rng.uniform(0.05, 0.3), 0.2
        time.sleep(seconds)
        for proxy in pool.proxies:
            if fault == "blackhole":
                proxy.heal(reset=rng.random() < 0.5)
            proxy.clear()
        time.sleep(min(rng.uniform(0.2, 1.0), max(0.0, deadline - time.monotonic())))


def manager_kills(h: Harness, rng: random.Random, duration: float) -> None:
    """Roll-outs with the manager SIGKILLed or SIGSTOPped at random points of each."""
    with _pool(h, rng) as pool:
        _rolls_and_kills(pool, rng, time.monotonic() + duration, kills=True)


def manager_api_faults(h: Harness, rng: random.Random, duration: float) -> None:
    """Roll-outs while the manager's connections break and 10% of its writes fail."""
    with _pool(h, rng) as pool:
        deadline = time.monotonic() + duration
        pool.api_errors(0.1)
        faults = threading.Thread(
            target=_transport_faults, args=(pool, random.Random(rng.random()), deadline), daemon=True
        )
        faults.start()
        try:
            _rolls_and_kills(pool, rng, deadline, kills=False)
        finally:
            faults.join(30)


def manager_mix(h: Harness, rng: random.Random, duration: float) -> None:
    """Both at once: kills and stops, transport faults and API errors (the CI profile's)."""
    with _pool(h, rng) as pool:
        deadline = time.monotonic() + duration
        pool.api_errors(0.1)
        faults = threading.Thread(
            target=_transport_faults, args=(pool, random.Random(rng.random()), deadline), daemon=True
        )
        faults.start()
        try:
            _rolls_and_kills(pool, rng, deadline, kills=True)
        finally:
            faults.join(30)

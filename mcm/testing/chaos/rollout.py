"""The invariants of a MachineDeployment under chaos, checked over the recorded history of its pool.

The pool (:mod:`~mcm.testing.chaos.pool`) records, in commit order, every change of its
MachineDeployment and of the Machines its selector picks (tracker events of source ``pool``:
kind ``deployment`` with :func:`deployment_view`, kind ``machine`` with :func:`machine_view`),
and two markers of its own: :data:`OVERSHOOT_ALLOWED` when it switches on faults that may commit
a create the manager never hears of, and :data:`CONVERGE` when the faults stop.

====================  =====================================================================
invariant             holds when
====================  =====================================================================
``md-surge``          no Machine is created while that makes the pool's machines (those being
                      deleted included: they use up surge, as the manager counts them) more
                      than ``replicas + maxSurge``; while :data:`OVERSHOOT_ALLOWED` is on, more
                      than that plus its allowance (``--safety-up``: past it the manager must
                      freeze the set). After a scale-down the larger bound holds until the
                      pool has settled at the new size.
``md-available``      during a roll-out (from a template change made while ``replicas``
                      machines were Running until the pool has settled again) at least
                      ``replicas - maxUnavailable`` machines are Running and not being deleted
``md-converges``      within the bound of :data:`CONVERGE` after the faults stop, the pool
                      settles: exactly ``replicas`` machines, all Running on the template's
                      class and none being deleted, and the deployment's status (for its
                      current generation) says so
====================  =====================================================================

Their names and promises are in :data:`mcm.testing.chaos.invariants.INVARIANTS` (the report's
columns). ``maxSurge`` rounds a percentage up and ``maxUnavailable`` rounds it down, both 0 means
``maxUnavailable`` 1, and Recreate means surge 0 and every machine may be unavailable: upstream's
``ResolveFenceposts`` (v0.47.0 ``pkg/controller/deployment_util.go``), written again here so the
check does not share the manager's code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcm.testing.chaos.invariants import Violation
from mcm.testing.chaos.tracker import Event

__all__ = [
    "CONVERGE",
    "OVERSHOOT_ALLOWED",
    "check_rollout",
    "deployment_view",
    "fenceposts",
    "machine_view",
    "settled_problems",
]

OVERSHOOT_ALLOWED = "manager-overshoot-allowed"
"""A ``fault`` note, data ``extra``: machines the pool may have beyond ``replicas + maxSurge``
from now on (0 switches the allowance off)."""
CONVERGE = "pool-converge"
"""A ``check`` note, data ``bound``: the faults stopped; the pool must settle within ``bound`` s."""


# --- views of the objects --------------------------------------------------------------------


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _resolve(value: Any, replicas: int, round_up: bool) -> int:
    """An IntOrString of a rolling update: an integer, or a percentage of ``replicas``."""
    if isinstance(value, str) and value.endswith("%"):
        share = _int(value[:-1]) * replicas
        return -(-share // 100) if round_up else share // 100
    return _int(value)


def fenceposts(spec: Mapping[str, Any]) -> tuple[int, int]:
    """``(maxSurge, maxUnavailable)`` of a MachineDeployment spec, as upstream resolves them."""
    replicas = _int(spec.get("replicas"))
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0, replicas
    rolling = strategy.get("rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge"), replicas, round_up=True)
    unavailable = _resolve(rolling.get("maxUnavailable"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _class_of(template_spec: Mapping[str, Any]) -> str:
    return str((template_spec.get("class") or {}).get("name") or "")


def deployment_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the checks need of a MachineDeployment: its sizes, template class and status."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    surge, unavailable = fenceposts(spec)
    return {
        "replicas": _int(spec.get("replicas")),
        "surge": surge,
        "unavailable": unavailable,
        "template": _class_of((spec.get("template") or {}).get("spec") or {}),
        "generation": _int(meta.get("generation")),
        "deleting": bool(meta.get("deletionTimestamp")),
        "observed": _int(status.get("observedGeneration")),
        "st_replicas": _int(status.get("replicas")),
        "updated": _int(status.get("updatedReplicas")),
        "ready": _int(status.get("readyReplicas")),
        "available": _int(status.get("availableReplicas")),
    }


def machine_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the checks need of a Machine: its phase, deletion and class."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return {
        "phase": str((status.get("currentStatus") or {}).get("phase") or ""),
        "deleting": bool(meta.get("deletionTimestamp")),
        "template": _class_of(obj.get("spec") or {}),
    }


def _running(machine: Mapping[str, Any]) -> bool:
    return machine.get("phase") == "Running" and not machine.get("deleting")


def settled_problems(
    deployment: Mapping[str, Any] | None, machines: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Why the pool has not settled (empty when it has): views of its deployment and machines."""
    if deployment is None or deployment.get("deleting"):
        return ["no MachineDeployment" if deployment is None else "the MachineDeployment is being deleted"]
    machines = list(machines)
    replicas, template = deployment["replicas"], deployment["template"]
    problems = []
    if len(machines) != replicas:
        problems.append(f"{len(machines)} machines, want {replicas}")
    off = [m for m in machines if not _running(m) or m.get("template") != template]
    if off:
        shown = ", ".join(
            f"{m.get('template')}:{m.get('phase') or '-'}{'(deleting)' * bool(m.get('deleting'))}"
            for m in off
        )
        problems.append(f"not Running on {template}: {shown}")
    status = {k: deployment[k] for k in ("st_replicas", "updated", "ready", "available")}
    if deployment["observed"] < deployment["generation"] or any(v != replicas for v in status.values()):
        problems.append(
            f"status {status} (observed generation {deployment['observed']} of {deployment['generation']})"
        )
    return problems


# --- the checks over the history -------------------------------------------------------------


@dataclass
class _Converge:
    at: float
    bound: float
    why: str
    settled: bool = False
    problems: list[str] = field(default_factory=list)


@dataclass
class _Replay:
    """The pool as the history tells it, event by event, and what broke on the way."""

    deployment: dict[str, Any] | None = None
    machines: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: int = 0
    cap_floor: int = 0
    """A bound kept from before a scale-down until the pool settles at the new size."""
    rolling: bool = False
    short: bool = False
    """The availability is below its bound (reported once until it recovers)."""
    converges: list[_Converge] = field(default_factory=list)
    found: list[Violation] = field(default_factory=list)

    def step(self, event: Event) -> None:
        if event.source == "fault" and event.kind == OVERSHOOT_ALLOWED:
            self.extra = _int(event.data.get("extra"))
        elif event.source == "check" and event.kind == CONVERGE:
            bound = float(event.data.get("bound") or 0.0)
            self.converges.append(
                _Converge(event.t, bound, str(event.data.get("why") or "the faults stopped"))
            )
        elif event.source == "pool" and event.kind == "deployment":
            self._deployment(event)
        elif event.source == "pool" and event.kind == "machine":
            self._machine(event)
        else:
            return
        self._after(event)

    def _running(self) -> int:
        return sum(1 for m in self.machines.values() if _running(m))

    def _cap(self) -> int:
        if self.deployment is None:
            return 0
        return max(_int(self.deployment["replicas"]) + _int(self.deployment["surge"]), self.cap_floor)

    def _deployment(self, event: Event) -> None:
        before = self.deployment
        if event.data.get("type") == "DELETED":
            self.deployment, self.rolling = None, False
            return
        self.deployment = {k: v for k, v in event.data.items() if k != "type"}
        if before is None:
            return
        if self.deployment["replicas"] != before["replicas"]:
            self.rolling = False  # a scale is not a roll-out
            self.cap_floor = max(self.cap_floor, before["replicas"] + before["surge"])
        elif self.deployment["template"] != before["template"] and self._running() >= before["replicas"]:
            self.rolling = True

    def _machine(self, event: Event) -> None:
        key = event.uid or event.key
        if event.data.get("type") == "DELETED":
            self.machines.pop(key, None)
            return
        added = key not in self.machines
        self.machines[key] = {k: v for k, v in event.data.items() if k != "type"}
        if added and self.deployment is not None and len(self.machines) > self._cap() + self.extra:
            d = self.deployment
            allowed = f" + {self.extra} allowed" if self.extra else ""
            floor = (
                f" (kept from before a scale-down: {self.cap_floor})"
                if self.cap_floor > d["replicas"] + d["surge"]
                else ""
            )
            self.found.append(
                Violation(
                    "md-surge",
                    event.t,
                    event.key,
                    f"{event.key} made {len(self.machines)} machines > {d['replicas']} replicas + "
                    f"{d['surge']} maxSurge{allowed}{floor}",
                    event.uid,
                )
            )

    def _after(self, event: Event) -> None:
        problems = settled_problems(self.deployment, self.machines.values())
        if not problems:
            self.rolling, self.short, self.cap_floor = False, False, 0
        self._check_available(event)
        for converge in self.converges:
            if not converge.settled and event.t <= converge.at + converge.bound:
                converge.settled = not problems
                converge.problems = problems

    def _check_available(self, event: Event) -> None:
        if not self.rolling or self.deployment is None:
            return
        d = self.deployment
        running, least = self._running(), d["replicas"] - d["unavailable"]
        if running >= least:
            self.short = False
        elif not self.short:
            self.short = True
            self.found.append(
                Violation(
                    "md-available",
                    event.t,
                    event.key,
                    f"{running} Running < {d['replicas']} replicas - {d['unavailable']} maxUnavailable "
                    f"during the roll-out to {d['template']}",
                    event.uid,
                )
            )

    def unsettled(self, pool: str) -> list[Violation]:
        return [
            Violation(
                "md-converges",
                c.at + c.bound,
                pool,
                f"not settled {c.bound:g}s after {c.why}: {'; '.join(c.problems) or 'nothing recorded'}",
            )
            for c in self.converges
            if not c.settled
        ]


def check_rollout(events: Iterable[Event], pool: str = "pool") -> list[Violation]:
    """``md-surge``, ``md-available`` and ``md-converges`` over ``events`` (one pool's history,
    in recording order; ``pool`` names it in a convergence violation)."""
    replay = _Replay()
    for event in sorted(events, key=lambda e: e.seq):
        replay.step(event)
    return [*replay.found, *replay.unsettled(pool)]

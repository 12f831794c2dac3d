"""The demo's MachineDeployment story, told with ``machine-controller-manager`` running beside
the machine controller: create the pool, scale it up, roll it to another class, lose a Node
and watch the pool heal, scale it to 0.

The MachineDeployment is the one of the package's manifests (``control/04-machinedeployment.yaml``;
the other class is the second MachineClass of ``control/02-machineclasses.yaml``). Each step
writes what a user would write with ``kubectl`` (a scale through the scale subresource, a merge
patch of the template's class, a Node deleted in the target cluster) and then shows
``kubectl get machinedeployments,machinesets`` columns live (Ready, Desired, Up-to-date,
Available, Age; a MachineSet's Desired, Current, Ready, Age, plus its class) until the pool is
settled: exactly ``replicas`` Machines, all Running on the template's class and not being
deleted, and the deployment's status saying so. A step that does not settle within the
timeout raises :class:`~mcm.app.demokit.DemoFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from mcm.apis.machine import constants as c
from mcm.apis.machine.resources import MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from mcm.app.demokit import DemoFailed, Screen, _say, _wait
from mcm.runtime import objects as o
from mcm.runtime.client import ClusterClient, ListOptions
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.client.resources import NODES

__all__ = ["Pool", "pool_table"]

NAMESPACE = "default"


def _phase(machine: dict[str, Any]) -> str:
    return o.text(machine, "status", "currentStatus", "phase")


def _class(obj: dict[str, Any], *template: str) -> str:
    return o.text(obj, *template, "spec", "class", "name")


def _age(created: str) -> str:
    when = o.parse_time(created)
    return "-" if when is None else f"{max(0, int(time.time() - when.timestamp()))}s"


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _count(obj: dict[str, Any], *path: str) -> str:
    return str(o.sub(obj, *path[:-1]).get(path[-1]) or 0)


def pool_table(
    deployments: list[dict[str, Any]], sets: list[dict[str, Any]], machines: list[dict[str, Any]]
) -> list[str]:
    """``kubectl get machinedeployments,machinesets`` as it prints them (the CRDs' columns; no
    MachineSet part while there is none), each set's class added, sets oldest first, then one
    line counting the machines by phase (``Terminating`` once deleting, ``Creating`` before the
    machine controller gave it a phase)."""
    lines = _columns(
        [["NAME", "READY", "DESIRED", "UP-TO-DATE", "AVAILABLE", "AGE"]]
        + [
            [
                f"machinedeployment/{o.name_of(d)}",
                _count(d, "status", "readyReplicas"),
                _count(d, "spec", "replicas"),
                _count(d, "status", "updatedReplicas"),
                _count(d, "status", "availableReplicas"),
                _age(o.text(d, "metadata", "creationTimestamp")),
            ]
            for d in sorted(deployments, key=o.name_of)
        ]
    )
    if sets:
        lines.append("")
        lines += _columns(
            [["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CLASS"]]
            + [
                [
                    f"machineset/{o.name_of(s)}",
                    _count(s, "spec", "replicas"),
                    _count(s, "status", "replicas"),
                    _count(s, "status", "readyReplicas"),
                    _age(o.text(s, "metadata", "creationTimestamp")),
                    _class(s, "spec", "template"),
                ]
                for s in sorted(
                    sets, key=lambda s: (o.text(s, "metadata", "creationTimestamp"), o.name_of(s))
                )
            ]
        )
    return [*lines, "", f"machines: {_phases(machines)}"]


def _phases(machines: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for machine in machines:
        phase = "Terminating" if o.deletion_timestamp(machine) else _phase(machine) or "Creating"
        counts[phase] = counts.get(phase, 0) + 1
    return ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items())) or "none"


@dataclass
class Pool:
    """One MachineDeployment of the demo, its steps and what they took (:attr:`steps`)."""

    control: ClusterClient
    target: ClusterClient
    manifest: dict[str, Any]
    timeout: float
    alive: Callable[[], None] = lambda: None
    """Raises :class:`DemoFailed` when a process the pool needs has exited."""
    steps: dict[str, float] = field(default_factory=dict)
    """Seconds each step took to settle, by step name."""

    @property
    def name(self) -> str:
        return o.name_of(self.manifest)

    @property
    def selector(self) -> str:
        labels = o.sub(self.manifest, "spec", "selector", "matchLabels")
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

    # --- reading --------------------------------------------------------------------------------

    def _list(self, resource: Any, selector: str | None = None) -> list[dict[str, Any]]:
        try:
            found = self.control.resource(resource).list(
                ListOptions(label_selector=selector), namespace=NAMESPACE
            )
        except (ApiError, ConnectionFailed):
            return []
        return list(found.get("items") or [])

    def machines(self) -> list[dict[str, Any]]:
        return self._list(MACHINES, self.selector)

    def deployment(self) -> dict[str, Any] | None:
        try:
            return dict(self.control.resource(MACHINE_DEPLOYMENTS).get(self.name, namespace=NAMESPACE))
        except NotFound:
            return None

    def settled(self, replicas: int, class_name: str) -> bool:
        """Exactly ``replicas`` machines, Running on ``class_name``, none deleting, and the
        deployment's status (for its current generation) saying so."""
        machines = self.machines()
        ready = [
            m
            for m in machines
            if _phase(m) == "Running" and not o.deletion_timestamp(m) and _class(m) == class_name
        ]
        if len(machines) != replicas or len(ready) != replicas:
            return False
        deployment = self.deployment() or {}
        status = o.sub(deployment, "status")
        generation = o.sub(deployment, "metadata").get("generation") or 0
        return (status.get("observedGeneration") or 0) >= generation and all(
            (status.get(key) or 0) == replicas
            for key in ("replicas", "readyReplicas", "updatedReplicas", "availableReplicas")
        )

    def table(self) -> list[str]:
        """The pool's table now (:func:`pool_table`)."""
        return pool_table(self._list(MACHINE_DEPLOYMENTS), self._list(MACHINE_SETS), self.machines())

    def _await(self, step: str, what: str, done: Callable[[], bool]) -> float:
        """Show the table (a new one: the step's own lines precede it) until ``done``."""
        started = time.monotonic()
        screen = Screen()

        def check() -> bool:
            self.alive()
            screen.show(self.table())
            return done()

        _wait(what, check, self.timeout, interval=0.3)
        self.steps[step] = round(time.monotonic() - started, 1)
        return self.steps[step]

    # --- the steps ------------------------------------------------------------------------------

    def create(self) -> float:
        """Create the MachineDeployment of the manifest; wait until its machines run."""
        replicas = int(o.sub(self.manifest, "spec").get("replicas") or 0)
        rolling = o.sub(self.manifest, "spec", "strategy", "rollingUpdate")
        _say(
            f"creating MachineDeployment {self.name}: {replicas} machines of "
            f"{_class(self.manifest, 'spec', 'template')}, rolling updates with maxSurge "
            f"{rolling.get('maxSurge')} and maxUnavailable {rolling.get('maxUnavailable')}"
        )
        self.control.resource(MACHINE_DEPLOYMENTS).create(self.manifest, namespace=NAMESPACE)
        class_name = _class(self.manifest, "spec", "template")
        seconds = self._await(
            "create", f"{self.name} to run {replicas} machines", lambda: self.settled(replicas, class_name)
        )
        _say(f"{self.name}: {replicas} of {replicas} machines Ready after {seconds:.1f}s")
        return seconds

    def _current(self) -> tuple[int, str]:
        deployment = self.deployment() or {}
        return int(o.sub(deployment, "spec").get("replicas") or 0), _class(deployment, "spec", "template")

    def scale(self, replicas: int, step: str = "scale") -> float:
        """``kubectl scale machinedeployment``: a merge patch of the scale subresource."""
        before, class_name = self._current()
        _say(f"kubectl scale machinedeployment {self.name} --replicas={replicas}   # from {before}")
        self.control.resource(MACHINE_DEPLOYMENTS).patch(
            self.name, {"spec": {"replicas": replicas}}, namespace=NAMESPACE, subresource="scale"
        )
        done = (
            (lambda: self.machines() == []) if replicas == 0 else (lambda: self.settled(replicas, class_name))
        )
        seconds = self._await(step, f"{self.name} to have {replicas} machines", done)
        _say(f"{self.name}: {replicas} machines after {seconds:.1f}s")
        return seconds

    def roll(self, class_name: str) -> float:
        """A rolling update: the template's class changed with a merge patch."""
        replicas, before = self._current()
        _say(f"rolling {self.name} from {before} to {class_name}: new machines first, then old ones go")
        patch = {"spec": {"template": {"spec": {"class": {"name": class_name}}}}}
        self.control.resource(MACHINE_DEPLOYMENTS).patch(self.name, patch, namespace=NAMESPACE)
        seconds = self._await(
            "roll", f"{self.name} to roll to {class_name}", lambda: self.settled(replicas, class_name)
        )
        _say(f"{self.name}: {replicas} of {replicas} machines on {class_name} after {seconds:.1f}s")
        return seconds

    def lose_node(self) -> tuple[str, str]:
        """Delete the Node of the pool's first machine (as if it was lost); wait until the
        machine controller has deleted that machine and the manager has replaced it. Returns
        the lost machine and its replacement."""
        replicas, class_name = self._current()
        before = {o.name_of(m) for m in self.machines()}
        victim = sorted(before)[0]
        node = o.label(next(m for m in self.machines() if o.name_of(m) == victim), c.LABEL_NODE) or victim
        _say(
            f"node {node} is lost (deleted from the target cluster): its machine {victim} goes "
            "and the pool heals"
        )
        try:
            self.target.resource(NODES).delete(node)
        except NotFound:
            raise DemoFailed(f"node {node} of machine {victim} does not exist") from None

        def healed() -> bool:
            names = {o.name_of(m) for m in self.machines()}
            return victim not in names and self.settled(replicas, class_name)

        seconds = self._await("heal", f"{self.name} to replace {victim}", healed)
        replacement = ", ".join(sorted({o.name_of(m) for m in self.machines()} - before)) or "-"
        _say(f"{self.name}: {victim} deleted and replaced by {replacement} in {seconds:.1f}s")
        return victim, replacement

    def story(self, other_class: str) -> dict[str, Any]:
        """Every step in order; returns what happened for the demo's summary."""
        self.create()
        replicas, first_class = self._current()
        self.scale(replicas + 1)
        self.roll(other_class)
        lost, replacement = self.lose_node()
        self.scale(0, step="scale_to_zero")
        click.echo("")
        return {
            "name": self.name,
            "replicas": replicas + 1,
            "rolled": [first_class, other_class],
            "lost": lost,
            "replacement": replacement,
            "step_seconds": dict(self.steps),
        }

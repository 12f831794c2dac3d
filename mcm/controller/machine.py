"""Machine entry points: the ``machine`` and ``machinetermination`` queues (upstream v0.47.0
``machine.go``, ``reconcileClusterMachineKey`` and ``reconcileClusterMachine``; HEAD's termination queue).

``reconcile_machine_key`` (queue ``machine``): not found → done; deleting → handed to the
termination queue; frozen → Long; then ``reconcile_machine``: validate the spec, resolve the
class (kind, existence, secrets, class finalizer, node template), add the MCM finalizer, run
health and node sync when the machine has a node and a phase, and the creation flow when it
lacks a providerID or a phase (or is in CrashLoopBackOff).

``reconcile_machine_termination_key`` (queue ``machinetermination``): class resolution, then the
deletion flow, always requeued after the period it returns.

Bad input (invalid spec, missing class or secret, class of another kind) gets an Event and a
log line and is retried after upstream's period, never a crash. A class that does not carry its
finalizer yet (just created with its machines) is routine: a log line and ShortRetry, no Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.apis.machine.validation import ClassResolution, format_error_list, validate_machine
from mcm.controller.classmemo import ClassMemo, class_dict
from mcm.controller.common import phase_of, record_warning, record_write_failure
from mcm.controller.context import Deps
from mcm.controller.creation import trigger_creation_flow
from mcm.controller.deletion import trigger_deletion_flow
from mcm.controller.health import FailedMarks, reconcile_machine_health
from mcm.controller.nodesync import sync_node_templates
from mcm.controller.status import write_object
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.cache.keys import split_meta_namespace_key
from mcm.runtime.objects import Obj
from mcm.runtime.worker import DONE, Result

__all__ = ["MachineReconciler"]

log = structlog.get_logger(__name__)


def _sooner(result: Result, recheck: float | None) -> Result:
    """``result``, requeued no later than ``recheck`` seconds when one is asked for."""
    if recheck is None:
        return result
    if result.requeue_after is None:
        return Result.after(recheck)
    return Result.after(min(result.requeue_after, recheck))


class MachineReconciler:
    """The machine and machinetermination reconcilers over one :class:`Deps`."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.marks = FailedMarks()
        self.classes = ClassMemo(deps.namespace, self._cached_class, self._cached_secret)

    # --- keys -----------------------------------------------------------------------------------

    def _get(self, key: str) -> Obj | None:
        _, name = split_meta_namespace_key(key)
        machine = o.cached(self.deps.listers.machines, name)
        if machine is None:
            log.debug("machine_not_found", key=key)
        return machine

    def reconcile_machine_key(self, key: str) -> Result:
        """Queue ``machine``: everything but deletion."""
        machine = self._get(key)
        if machine is None:
            return DONE
        if o.deletion_timestamp(machine):
            self.deps.enqueue_termination(object_key(machine), 0.0)
            return DONE
        if self.deps.frozen():
            log.error("machine_controller_frozen", machine=key)
            return Result.after(c.LONG_RETRY)
        return self.reconcile_machine(machine)

    def reconcile_machine_termination_key(self, key: str) -> Result:
        """Queue ``machinetermination``: the deletion flow."""
        machine = self._get(key)
        if machine is None:
            return DONE
        if not o.deletion_timestamp(machine):
            self.deps.enqueue_machine(object_key(machine), 0.0)
            return DONE
        resolution = self.resolve_class(machine)
        if not resolution.ok or resolution.machine_class is None:
            return Result.after(resolution.retry)
        return trigger_deletion_flow(
            self.deps, machine, resolution.machine_class, resolution.secret_data or {}
        )

    # --- the machine loop -----------------------------------------------------------------------

    def reconcile_machine(self, machine: Obj) -> Result:
        errors = validate_machine(machine)
        if errors:
            message = c.ERR_MACHINE_VALIDATION.format(err=format_error_list(errors))
            record_warning(self.deps, machine, "InvalidSpec", message)
            return Result.after(c.LONG_RETRY)
        resolution = self.resolve_class(machine)
        if not resolution.ok or resolution.machine_class is None:
            return Result.after(resolution.retry)
        with_finalizer = self.add_machine_finalizer(machine)
        if isinstance(with_finalizer, Result):
            return with_finalizer
        machine = with_finalizer
        recheck = None
        if o.label(machine, c.LABEL_NODE) and phase_of(machine):
            health = reconcile_machine_health(
                self.deps, machine, self.marks, class_dict(resolution.machine_class)
            )
            if health.result is not None:
                return health.result
            machine, recheck = health.machine, health.recheck
            synced = sync_node_templates(self.deps, machine)
            if synced is not None:
                return _sooner(synced, recheck)
        if self._needs_creation(machine):
            created = trigger_creation_flow(
                self.deps, machine, resolution.machine_class, resolution.secret_data or {}
            )
            return _sooner(created, recheck)
        return _sooner(Result.after(c.LONG_RETRY), recheck)

    @staticmethod
    def _needs_creation(machine: Mapping[str, Any]) -> bool:
        phase = phase_of(machine)
        return not o.text(machine, "spec", "providerID") or phase in ("", c.PHASE_CRASH_LOOP_BACK_OFF)

    def resolve_class(self, machine: Mapping[str, Any]) -> ClassResolution:
        """Upstream ``ValidateMachineClass`` over the caches (memoized while the class and its
        Secrets are unchanged: :mod:`mcm.controller.classmemo`); failures get an Event."""
        resolution = self.classes.resolve(machine)
        if resolution.class_needs_finalizer and resolution.machine_class is not None:
            self._wait_for_class_finalizer(machine, resolution.machine_class.metadata.name or "", resolution)
        elif resolution.errors:
            record_warning(self.deps, machine, "InvalidClass", format_error_list(list(resolution.errors)))
        return resolution

    def _wait_for_class_finalizer(
        self, machine: Mapping[str, Any], class_name: str, resolution: ClassResolution
    ) -> None:
        """A class without its finalizer yet is routine (it was created with its machines; the
        class loop adds the finalizer and then enqueues them): enqueue the class and log, no
        Event; the machine is retried after ShortRetry if the class loop has not enqueued it
        before. Upstream v0.47.0 ``ValidateMachineClass`` logs and requeues likewise."""
        self.deps.enqueue_class(class_name)
        log.info(
            "machine_class_not_ready",
            machine=object_key(machine),
            machine_class=class_name,
            message=" ".join(error.detail or str(error) for error in resolution.errors),
            retry_after=resolution.retry,
        )

    def _cached(self, lister: Any, namespace: str, name: str) -> Mapping[str, Any] | None:
        if namespace != self.deps.namespace:
            return None
        return o.cached(lister, name)

    def _cached_class(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._cached(self.deps.listers.classes, namespace, name)

    def _cached_secret(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._cached(self.deps.listers.secrets, namespace, name)

    def add_machine_finalizer(self, machine: Obj) -> Obj | Result:
        """The machine with the MCM finalizer (written if missing)."""
        if c.MCM_FINALIZER in o.finalizers(machine):
            return machine
        write = write_object(self.deps.writers.machines, machine, o.with_finalizer(machine, c.MCM_FINALIZER))
        if not write.ok:
            message = f"adding the finalizer failed: {write.error}"
            record_write_failure(self.deps, machine, "FinalizerFailed", message, write)
            return Result.after(write.retry(c.SHORT_RETRY))
        return write.obj

"""The API-server safety loop (queue ``machinesafetyapiserver``): probe both clusters, freeze, unfreeze.

Upstream: v0.47.0 ``pkg/util/provider/machinecontroller/machine_safety.go``,
``reconcileClusterMachineSafetyAPIServer`` and ``isAPIServerUp``, with three of its bugs fixed
(said below; docs/controller.md, "API-server freeze"). :class:`APIServerSafety` owns the outage
start; the frozen flag lives in the controller (``Deps.frozen`` reads it, ``set_frozen`` writes
it). Guarantees:

- **Probe** (upstream's ``isAPIServerUp``): GET Machine ``dummy_name`` in the controller
  namespace, then Node ``dummy_name`` on the target; success or NotFound is "up"; an error, or
  no answer within the probe deadline (``max(timeout / 5, 0.5 s)``: a hanging server is down,
  the worker is never held), is "down".
- **State machine**: not frozen and up → the outage start is cleared (upstream keeps it, so
  one failed probe hours later froze at once), next run
  after the period. Not frozen and down → the outage start is the start of the first failed
  probe; once the outage lasted longer than ``--machine-safety-apiserver-statuscheck-timeout``
  the controller freezes; next run after timeout/5. Frozen and down → next run after the period.
  Frozen and up → unfreeze; a failed unfreeze is retried after ``min(period, ShortRetry)`` until
  it succeeds (upstream returns the error without rescheduling, and the loop died after the
  worker's retries: here the loop never returns an error and always schedules its next run).
- **Unfreeze**: every Machine in phase ``Unknown`` (re-read live) gets phase Running,
  ``timeoutActive`` false and a fresh ``lastUpdateTime`` (its health timer starts over), and
  lastOperation ``Machine Health Timeout was reset due to APIServer being unreachable``
  (Successful, HealthCheck); every other status field is kept (upstream wipes them). Every Machine is then
  enqueued after 30 s, and only then is the flag cleared.
- **Visible**: ``mcm_machine_controller_frozen`` (the controller's collector reads the flag), a
  log line at each transition, and an Event on every Machine the freeze holds back (no
  deletionTimestamp): Warning ``MachineControllerFrozen`` when freezing, Normal
  ``MachineControllerUnfrozen`` when unfreezing. (Events about a freeze caused by the control
  cluster reach it only if it answers again within the event sink's retries.)
- Without a target cluster the loop never runs again after its first pass (HEAD: the controller
  can never freeze).
"""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller.common import now, phase_of, record_normal, record_warning
from mcm.controller.context import Deps
from mcm.controller.status import last_operation, write_status
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.client.errors import ApiError, ConnectionFailed, is_not_found
from mcm.runtime.worker import DONE, Result

__all__ = ["PROBE_NAME", "UNFREEZE_REQUEUE_DELAY", "APIServerSafety", "probe_reachable"]

log = structlog.get_logger(__name__)

PROBE_NAME = "dummy_name"
"""The object both probes GET (it need not exist: NotFound counts as reachable)."""
UNFREEZE_REQUEUE_DELAY = 30.0
"""Every Machine is reconciled again this long after an unfreeze (upstream)."""
PROBE_DEADLINE_FLOOR = 0.5
"""The probe deadline is ``max(timeout / 5, PROBE_DEADLINE_FLOOR)`` seconds."""

Probe = Callable[[], object]
"""A GET that raises :class:`ApiError` (or anything else) when the server is not usable."""


def probe_reachable(deps: Deps, what: str, probe: Probe, deadline: float) -> bool:
    """Run ``probe`` with a deadline: ``True`` on success or NotFound, else ``False`` (logged)."""
    done = threading.Event()
    outcome: dict[str, BaseException | None] = {}

    def target() -> None:
        try:
            probe()
            outcome["error"] = None
        except BaseException as exc:  # every failure of the probe means "down"
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"apiserver-probe-{what}", daemon=True).start()
    if not deps.clock.wait(done, deadline):
        log.error("apiserver_probe_failed", cluster=what, error=f"no answer within {deadline:g}s")
        return False
    error = outcome.get("error")
    if error is None or (isinstance(error, ApiError) and is_not_found(error)):
        return True
    message = error.message if isinstance(error, ApiError) else f"{type(error).__name__}: {error}"
    log.error("apiserver_probe_failed", cluster=what, error=message)
    return False


class APIServerSafety:
    """The ``machinesafetyapiserver`` reconciler; see the module docstring."""

    def __init__(
        self,
        deps: Deps,
        set_frozen: Callable[[bool], None],
        *,
        requeue_delay: float = UNFREEZE_REQUEUE_DELAY,
    ) -> None:
        self.deps = deps
        self.set_frozen = set_frozen
        self.requeue_delay = requeue_delay
        self.inactive_since: _dt.datetime | None = None
        """Start of the current outage (the start of its first failed probe), if any."""

    @property
    def timeout(self) -> float:
        return self.deps.options.machine_safety_apiserver_statuscheck_timeout

    @property
    def period(self) -> float:
        return self.deps.options.machine_safety_apiserver_statuscheck_period

    def reconcile(self, _key: str) -> Result:
        """One probe and one step of the state machine; always says when to run next."""
        if not self.deps.has_target:
            return DONE
        started = now(self.deps)
        up = self.is_api_server_up()
        if self.deps.frozen():
            if not up:
                return Result.after(self.period)
            if not self.unfreeze():
                return Result.after(min(self.period, c.SHORT_RETRY))
            return Result.after(self.period)
        if up:
            self.inactive_since = None
            return Result.after(self.period)
        if self.inactive_since is None:
            self.inactive_since = started
        outage = (now(self.deps) - self.inactive_since).total_seconds()
        if outage > self.timeout:
            self.freeze(outage)
        return Result.after(self.timeout / 5)

    # --- probe --------------------------------------------------------------------------------

    def is_api_server_up(self) -> bool:
        """Control first; the target only when the control cluster answered."""
        deps = self.deps
        deadline = max(self.timeout / 5, PROBE_DEADLINE_FLOOR)

        def control() -> object:
            return deps.writers.machines.get(PROBE_NAME, namespace=deps.namespace)

        def target() -> object:
            assert deps.writers.nodes is not None
            return deps.writers.nodes.get(PROBE_NAME)

        if not probe_reachable(deps, "control", control, deadline):
            return False
        return probe_reachable(deps, "target", target, deadline)

    # --- transitions --------------------------------------------------------------------------

    def freeze(self, outage: float) -> None:
        """Set the flag; log and record an Event on every machine it holds back."""
        self.set_frozen(True)
        log.warning("machine_controller_frozen", unreachable_for=round(outage, 3), timeout=self.timeout)
        message = (
            f"Machine controller has frozen: an API server has been unreachable for {outage:.0f}s "
            f"(more than {self.timeout:g}s). Machines are not reconciled until it is back; "
            "deletions go on."
        )
        for machine in self._held_back():
            record_warning(self.deps, machine, "MachineControllerFrozen", message)

    def unfreeze(self) -> bool:
        """Reset Unknown machines, requeue all, then clear the flag; ``False`` to retry soon."""
        try:
            machines = sorted(self.deps.listers.machines.list(), key=o.name_of)
        except ApiError as err:
            log.error("unfreeze_machine_list_failed", error=err.message)
            return False
        for machine in machines:
            if phase_of(machine) == c.PHASE_UNKNOWN and not self.reset_health_timeout(o.name_of(machine)):
                return False
        for machine in machines:
            self.deps.enqueue_machine(object_key(machine), self.requeue_delay)
        self.set_frozen(False)
        self.inactive_since = None
        log.warning("machine_controller_unfrozen", machines=len(machines))
        message = "Machine controller has unfrozen: the API servers are reachable again."
        for held in self._held_back():
            record_normal(self.deps, held, "MachineControllerUnfrozen", message)
        return True

    def reset_health_timeout(self, name: str) -> bool:
        """Upstream's reset of one Unknown machine on live data; ``False`` when a call failed."""
        writer = self.deps.writers.machines
        try:
            live: Mapping[str, Any] = writer.get(name, namespace=self.deps.namespace)
        except (ApiError, ConnectionFailed) as err:
            if is_not_found(err):
                return True
            log.error("unfreeze_machine_get_failed", machine=name, error=str(err))
            return False
        if phase_of(live) != c.PHASE_UNKNOWN:
            return True
        when = now(self.deps)
        status = o.clone(o.sub(live, "status"))
        current = dict(o.sub(status, "currentStatus"))
        current.pop("timeoutActive", None)
        current.update(phase=c.PHASE_RUNNING, lastUpdateTime=o.format_time(when))
        status["currentStatus"] = current
        status["lastOperation"] = last_operation(
            c.DESC_HEALTH_TIMEOUT_RESET, c.STATE_SUCCESSFUL, c.OPERATION_HEALTH_CHECK, when
        )
        try:
            write = write_status(writer, live, status)
        except ConnectionFailed as err:
            log.error("unfreeze_machine_update_failed", machine=name, error=str(err))
            return False
        if not write.ok:
            return False
        log.info("machine_health_timeout_reset", machine=name)
        return True

    def _held_back(self) -> list[Mapping[str, Any]]:
        try:
            machines = self.deps.listers.machines.list()
        except ApiError:
            return []
        return [m for m in machines if not o.deletion_timestamp(m)]

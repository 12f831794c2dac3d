"""RenderController: one rendered MachineConfig per pool, from the pool's selection.

For each MachinePool (queue ``machineconfigcontroller-rendercontroller``, keyed by pool name):

1. **Find the MachineConfigs**: ``spec.machineConfigSelector`` with Deployment selector
   semantics, over every MachineConfig that no MachinePool controls (rendered configs are never
   inputs). An empty selector is refused (``SelectingAll``), as OpenShift does.
2. **Validate** each one (:func:`~mcm.machineconfig.validation.validate_spec`, MCO's
   ``ValidateMachineConfig``); a bad one (e.g. an unknown Ignition version) stops the render.
3. **Merge** them as Ignition merges configs (:func:`~mcm.machineconfig.merge.merge_specs`).
4. **Write** ``rendered-<pool>-<md5 of the content>`` if it does not exist, controlled by the
   pool (ownerReference). It is immutable: the same content always gets the same name, old ones
   are kept (for rollback), and a rendered config someone edited is written back.
5. **Point the pool at it**: ``status.currentMachineConfig``; ``RenderDegraded`` False.

Nothing is rendered while ControllerConfig ``machine-config-controller`` exists but its templates
are not rendered for its current generation (OpenShift waits the same way), so a pool never
gets a config without its role's base MachineConfigs.

Failures of 1-3 set ``RenderDegraded`` (and ``Degraded``) True with the reason, emit a Warning
Event on the pool (and on the bad MachineConfig) when the condition changes, and keep the
pool's previous ``currentMachineConfig`` — never a crash. A MachineConfig change re-renders the
pools that select it (before or after the change) after ``render_delay`` seconds, so a burst of
changes yields one rendered config (OpenShift's ``renderDelay``); a pool change re-renders at
once.

A paused pool is not rendered: its ``currentMachineConfig`` stays as it is until it is unpaused
(the original design: pausing "includes generating new desiredMachineConfig and update of
machines"; machine-config-operator renders paused pools and only stops their node updates). A
Normal Event ``Paused`` names the config the pool would get, once per change of it.
"""

from __future__ import annotations

from typing import Any

import structlog

from mcm.machineconfig import api
from mcm.machineconfig.base import SubController
from mcm.machineconfig.conditions import condition, set_condition
from mcm.machineconfig.context import Context, object_of, same_content
from mcm.machineconfig.ignition import content_digest
from mcm.machineconfig.merge import merge_specs
from mcm.machineconfig.pools import PoolIndex, PoolSpecError, config_selector, nodes_of_pool, spec_problem
from mcm.machineconfig.status import announce_status_change, count_nodes, pool_status, with_degraded
from mcm.machineconfig.validation import validate_spec
from mcm.runtime.cache import ResourceEventHandlerFuncs
from mcm.runtime.client import Object
from mcm.runtime.client.errors import AlreadyExists
from mcm.runtime.client.resources import NODES
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING
from mcm.runtime.worker import Result

__all__ = ["RenderController", "RenderError", "is_rendered", "select_configs"]

log = structlog.get_logger(__name__)


class RenderError(Exception):
    """The pool cannot be rendered; ``reason`` is the condition and event reason."""

    def __init__(self, reason: str, message: str, config: Object | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.config = config


def is_rendered(config: Object) -> bool:
    """Whether a MachinePool controls this MachineConfig (a rendered config)."""
    ref = api.controller_ref(config)
    return ref is not None and ref.get("kind") == api.MACHINE_POOLS.kind


def select_configs(pool: Object, configs: list[Object]) -> list[Object]:
    """The pool's MachineConfigs sorted by name; :class:`RenderError` if there are none."""
    try:
        selector = config_selector(pool)
    except PoolSpecError as err:
        raise RenderError(err.reason, str(err)) from None
    selected = sorted(
        (c for c in configs if not is_rendered(c) and selector.matches(api.labels_of(c))), key=api.name_of
    )
    if not selected:
        raise RenderError(
            api.Reason.NO_MACHINE_CONFIGS, f"no MachineConfigs found matching selector {selector or '<none>'}"
        )
    return selected


def render(pool: Object, configs: list[Object]) -> Object:
    """The rendered MachineConfig of ``pool`` from its selected ``configs`` (validated)."""
    for config in configs:
        problems = validate_spec(config.get("spec"))
        if problems:
            message = f"MachineConfig {api.name_of(config)}: {'; '.join(problems)}"
            raise RenderError(api.Reason.INVALID_MACHINE_CONFIG, message, config)
    spec = merge_specs(configs)
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.MACHINE_CONFIGS.kind,
        "metadata": {
            "name": api.rendered_name(api.name_of(pool), content_digest(spec)),
            "ownerReferences": [api.owner_reference(pool, api.MACHINE_POOLS.kind)],
            "annotations": {api.GENERATED_BY_ANNOTATION: api.CONTROLLER_VERSION},
        },
        "spec": spec,
    }


class RenderController(SubController):
    """See the module docstring."""

    name = api.RENDER_CONTROLLER

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.pools = ctx.cached(api.MACHINE_POOLS)
        self.configs = ctx.cached(api.MACHINE_CONFIGS)
        self.controller_configs = ctx.cached(api.CONTROLLER_CONFIGS)
        self.nodes = ctx.cached(NODES)
        self.synced = ctx.synced(api.MACHINE_POOLS, api.MACHINE_CONFIGS, api.CONTROLLER_CONFIGS, NODES)
        self._held: dict[str, str] = {}
        """pool → the config a paused pool would get, as last announced."""
        ctx.informers.informer_for(api.CONTROLLER_CONFIGS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=lambda _: self._enqueue_all(),
                on_update=lambda _old, _new: self._enqueue_all(),
                on_delete=lambda _: self._enqueue_all(),
            )
        )
        ctx.informers.informer_for(api.MACHINE_POOLS).add_event_handler(
            ResourceEventHandlerFuncs(on_add=self._pool_event, on_update=self._pool_updated)
        )
        ctx.informers.informer_for(api.MACHINE_CONFIGS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=lambda obj: self._config_event(None, obj),
                on_update=self._config_event,
                on_delete=lambda obj: self._config_event(None, obj),
            )
        )

    # -- handlers (enqueue only) -----------------------------------------------------------------
    def _pool_event(self, obj: Any) -> None:
        pool = object_of(obj)
        if pool is not None:
            self.enqueue(api.name_of(pool))

    def _enqueue_all(self) -> None:
        """The templates changed: every pool, after the render delay (their MachineConfigs'
        events usually arrive just after the ControllerConfig's)."""
        for pool in self.pools.list():
            self.enqueue(api.name_of(pool), self.ctx.options.render_delay)

    def _pool_updated(self, old: Object, new: Object) -> None:
        old_meta, new_meta = api.meta(old), api.meta(new)
        target_changed = api.status_of(old).get("currentMachineConfig") != api.status_of(new).get(
            "currentMachineConfig"
        )
        if old_meta.get("generation") != new_meta.get("generation") or target_changed:
            self.enqueue(api.name_of(new))

    def _config_event(self, old: Any, new: Any) -> None:
        """A rendered config: its pool at once; any other: the pools selecting it, delayed."""
        old_config, new_config = object_of(old), object_of(new)
        if old_config is not None and new_config is not None and same_content(old_config, new_config):
            return
        for config in (old_config, new_config):
            if config is None:
                continue
            if is_rendered(config):
                self.enqueue(str((api.controller_ref(config) or {}).get("name") or ""))
                continue
            for pool in self.pools.list():
                try:
                    if config_selector(pool).matches(api.labels_of(config)):
                        self.enqueue(api.name_of(pool), self.ctx.options.render_delay)
                except PoolSpecError:
                    continue

    # -- the pass --------------------------------------------------------------------------------
    def sync(self, key: str) -> Result | None:
        pool = self.pools.get(key)
        if pool is None or api.meta(pool).get("deletionTimestamp"):
            return None
        waiting = self._templates_pending()
        if waiting:
            log.info("render_waiting_for_templates", pool=key, reason=waiting)
            return None  # the ControllerConfig's next status change enqueues every pool
        try:
            rendered = render(pool, select_configs(pool, self.configs.list()))
        except RenderError as err:
            self._set_status(pool, err)
            return None
        if api.spec_of(pool).get("paused") is True:
            self._hold(pool, api.name_of(rendered))
            self._set_status(pool, None, str(api.status_of(pool).get("currentMachineConfig") or ""))
            return None
        self._held.pop(key, None)
        self._ensure_rendered(pool, rendered)
        self._set_status(pool, None, api.name_of(rendered))
        return None

    def _hold(self, pool: Object, name: str) -> None:
        """A paused pool: say (once per config) what it would get, write nothing."""
        key = api.name_of(pool)
        if name == api.status_of(pool).get("currentMachineConfig") or self._held.get(key) == name:
            return
        self._held[key] = name
        log.info("render_paused", pool=key, config=name)
        message = f"Pool {key} is paused; {name} will be rendered and rolled out when it is unpaused"
        self.recorder.event(pool, EVENT_TYPE_NORMAL, api.Reason.PAUSED, message)

    def _templates_pending(self) -> str:
        """Why the role templates are not rendered yet ("" when they are, or when there is no
        ControllerConfig). Rendering before them would roll out configs without the base
        MachineConfigs (OpenShift's ``IsControllerConfigCompleted``)."""
        controller_config = self.controller_configs.get(api.CONTROLLER_CONFIG_NAME)
        if controller_config is None:
            return ""
        status = api.status_of(controller_config)
        if status.get("observedGeneration") != api.meta(controller_config).get("generation"):
            return "ControllerConfig not observed yet"
        completed = condition(status.get("conditions"), api.TEMPLATE_COMPLETED) or {}
        if completed.get("status") != "True":
            return f"templates not rendered: {completed.get('message') or 'pending'}"
        missing = sorted(n for n in self.ctx.template_names if self.configs.get(n) is None)
        if missing:
            return f"generated MachineConfigs not seen yet: {', '.join(missing)}"
        return ""

    def _ensure_rendered(self, pool: Object, rendered: Object) -> None:
        """Create the rendered config, or write back its spec if someone edited it."""
        name = api.name_of(rendered)
        existing = self.configs.get(name)
        client = self.ctx.client.resource(api.MACHINE_CONFIGS)
        if existing is None:
            try:
                self.configs.record(client.create(rendered))
            except AlreadyExists:
                return  # created by an earlier pass; the cache will have it
            log.info("rendered_config_generated", pool=api.name_of(pool), config=name)
            self.recorder.eventf(
                pool,
                EVENT_TYPE_NORMAL,
                api.Reason.RENDERED_CONFIG_GENERATED,
                "%s successfully generated",
                name,
            )
            return
        if existing.get("spec") != rendered["spec"]:
            self.configs.record(client.update({**existing, "spec": rendered["spec"]}))
            message = f"{name} was modified; its content is restored (rendered configs are immutable)"
            self.recorder.event(pool, EVENT_TYPE_WARNING, api.Reason.RENDERED_CONFIG_RESTORED, message)

    def _set_status(self, pool: Object, error: RenderError | None, target: str = "") -> None:
        """``RenderDegraded`` (and ``Degraded``) from ``error``. A new ``currentMachineConfig``
        comes with the counts and conditions towards it, so the status is never a mix of the
        new target and the old target's counts."""
        old = api.status_of(pool)
        clock = self.ctx.clock
        if error is None:
            status = (
                self._status_for_target(pool, target)
                if target != old.get("currentMachineConfig")
                else dict(old)
            )
            conditions = set_condition(
                status.get("conditions"), api.POOL_RENDER_DEGRADED, status=False, clock=clock
            )
        else:
            status = dict(old)
            message = f"Failed to render configuration for pool {api.name_of(pool)}: {error}"
            conditions = set_condition(
                old.get("conditions"),
                api.POOL_RENDER_DEGRADED,
                status=True,
                reason=error.reason,
                message=message,
                clock=clock,
            )
        status["conditions"] = with_degraded(conditions, spec_problem(pool), clock)
        if status == old:
            return
        written = self.ctx.client.resource(api.MACHINE_POOLS).update_status({**pool, "status": status})
        self.pools.record(written)
        self._announce(written, old, status, error)
        announce_status_change(self.recorder, written, old, status, spec_problem(pool))

    def _status_for_target(self, pool: Object, target: str) -> dict[str, Any]:
        nodes, contested = nodes_of_pool(pool, PoolIndex(self.pools.list()), self.nodes.list())
        problem = spec_problem(pool, len(nodes))
        whys = [why for _, why in sorted(contested, key=lambda item: api.name_of(item[0]))]
        counts = count_nodes(nodes, target, contested=whys)
        return pool_status(pool, counts, target, problem, self.ctx.clock)

    def _announce(
        self, pool: Object, old: dict[str, Any], new: dict[str, Any], error: RenderError | None
    ) -> None:
        if error is not None:
            before = condition(old.get("conditions"), api.POOL_RENDER_DEGRADED) or {}
            after = condition(new.get("conditions"), api.POOL_RENDER_DEGRADED) or {}
            if before.get("message") != after.get("message"):
                log.warning("render_failed", pool=api.name_of(pool), reason=error.reason, error=str(error))
                self.recorder.event(pool, EVENT_TYPE_WARNING, error.reason, str(after.get("message")))
                if error.config is not None:
                    self.recorder.event(error.config, EVENT_TYPE_WARNING, error.reason, str(error))
            return
        if old.get("currentMachineConfig") != new.get("currentMachineConfig"):
            log.info("pool_targeting", pool=api.name_of(pool), config=new.get("currentMachineConfig"))
            self.recorder.eventf(
                pool,
                EVENT_TYPE_NORMAL,
                api.Reason.UPDATING,
                "Pool %s now targeting MachineConfig %s",
                api.name_of(pool),
                new.get("currentMachineConfig"),
            )

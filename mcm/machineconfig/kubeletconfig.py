"""KubeletConfigController: a KubeletConfig becomes MachineConfig
``99-<pool>-kubelet-managed``, which the RenderController then picks up.

For each KubeletConfig (queue ``machineconfigcontroller-kubeletconfigcontroller``) the design's
steps, for every MachinePool its ``machineConfigPoolSelector`` selects (by the pool's labels):

1. **Validate** the user's fields (:mod:`mcm.machineconfig.kubelet`); a refused or unknown field
   gives a ``Failure`` condition and a Warning Event, and leaves the MachineConfigs as they were.
2. **Render the pool's current kubelet configuration**: the pool's MachineConfigs merged as the
   RenderController merges them, *without* the managed one, and ``/etc/kubernetes/kubelet.conf``
   of the result decoded from YAML. (OpenShift renders it from the role's templates; using the
   pool's own configs keeps user MachineConfigs that change ``kubelet.conf``, and leaving the
   managed one out means a field removed from the KubeletConfig really goes away.)
3. **Merge** the fields of every KubeletConfig selecting the pool over it, oldest first
   (mergo ``WithOverride``), 4. **serialize** the result as YAML and 5. **create or update**
   ``99-<pool>-kubelet-managed`` with that file, labelled with the pool's role and
   ``machineConfigSelector.matchLabels`` so the pool selects it, and owned by those
   KubeletConfigs. An edit of the managed MachineConfig is overwritten.

A finalizer (``machineconfiguration.openshift.io/kubelet-managed``) keeps a deleted
KubeletConfig until the managed MachineConfigs are rewritten without it (deleted when no
KubeletConfig is left for the pool), so a deletion rolls the nodes back even without a garbage
collector. Status: ``Success`` / ``Failure`` conditions (OpenShift's types; OpenShift records a
failure as ``Failure`` with status False, mcm as status True so ``kubectl wait
--for=condition=Failure`` works) and ``observedGeneration``.
"""

from __future__ import annotations

from typing import Any

import structlog
import yaml

from mcm.machineconfig import api
from mcm.machineconfig.base import SubController
from mcm.machineconfig.conditions import set_condition
from mcm.machineconfig.context import Context, object_of, same_content
from mcm.machineconfig.ignition import data_url, file_text
from mcm.machineconfig.kubelet import merge_kubelet_config, validate_kubelet_config
from mcm.machineconfig.merge import merge_specs
from mcm.machineconfig.render import RenderError, select_configs
from mcm.machineconfig.validation import validate_spec
from mcm.runtime.cache import ResourceEventHandlerFuncs
from mcm.runtime.client import Object
from mcm.runtime.client.errors import AlreadyExists, NotFound
from mcm.runtime.labels import selector_from_label_selector
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING
from mcm.runtime.worker import Result

__all__ = ["KubeletConfigController", "KubeletConfigError", "pools_of"]

log = structlog.get_logger(__name__)


class KubeletConfigError(Exception):
    """The KubeletConfig cannot be applied (to one pool, or at all)."""


def _deleting(obj: Object) -> bool:
    return bool(api.meta(obj).get("deletionTimestamp"))


def pools_of(kubelet_config: Object, pools: list[Object]) -> list[Object]:
    """The pools the KubeletConfig's ``machineConfigPoolSelector`` selects, sorted by name."""
    raw = api.spec_of(kubelet_config).get("machineConfigPoolSelector")
    if raw is None:
        raise KubeletConfigError(
            "spec.machineConfigPoolSelector is required: without it the KubeletConfig applies to no pool"
        )
    if isinstance(raw, dict) and not raw.get("matchLabels") and not raw.get("matchExpressions"):
        raise KubeletConfigError(
            "spec.machineConfigPoolSelector selects every pool; a non-empty selector is required"
        )
    try:
        selector = selector_from_label_selector(raw if isinstance(raw, dict) else None)
    except (ValueError, TypeError, AttributeError) as err:
        raise KubeletConfigError(f"spec.machineConfigPoolSelector does not parse: {err}") from None
    return sorted((p for p in pools if selector.matches(api.labels_of(p))), key=api.name_of)


def _applies_to(kubelet_config: Object, pool: Object) -> bool:
    if _deleting(kubelet_config) or validate_kubelet_config(api.spec_of(kubelet_config).get("kubeletConfig")):
        return False
    try:
        return bool(pools_of(kubelet_config, [pool]))
    except KubeletConfigError:
        return False


def _age_order(obj: Object) -> tuple[str, str]:
    return (str(api.meta(obj).get("creationTimestamp") or ""), api.name_of(obj))


class KubeletConfigController(SubController):
    """See the module docstring."""

    name = api.KUBELET_CONFIG_CONTROLLER

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.kubelet_configs = ctx.cached(api.KUBELET_CONFIGS)
        self.pools = ctx.cached(api.MACHINE_POOLS)
        self.configs = ctx.cached(api.MACHINE_CONFIGS)
        self.synced = ctx.synced(api.KUBELET_CONFIGS, api.MACHINE_POOLS, api.MACHINE_CONFIGS)
        ctx.informers.informer_for(api.KUBELET_CONFIGS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self._kubelet_config_event, on_update=self._kubelet_config_updated
            )
        )
        ctx.informers.informer_for(api.MACHINE_POOLS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=lambda _: self._enqueue_all(),
                on_update=lambda old, new: self._enqueue_all() if self._pool_changed(old, new) else None,
                on_delete=lambda _: self._enqueue_all(),
            )
        )
        ctx.informers.informer_for(api.MACHINE_CONFIGS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=lambda obj: self._config_event(None, obj),
                on_update=self._config_event,
                on_delete=lambda obj: self._config_event(None, obj),
            )
        )

    # -- handlers (enqueue only) -----------------------------------------------------------------
    def _kubelet_config_event(self, obj: Any) -> None:
        kubelet_config = object_of(obj)
        if kubelet_config is not None:
            self.enqueue(api.name_of(kubelet_config))

    def _kubelet_config_updated(self, old: Object, new: Object) -> None:
        if api.meta(old).get("generation") != api.meta(new).get("generation") or _deleting(old) != _deleting(
            new
        ):
            self.enqueue(api.name_of(new))

    @staticmethod
    def _pool_changed(old: Object, new: Object) -> bool:
        return api.labels_of(old) != api.labels_of(new) or api.meta(old).get("generation") != api.meta(
            new
        ).get("generation")

    def _config_event(self, old: Any, new: Any) -> None:
        """Any input of a pool's kubelet.conf (or the managed config itself) changed."""
        configs = [c for c in (object_of(old), object_of(new)) if c is not None]
        if len(configs) == 2 and same_content(configs[0], configs[1]):
            return
        if all(api.name_of(c).startswith(api.RENDERED_PREFIX) for c in configs):
            return
        self._enqueue_all()

    def _enqueue_all(self) -> None:
        for kubelet_config in self.kubelet_configs.list():
            self.enqueue(api.name_of(kubelet_config))

    # -- the pass --------------------------------------------------------------------------------
    def sync(self, key: str) -> Result | None:
        kubelet_config = self.kubelet_configs.get(key)
        if kubelet_config is None:
            return None
        if _deleting(kubelet_config):
            self._finalize(kubelet_config)
            return None
        kubelet_config = self._ensure_finalizer(kubelet_config)
        problems = validate_kubelet_config(api.spec_of(kubelet_config).get("kubeletConfig"))
        if problems:
            self._set_status(kubelet_config, api.Reason.KUBELET_CONFIG_INVALID, "; ".join(problems))
            return None
        invalid = ""
        try:
            selected = pools_of(kubelet_config, self.pools.list())
        except KubeletConfigError as err:  # it applies to no pool: take it out of those it was in
            selected, invalid = [], str(err)
        errors = []
        for pool in self._pools_touched(kubelet_config, selected):
            try:
                self._sync_pool(pool, kubelet_config)
            except KubeletConfigError as err:
                errors.append(f"pool {api.name_of(pool)}: {err}")
        if invalid:
            self._set_status(kubelet_config, api.Reason.KUBELET_CONFIG_INVALID, invalid)
            return None
        if not selected:
            errors.append("no MachinePool matches spec.machineConfigPoolSelector")
        self._set_status(
            kubelet_config, api.Reason.KUBELET_CONFIG_FAILED if errors else "", "; ".join(errors)
        )
        return None

    def _pools_touched(self, kubelet_config: Object, selected: list[Object]) -> list[Object]:
        """The selected pools plus those whose managed config this KubeletConfig still owns."""
        names = {api.name_of(p) for p in selected}
        owned = {
            name
            for pool in self.pools.list()
            if (name := api.name_of(pool)) not in names and self._owns(kubelet_config, name)
        }
        return selected + [p for p in self.pools.list() if api.name_of(p) in owned]

    def _owns(self, kubelet_config: Object, pool: str) -> bool:
        managed = self.configs.get(api.kubelet_managed_name(pool))
        uid = api.meta(kubelet_config).get("uid")
        refs = api.meta(managed).get("ownerReferences") if managed is not None else None
        return isinstance(refs, list) and any(isinstance(r, dict) and r.get("uid") == uid for r in refs)

    def _sync_pool(self, pool: Object, trigger: Object) -> None:
        """Write (or delete) ``99-<pool>-kubelet-managed`` from every KubeletConfig of the pool."""
        contributors = sorted(
            (k for k in self.kubelet_configs.list() if _applies_to(k, pool)), key=_age_order
        )
        name = api.kubelet_managed_name(api.name_of(pool))
        if not contributors:
            self._delete_managed(name, trigger)
            return
        merged = self._base_kubelet_config(pool, name)
        for kubelet_config in contributors:
            merged = merge_kubelet_config(merged, api.spec_of(kubelet_config).get("kubeletConfig") or {})
        self._apply_managed(pool, name, yaml.safe_dump(merged, sort_keys=True), contributors, trigger)

    def _base_kubelet_config(self, pool: Object, managed: str) -> dict[str, Any]:
        """The pool's ``kubelet.conf`` as its MachineConfigs other than ``managed`` render it."""
        inputs = [c for c in self.configs.list() if api.name_of(c) != managed]
        try:
            configs = select_configs(pool, inputs)
        except RenderError as err:
            raise KubeletConfigError(f"cannot render the pool: {err}") from None
        bad = [api.name_of(c) for c in configs if validate_spec(c.get("spec"))]
        if bad:
            raise KubeletConfigError(f"cannot render the pool: invalid MachineConfigs {', '.join(bad)}")
        text = file_text(merge_specs(configs), api.KUBELET_CONF_PATH)
        if text is None:
            raise KubeletConfigError(f"its MachineConfigs have no {api.KUBELET_CONF_PATH}")
        try:
            base = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise KubeletConfigError(f"{api.KUBELET_CONF_PATH} is not YAML: {err}") from None
        if not isinstance(base, dict):
            raise KubeletConfigError(f"{api.KUBELET_CONF_PATH} is not a KubeletConfiguration object")
        return base

    def _managed_config(self, pool: Object, name: str, text: str, owners: list[Object]) -> Object:
        selector = api.spec_of(pool).get("machineConfigSelector")
        match_labels = selector.get("matchLabels") if isinstance(selector, dict) else None
        labels = {
            api.ROLE_LABEL: api.name_of(pool),
            **(match_labels if isinstance(match_labels, dict) else {}),
        }
        kubelet_file = {
            "path": api.KUBELET_CONF_PATH,
            "mode": 0o644,
            "overwrite": True,
            "contents": {"source": data_url(text)},
        }
        return {
            "apiVersion": api.API_VERSION,
            "kind": api.MACHINE_CONFIGS.kind,
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {api.GENERATED_BY_ANNOTATION: api.CONTROLLER_VERSION},
                "ownerReferences": [
                    api.owner_reference(k, api.KUBELET_CONFIGS.kind, controller=False) for k in owners
                ],
            },
            "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [kubelet_file]}}},
        }

    def _apply_managed(
        self, pool: Object, name: str, text: str, owners: list[Object], trigger: Object
    ) -> None:
        wanted = self._managed_config(pool, name, text, owners)
        try:
            select_configs(pool, [wanted])
        except RenderError:
            raise KubeletConfigError(f"its machineConfigSelector does not select {name}") from None
        client = self.ctx.client.resource(api.MACHINE_CONFIGS)
        existing = self.configs.get(name)
        if existing is None:
            try:
                self.configs.record(client.create(wanted))
            except AlreadyExists:
                return
        elif (existing.get("spec"), api.meta(existing).get("ownerReferences"), api.labels_of(existing)) != (
            wanted["spec"],
            wanted["metadata"]["ownerReferences"],
            wanted["metadata"]["labels"],
        ):
            meta = {**api.meta(existing), **wanted["metadata"]}
            self.configs.record(client.update({**existing, "metadata": meta, "spec": wanted["spec"]}))
        else:
            return
        log.info("kubelet_managed_config_written", pool=api.name_of(pool), config=name)
        self.recorder.eventf(
            trigger,
            EVENT_TYPE_NORMAL,
            api.Reason.KUBELET_CONFIG_APPLIED,
            "Wrote %s for pool %s",
            name,
            api.name_of(pool),
        )

    def _delete_managed(self, name: str, trigger: Object) -> None:
        if self.configs.get(name) is None:
            return
        try:
            self.ctx.client.resource(api.MACHINE_CONFIGS).delete(name)
        except NotFound:
            return
        log.info("kubelet_managed_config_deleted", config=name)
        self.recorder.eventf(
            trigger, EVENT_TYPE_NORMAL, api.Reason.KUBELET_CONFIG_REMOVED, "Deleted %s", name
        )

    # -- finalizer and status --------------------------------------------------------------------
    def _ensure_finalizer(self, kubelet_config: Object) -> Object:
        finalizers = list(api.meta(kubelet_config).get("finalizers") or [])
        if api.KUBELET_CONFIG_FINALIZER in finalizers:
            return kubelet_config
        return self._patch_finalizers(kubelet_config, [*finalizers, api.KUBELET_CONFIG_FINALIZER])

    def _finalize(self, kubelet_config: Object) -> None:
        """Rewrite the pools' managed configs without this KubeletConfig, then let it go."""
        finalizers = list(api.meta(kubelet_config).get("finalizers") or [])
        if api.KUBELET_CONFIG_FINALIZER not in finalizers:
            return
        for pool in self.pools.list():
            if self._owns(kubelet_config, api.name_of(pool)):
                try:
                    self._sync_pool(pool, kubelet_config)
                except KubeletConfigError as err:
                    # Without a renderable base the pool's managed config cannot be rewritten;
                    # dropping it is the only way to stop applying the deleted settings.
                    log.warning("kubelet_managed_config_dropped", pool=api.name_of(pool), error=str(err))
                    self._delete_managed(api.kubelet_managed_name(api.name_of(pool)), kubelet_config)
        self._patch_finalizers(kubelet_config, [f for f in finalizers if f != api.KUBELET_CONFIG_FINALIZER])

    def _patch_finalizers(self, kubelet_config: Object, finalizers: list[str]) -> Object:
        patch = {
            "metadata": {
                "resourceVersion": api.meta(kubelet_config).get("resourceVersion"),
                "finalizers": finalizers,
            }
        }
        updated = self.ctx.client.resource(api.KUBELET_CONFIGS).patch(api.name_of(kubelet_config), patch)
        return self.kubelet_configs.record(updated)

    def _set_status(self, kubelet_config: Object, reason: str, message: str) -> None:
        old = api.status_of(kubelet_config)
        failed, clock = bool(reason), self.ctx.clock
        conditions = set_condition(
            old.get("conditions"),
            api.KUBELET_SUCCESS,
            status=not failed,
            reason=reason,
            message=message if failed else "Success",
            clock=clock,
        )
        conditions = set_condition(
            conditions,
            api.KUBELET_FAILURE,
            status=failed,
            reason=reason,
            message=f"Error: {message}" if failed else "",
            clock=clock,
        )
        status = {
            **old,
            "observedGeneration": api.meta(kubelet_config).get("generation") or 0,
            "conditions": conditions,
        }
        if status == old:
            return
        written = self.ctx.client.resource(api.KUBELET_CONFIGS).update_status(
            {**kubelet_config, "status": status}
        )
        self.kubelet_configs.record(written)
        if failed:
            log.warning("kubelet_config_failed", kubelet_config=api.name_of(kubelet_config), error=message)
            self.recorder.event(written, EVENT_TYPE_WARNING, reason, message)

"""TemplateController: the MachineConfigs of each role, from templates shipped in the
package and the variables of ControllerConfig ``machine-config-controller``.

``templates/<role>/<name>.yaml`` yields MachineConfig ``<name>`` (``00-worker``,
``01-worker-kubelet``, …) labelled ``machineconfiguration.openshift.io/role: <role>`` and
controlled by the ControllerConfig (ownerReference). Template strings use Go template fields,
``{{.ClusterDNSIP}}``, filled from the ControllerConfig's spec (:data:`VARIABLES`); a file's
``text`` becomes Ignition ``contents.source`` (a ``data:`` URL).

Guarantees (queue ``machineconfigcontroller-templatecontroller``, keyed by ControllerConfig):

- The generated MachineConfigs always equal templates + variables: a user's edit of one, or its
  deletion, is overwritten (a Warning Event ``OverwroteUserChange`` names it); owned
  MachineConfigs no template yields any more are deleted.
- A variable that is missing or not a single safe line (a newline would inject YAML into
  ``kubelet.conf``) writes nothing, sets ``TemplateControllerFailing`` with the reason and emits
  a Warning Event; the previous MachineConfigs stay.
- Only the ControllerConfig named ``machine-config-controller`` is used; another one gets a
  ``TemplateControllerFailing`` condition saying it is ignored.

Status conditions are OpenShift's ControllerConfig conditions (``TemplateControllerRunning``,
``…Completed``, ``…Failing``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import structlog
import yaml

from mcm.machineconfig import api
from mcm.machineconfig.base import SubController
from mcm.machineconfig.conditions import set_condition
from mcm.machineconfig.context import Context, object_of
from mcm.machineconfig.ignition import data_url
from mcm.runtime.cache import ResourceEventHandlerFuncs
from mcm.runtime.client import Object
from mcm.runtime.client.errors import AlreadyExists, NotFound
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING
from mcm.runtime.worker import Result

__all__ = ["VARIABLES", "TemplateController", "TemplateError", "generate", "load_templates", "variables"]

log = structlog.get_logger(__name__)

_FIELD = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_WORD = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*$")
_IMAGE = re.compile(r"^\S+$")


class TemplateError(ValueError):
    """The templates cannot be rendered with this ControllerConfig."""


def _ip(value: str) -> str:
    ipaddress.ip_address(value)
    return value


def _base64(value: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except binascii.Error as err:
        raise ValueError(f"not base64: {err}") from None
    return value


def _matching(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):  # not match: "$" also matches before a final newline
            raise ValueError(f"not {what}")
        return value

    return check


VARIABLES: dict[str, tuple[str, str | None, Callable[[str], str]]] = {
    "ClusterDNSIP": ("clusterDNSIP", None, _ip),
    "ClusterDomain": ("clusterDomain", "cluster.local", _matching(_DNS_NAME, "a DNS name")),
    "Platform": ("platform", "none", _matching(_WORD, "a single word")),
    "RootCAData": ("rootCAData", None, _base64),
    "OSImageURL": ("osImageURL", None, _matching(_IMAGE, "an image reference without spaces")),
}
"""Template field → (ControllerConfig ``spec`` key, default or ``None`` if required, check)."""


def variables(controller_config: Object) -> dict[str, str]:
    """The template fields from the ControllerConfig's spec; :class:`TemplateError` listing every
    missing or invalid one."""
    spec = api.spec_of(controller_config)
    values: dict[str, str] = {}
    problems: list[str] = []
    for field, (key, default, check) in VARIABLES.items():
        raw = spec.get(key, default)
        if raw is None or raw == "":
            problems.append(f"spec.{key} is required")
            continue
        if not isinstance(raw, str):
            problems.append(f"spec.{key} must be a string")
            continue
        try:
            values[field] = check(raw)
        except ValueError as err:
            problems.append(f"spec.{key} {raw[:60]!r}: {err}")
    if problems:
        raise TemplateError("; ".join(problems))
    return values


def load_templates() -> dict[str, dict[str, Any]]:
    """``{name: template}`` for every role, from the package's ``templates/`` directory."""
    root = resources.files("mcm.machineconfig").joinpath("templates")
    loaded: dict[str, dict[str, Any]] = {}
    for role in api.ROLES:
        for entry in sorted(root.joinpath(role).iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".yaml"):
                document = yaml.safe_load(entry.read_text(encoding="utf-8"))
                loaded[entry.name.removesuffix(".yaml")] = {"role": role, "spec": document["spec"]}
    return loaded


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):

        def field(match: re.Match[str]) -> str:
            if match.group(1) not in values:
                raise TemplateError(f"template field .{match.group(1)} is not defined")
            return values[match.group(1)]

        return _FIELD.sub(field, value)
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    return value


def _files_to_ignition(spec: dict[str, Any]) -> dict[str, Any]:
    for entry in ((spec.get("config") or {}).get("storage") or {}).get("files") or []:
        if "text" in entry:
            entry["contents"] = {"source": data_url(entry.pop("text"))}
    return spec


def generate(controller_config: Object, templates: dict[str, dict[str, Any]]) -> list[Object]:
    """The MachineConfigs the templates yield for this ControllerConfig."""
    base = variables(controller_config)
    configs = []
    for name, template in templates.items():
        values = {**base, "Role": template["role"]}
        spec = _files_to_ignition(_fill(copy.deepcopy(template["spec"]), values))
        configs.append(
            {
                "apiVersion": api.API_VERSION,
                "kind": api.MACHINE_CONFIGS.kind,
                "metadata": {
                    "name": name,
                    "labels": {api.ROLE_LABEL: template["role"]},
                    "annotations": {api.GENERATED_BY_ANNOTATION: api.CONTROLLER_VERSION},
                    "ownerReferences": [api.owner_reference(controller_config, api.CONTROLLER_CONFIGS.kind)],
                },
                "spec": spec,
            }
        )
    return configs


def _differs(existing: Object, wanted: Object) -> bool:
    wanted_meta = api.meta(wanted)
    return (
        existing.get("spec") != wanted.get("spec")
        or any(api.labels_of(existing).get(k) != v for k, v in wanted_meta["labels"].items())
        or any(api.annotations_of(existing).get(k) != v for k, v in wanted_meta["annotations"].items())
        or api.controller_ref(existing) != wanted_meta["ownerReferences"][0]
    )


def _merged(existing: Object, wanted: Object) -> Object:
    """``wanted`` written over ``existing``, keeping labels and annotations others added."""
    meta = copy.deepcopy(api.meta(existing))
    wanted_meta = api.meta(wanted)
    meta["labels"] = {**api.labels_of(existing), **wanted_meta["labels"]}
    meta["annotations"] = {**api.annotations_of(existing), **wanted_meta["annotations"]}
    meta["ownerReferences"] = wanted_meta["ownerReferences"]
    return {**existing, "metadata": meta, "spec": wanted["spec"]}


class TemplateController(SubController):
    """See the module docstring."""

    name = api.TEMPLATE_CONTROLLER

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.templates = load_templates()
        ctx.template_names = frozenset(self.templates)
        self.controller_configs = ctx.cached(api.CONTROLLER_CONFIGS)
        self.configs = ctx.cached(api.MACHINE_CONFIGS)
        self.synced = ctx.synced(api.CONTROLLER_CONFIGS, api.MACHINE_CONFIGS)
        ctx.informers.informer_for(api.CONTROLLER_CONFIGS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self._controller_config_event,
                on_update=lambda old, new: (
                    self._controller_config_event(new)
                    if api.meta(old).get("generation") != api.meta(new).get("generation")
                    else None
                ),
            )
        )
        ctx.informers.informer_for(api.MACHINE_CONFIGS).add_event_handler(
            ResourceEventHandlerFuncs(
                on_update=lambda old, new: self._config_event(new),
                on_delete=self._config_event,
            )
        )

    # -- handlers (enqueue only) -----------------------------------------------------------------
    def _controller_config_event(self, obj: Any) -> None:
        controller_config = object_of(obj)
        if controller_config is not None:
            self.enqueue(api.name_of(controller_config))

    def _config_event(self, obj: Any) -> None:
        """A generated MachineConfig changed or went away: its ControllerConfig rewrites it."""
        config = object_of(obj)
        if config is None:
            return
        ref = api.controller_ref(config)
        if ref is not None and ref.get("kind") == api.CONTROLLER_CONFIGS.kind:
            self.enqueue(str(ref.get("name") or ""))
        elif api.name_of(config) in self.templates:
            self.enqueue(api.CONTROLLER_CONFIG_NAME)

    # -- the pass --------------------------------------------------------------------------------
    def sync(self, key: str) -> Result | None:
        controller_config = self.controller_configs.get(key)
        if controller_config is None:
            return None
        if key != api.CONTROLLER_CONFIG_NAME:
            message = f"only the ControllerConfig named {api.CONTROLLER_CONFIG_NAME} is used"
            self._set_status(controller_config, api.Reason.IGNORED, message)
            return None
        try:
            wanted = generate(controller_config, self.templates)
        except TemplateError as err:
            self._set_status(controller_config, api.Reason.TEMPLATE_FAILED, str(err))
            return None
        for config in wanted:
            self._apply(controller_config, config)
        self._delete_stale(controller_config, {api.name_of(c) for c in wanted})
        self._set_status(controller_config, "", "")
        return None

    def _apply(self, controller_config: Object, wanted: Object) -> None:
        client = self.ctx.client.resource(api.MACHINE_CONFIGS)
        name = api.name_of(wanted)
        existing = self.configs.get(name)
        if existing is None:
            try:
                self.configs.record(client.create(wanted))
            except AlreadyExists:
                return  # the cache lags; the add event brings us back
            log.info("template_config_created", config=name)
            return
        if not _differs(existing, wanted):
            return
        self.configs.record(client.update(_merged(existing, wanted)))
        log.info("template_config_overwritten", config=name)
        self.recorder.eventf(
            controller_config,
            EVENT_TYPE_WARNING,
            api.Reason.OVERWROTE_USER_CHANGE,
            "MachineConfig %s differed from its template and was overwritten",
            name,
        )

    def _delete_stale(self, controller_config: Object, wanted: set[str]) -> None:
        for config in self.configs.list():
            if api.is_controlled_by(config, controller_config) and api.name_of(config) not in wanted:
                try:
                    self.ctx.client.resource(api.MACHINE_CONFIGS).delete(api.name_of(config))
                except NotFound:
                    continue
                log.info("template_config_deleted", config=api.name_of(config))

    def _set_status(self, controller_config: Object, reason: str, message: str) -> None:
        """Conditions: Completed (or Failing with ``reason``), never Running between passes."""
        old = api.status_of(controller_config)
        failing = bool(reason)
        conditions = old.get("conditions")
        clock = self.ctx.clock
        conditions = set_condition(conditions, api.TEMPLATE_RUNNING, status=False, clock=clock)
        conditions = set_condition(
            conditions,
            api.TEMPLATE_COMPLETED,
            status=not failing,
            reason=reason,
            message=message,
            clock=clock,
        )
        conditions = set_condition(
            conditions, api.TEMPLATE_FAILING, status=failing, reason=reason, message=message, clock=clock
        )
        status = {
            **old,
            "observedGeneration": api.meta(controller_config).get("generation") or 0,
            "conditions": conditions,
        }
        if status == old:
            return
        written = self.ctx.client.resource(api.CONTROLLER_CONFIGS).update_status(
            {**controller_config, "status": status}
        )
        self.controller_configs.record(written)
        if failing:
            log.warning("templates_failed", controller_config=api.name_of(controller_config), error=message)
            self.recorder.event(written, EVENT_TYPE_WARNING, reason, message)
        elif old.get("observedGeneration") != status["observedGeneration"]:
            self.recorder.event(
                written,
                EVENT_TYPE_NORMAL,
                api.Reason.TEMPLATES_RENDERED,
                f"{len(self.templates)} MachineConfigs rendered",
            )

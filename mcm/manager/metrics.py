"""The manager's Prometheus metrics: upstream v0.47.0's MachineSet and MachineDeployment gauges
(``pkg/metrics/metrics.go``, ``pkg/controller/metrics.go``), computed from the caches at each
scrape.

Names, labels and values are upstream's, with these differences (docs/manager.md):

- ``mcm_machine_set_status_replicas`` exports ``status.replicas`` (upstream exported
  ``readyReplicas`` under that name);
- series of deleted objects disappear at the next scrape (upstream kept them forever);
- the scrape-failure counter is HEAD's ``mcm_misc_scrape_failure_total{kind}``.

Kept as upstream has them: ``mcm_machine_set_info`` labels come from the legacy
``spec.machineClass``; the max-surge/max-unavailable gauges show the integer value of the
IntOrString (0 for a percentage). A failing scrape counts a failure and never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mcm.manager import constants as k
from mcm.manager.conditions import MD_CONDITIONS, MS_CONDITIONS, conditions_of
from mcm.runtime import objects as o

__all__ = ["CONDITION_VALUES", "ManagerMetrics"]

CONDITION_VALUES: Mapping[str, int] = {k.TRUE: 1, k.FALSE: 0, k.UNKNOWN: 2}

Lister = Callable[[], Sequence[Mapping[str, Any]]]

_NAME = ("name", "namespace")
_FAILED = (
    "name",
    "namespace",
    "failed_machine_name",
    "failed_machine_provider_id",
    "failed_machine_owner_ref",
    "failed_machine_last_operation_state",
    "failed_machine_last_operation_machine_operation_type",
)


def _gauge(name: str, documentation: str, labels: Sequence[str] = _NAME) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _int_value(value: object) -> float:
    """Go's ``IntOrString.IntValue()``: an integer, or a string that parses as one, else 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.lstrip("+-").isdigit():
        return float(int(value))
    return 0.0


def _created_at(obj: Mapping[str, Any]) -> str:
    created = o.parse_time(o.meta(obj).get("creationTimestamp"))
    return str(int(created.timestamp())) if created else "0"


def _failed_rows(obj: Mapping[str, Any]) -> Iterator[list[str]]:
    for summary in o.sub(obj, "status").get("failedMachines") or []:
        if isinstance(summary, Mapping):
            operation = o.sub(summary, "lastOperation")
            yield [
                o.name_of(obj),
                o.namespace_of(obj),
                str(summary.get("name", "")),
                str(summary.get("providerID", "")),
                str(summary.get("ownerRef", "")),
                str(operation.get("state", "")),
                str(operation.get("type", "")),
            ]


class _SetCollector(Collector):
    def __init__(self, list_sets: Lister, failures: Counter) -> None:
        self._list, self._failures = list_sets, failures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            sets = list(self._list())
        except Exception:
            self._failures.labels(kind="Machineset-count").inc()
            return
        count = _gauge(
            "mcm_machine_set_items_total", "Count of machinesets currently managed by the mcm.", ()
        )
        count.add_metric([], len(sets))
        yield count
        yield from _set_families(sets)


def _set_gauges() -> dict[str, GaugeMetricFamily]:
    text = "Information of the mcm managed Machinesets'"
    gauges = {
        "info": _gauge(
            "mcm_machine_set_info",
            "Information of the Machinesets currently managed by the mcm.",
            (
                *_NAME,
                "createdAt",
                "spec_machine_class_api_group",
                "spec_machine_class_kind",
                "spec_machine_class_name",
            ),
        ),
        "spec.replicas": _gauge(
            "mcm_machine_set_info_spec_replicas", "Count of the Machinesets Spec Replicas."
        ),
        "spec.minReadySeconds": _gauge(
            "mcm_machine_set_info_spec_min_ready_seconds",
            "Information of the Machinesets currently managed by the mcm.",
        ),
        "conditions": _gauge(
            "mcm_machine_set_status_condition", f"{text} status conditions.", (*_NAME, "condition")
        ),
        "failed": _gauge("mcm_machine_set_failed_machines", f"{text} failed machines.", _FAILED),
    }
    for field, metric, words in _MS_STATUS:
        gauges[f"status.{field}"] = _gauge(f"mcm_machine_set_status_{metric}", f"{text} status for {words}.")
    return gauges


_MS_STATUS = (
    ("availableReplicas", "available_replicas", "available replicas"),
    ("fullyLabeledReplicas", "fully_labelled_replicas", "fully labelled replicas"),
    ("readyReplicas", "ready_replicas", "ready replicas"),
    ("replicas", "replicas", "replicas"),
)


def _add_set(gauges: dict[str, GaugeMetricFamily], machine_set: Mapping[str, Any]) -> None:
    key = [o.name_of(machine_set), o.namespace_of(machine_set)]
    spec, status = o.sub(machine_set, "spec"), o.sub(machine_set, "status")
    machine_class = o.sub(spec, "machineClass")
    gauges["info"].add_metric(
        [
            *key,
            _created_at(machine_set),
            o.text(machine_class, "apiGroup"),
            o.text(machine_class, "kind"),
            o.text(machine_class, "name"),
        ],
        1,
    )
    gauges["spec.replicas"].add_metric(key, _number(spec.get("replicas")))
    gauges["spec.minReadySeconds"].add_metric(key, _number(spec.get("minReadySeconds")))
    for field, _, _ in _MS_STATUS:
        gauges[f"status.{field}"].add_metric(key, _number(status.get(field)))
    for condition in conditions_of(status, MS_CONDITIONS):
        gauges["conditions"].add_metric(
            [*key, str(condition.get("type", ""))], CONDITION_VALUES.get(str(condition.get("status")), 0)
        )
    for row in _failed_rows(machine_set):
        gauges["failed"].add_metric(row, 1)


def _set_families(sets: Sequence[Mapping[str, Any]]) -> Iterator[GaugeMetricFamily]:
    gauges = _set_gauges()
    for machine_set in sets:
        _add_set(gauges, machine_set)
    yield from gauges.values()


class _DeploymentCollector(Collector):
    def __init__(self, list_deployments: Lister, failures: Counter) -> None:
        self._list, self._failures = list_deployments, failures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            deployments = list(self._list())
        except Exception:
            self._failures.labels(kind="Machinedeployment-count").inc()
            return
        count = _gauge(
            "mcm_machine_deployment_items_total",
            "Count of machinedeployments currently managed by the mcm.",
            (),
        )
        count.add_metric([], len(deployments))
        yield count
        yield from _deployment_families(deployments)


_MD_SPEC_OPTIONAL = (
    ("revisionHistoryLimit", "revision_history_limit", "revision history limit"),
    ("progressDeadlineSeconds", "progress_deadline_seconds", "progress deadline seconds"),
)
_MD_STATUS = (
    ("availableReplicas", "available_replicas"),
    ("unavailableReplicas", "unavailable_replicas"),
    ("readyReplicas", "ready_replicas"),
    ("updatedReplicas", "updated_replicas"),
    ("replicas", "replicas"),
)


def _md_gauges() -> dict[str, GaugeMetricFamily]:
    prefix = "mcm_machine_deployment"
    text = "Information of the Machinedeployments"
    gauges = {
        "info": _gauge(
            f"{prefix}_info",
            "Information of the Machinedeployments currently managed by the mcm.",
            (*_NAME, "createdAt", "spec_strategy_type"),
        ),
        "paused": _gauge(f"{prefix}_info_spec_paused", f"{text} paused status."),
        "replicas": _gauge(f"{prefix}_info_spec_replicas", f"{text} spec replicas."),
        "minReadySeconds": _gauge(f"{prefix}_info_spec_min_ready_seconds", f"{text} spec min ready seconds."),
        "maxSurge": _gauge(
            f"{prefix}_info_spec_rolling_update_max_surge", f"{text} spec rolling update max surge."
        ),
        "maxUnavailable": _gauge(
            f"{prefix}_info_spec_rolling_update_max_unavailable",
            f"{text} spec rolling update max unavailable.",
        ),
        "rollbackTo": _gauge(
            f"{prefix}_info_spec_rollback_to_revision", f"{text} spec rollback to revision."
        ),
        "conditions": _gauge(
            f"{prefix}_status_condition",
            "Information of the mcm managed Machinedeployments' status conditions.",
            (*_NAME, "condition"),
        ),
        "collisionCount": _gauge(
            f"{prefix}_status_collision_count",
            "Information of the mcm managed Machinedeployments' status for collision count.",
        ),
        "failed": _gauge(
            f"{prefix}_failed_machines",
            "Information of the mcm managed Machinedeployments' failed machines.",
            _FAILED,
        ),
    }
    for field, metric, words in _MD_SPEC_OPTIONAL:
        gauges[field] = _gauge(f"{prefix}_info_spec_{metric}", f"{text} spec {words}.")
    for field, metric in _MD_STATUS:
        gauges[f"status.{field}"] = _gauge(
            f"{prefix}_status_{metric}",
            f"Information of the mcm managed Machinedeployments' status for {metric}.",
        )
    return gauges


def _add_deployment(gauges: dict[str, GaugeMetricFamily], deployment: Mapping[str, Any]) -> None:
    key = [o.name_of(deployment), o.namespace_of(deployment)]
    spec, status = o.sub(deployment, "spec"), o.sub(deployment, "status")
    strategy = o.text(deployment, "spec", "strategy", "type")
    gauges["info"].add_metric([*key, _created_at(deployment), strategy], 1)
    gauges["paused"].add_metric(key, 1 if spec.get("paused") is True else 0)
    gauges["replicas"].add_metric(key, _number(spec.get("replicas")))
    gauges["minReadySeconds"].add_metric(key, _number(spec.get("minReadySeconds")))
    if strategy == k.STRATEGY_ROLLING_UPDATE:
        rolling = o.sub(deployment, "spec", "strategy", "rollingUpdate")
        gauges["maxSurge"].add_metric(key, _int_value(rolling.get("maxSurge")))
        gauges["maxUnavailable"].add_metric(key, _int_value(rolling.get("maxUnavailable")))
    for field, _, _ in _MD_SPEC_OPTIONAL:
        if spec.get(field) is not None:
            gauges[field].add_metric(key, _number(spec.get(field)))
    if isinstance(spec.get("rollbackTo"), Mapping):
        gauges["rollbackTo"].add_metric(key, _number(spec["rollbackTo"].get("revision")))
    for condition in conditions_of(status, MD_CONDITIONS):
        gauges["conditions"].add_metric(
            [*key, str(condition.get("type", ""))], CONDITION_VALUES.get(str(condition.get("status")), 0)
        )
    for field, _ in _MD_STATUS:
        gauges[f"status.{field}"].add_metric(key, _number(status.get(field)))
    if status.get("collisionCount") is not None:
        gauges["collisionCount"].add_metric(key, _number(status.get("collisionCount")))
    for row in _failed_rows(deployment):
        gauges["failed"].add_metric(row, 1)


def _deployment_families(deployments: Sequence[Mapping[str, Any]]) -> Iterator[GaugeMetricFamily]:
    gauges = _md_gauges()
    for deployment in deployments:
        _add_deployment(gauges, deployment)
    yield from gauges.values()


class ManagerMetrics:
    """The manager's metrics on ``registry``; collectors are added by :meth:`register_collectors`
    once the caches have synced (as upstream's ``Run`` does)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.scrape_failures = Counter(
            "mcm_misc_scrape_failure_total",
            "Number of failed scrapes of the machine-controller-manager collectors.",
            ["kind"],
            registry=registry,
        )
        self._collectors: list[Collector] = []

    def register_collectors(self, list_sets: Lister, list_deployments: Lister) -> None:
        if self._collectors:
            return
        self._collectors = [
            _SetCollector(list_sets, self.scrape_failures),
            _DeploymentCollector(list_deployments, self.scrape_failures),
        ]
        for collector in self._collectors:
            self.registry.register(collector)

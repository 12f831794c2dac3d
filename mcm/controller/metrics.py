"""The controller's Prometheus metrics: every ``mcm_*`` metric of upstream's provider side.

All of them live on the registry the controller is given (upstream v0.47.0 hid most of them in
a private registry, so /metrics never showed them). Guarantees:

- :class:`ControllerMetrics` creates the counters, histograms and gauges at construction;
  :meth:`ControllerMetrics.register_collector` adds the scrape-time collector (machine count,
  frozen flag, per-machine info / condition / phase), which the controller does after its
  caches synced, as upstream's ``Run`` does.
- Machine phase values follow HEAD: Terminating -4, Failed -3, CrashLoopBackOff -2,
  Unknown -1, Pending 0, Running 1, anything else 0.
- A failing scrape increments ``mcm_misc_scrape_failure_total`` and never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mcm.apis.machine import constants as c
from mcm.driver import CloudApiMetrics
from mcm.runtime import objects as o

__all__ = ["PHASE_VALUES", "ControllerMetrics"]

PHASE_VALUES: Mapping[str, int] = {
    c.PHASE_TERMINATING: -4,
    c.PHASE_FAILED: -3,
    c.PHASE_CRASH_LOOP_BACK_OFF: -2,
    c.PHASE_UNKNOWN: -1,
    c.PHASE_PENDING: 0,
    c.PHASE_RUNNING: 1,
}
"""``mcm_machine_current_status_phase`` values (HEAD mapping); other phases are 0."""

CONDITION_VALUES: Mapping[str, int] = {c.CONDITION_TRUE: 1, c.CONDITION_FALSE: 0, c.CONDITION_UNKNOWN: 2}

_MACHINE_LABELS = ("namespace", "machine_deployment", "instance_type", "zone")


class ControllerMetrics:
    """Metrics of one controller on ``registry``; ``provider`` (``--cloud-provider``) labels the
    cloud-API and driver metrics of MachineClasses without a ``provider``."""

    def __init__(self, registry: CollectorRegistry, provider: str = "") -> None:
        self.registry = registry
        self.provider = provider
        self._add_cloud_api_metrics()
        self._add_driver_metrics()
        self._add_scrape_metrics()
        self._add_machine_lifecycle_metrics()
        self._add_safety_metrics()

    def _add_cloud_api_metrics(self) -> None:
        """Requests the provider makes to its cloud API, by service."""
        self.cloud_api_requests = Counter(
            "mcm_cloud_api_requests_total",
            "Number of cloud API requests made by the provider.",
            ["provider", "service"],
            registry=self.registry,
        )
        self.cloud_api_requests_failed = Counter(
            "mcm_cloud_api_requests_failed_total",
            "Number of failed cloud API requests made by the provider.",
            ["provider", "service"],
            registry=self.registry,
        )
        self.cloud_api_request_duration = Histogram(
            "mcm_cloud_api_api_request_duration_seconds",
            "Time taken by cloud API requests.",
            ["provider", "service"],
            registry=self.registry,
        )

    def _add_driver_metrics(self) -> None:
        """Calls the controller makes to the driver, by operation."""
        self.driver_request_duration = Histogram(
            "mcm_cloud_api_driver_request_duration_seconds",
            "Time taken by driver calls.",
            ["provider", "operation"],
            registry=self.registry,
        )
        self.driver_requests_failed = Counter(
            "mcm_cloud_api_driver_requests_failed_total",
            "Number of failed driver calls.",
            ["provider", "operation", "error_code"],
            registry=self.registry,
        )

    def _add_scrape_metrics(self) -> None:
        """Failures of the scrape-time machine collector."""
        self.scrape_failures = Counter(
            "mcm_misc_scrape_failure_total",
            "Number of failed scrapes of the controller collector.",
            ["kind"],
            registry=self.registry,
        )

    def _add_machine_lifecycle_metrics(self) -> None:
        """How long machines take to be created, initialized, joined, drained and deleted."""
        self.create_duration = self._gauge("mcm_machine_create_duration_seconds", "VM creation time.")
        self.initialize_duration = self._gauge(
            "mcm_machine_initialize_duration_seconds", "VM initialization time."
        )
        self.join_duration = self._gauge("mcm_machine_join_duration_seconds", "Time for the node to join.")
        self.delete_duration = self._gauge("mcm_machine_delete_duration_seconds", "Machine deletion time.")
        self.drain_duration = Gauge(
            "mcm_machine_drain_duration_seconds",
            "Node drain time.",
            ["namespace", "machine_deployment"],
            registry=self.registry,
        )
        self.failed_joins = Counter(
            "mcm_machine_num_failed_join",
            "Machines that failed to join the cluster in their creation timeout.",
            list(_MACHINE_LABELS),
            registry=self.registry,
        )

    def _add_safety_metrics(self) -> None:
        """What the safety loops did."""
        self.orphan_vms_deleted = Counter(
            "mcm_machine_orphan_vms_deleted_total",
            "VMs deleted by the orphan-VM safety loop.",
            ["machine_class", "reason"],
            registry=self.registry,
        )

    def _gauge(self, name: str, documentation: str) -> Gauge:
        return Gauge(name, documentation, list(_MACHINE_LABELS), registry=self.registry)

    def observe_driver_call(
        self, operation: str, seconds: float, error_code: str | None, provider: str = ""
    ) -> None:
        """Record one driver call (``error_code`` ``None`` on success) for the MachineClass's
        ``provider`` (empty: ``--cloud-provider``)."""
        label = provider or self.provider
        self.driver_request_duration.labels(label, operation).observe(seconds)
        if error_code is not None:
            self.driver_requests_failed.labels(label, operation, error_code).inc()

    def cloud_api(self, provider: str = "") -> CloudApiMetrics:
        """What a driver call's context counts cloud API requests in, labelled ``provider``
        (the MachineClass's; empty: ``--cloud-provider``)."""
        return _CloudApi(self, provider or self.provider)

    def register_collector(self, machines: Callable[[], list[Any]], frozen: Callable[[], bool]) -> None:
        """Add the scrape-time collector (idempotent per metrics object)."""
        if getattr(self, "_collector", None) is not None:
            return
        self._collector = _MachineCollector(machines, frozen, self.scrape_failures)
        self.registry.register(self._collector)


class _CloudApi:
    """Counts one provider's cloud API requests as upstream's providers do: a successful request
    in ``mcm_cloud_api_requests_total`` and ``…_api_request_duration_seconds``, a failed one in
    ``mcm_cloud_api_requests_failed_total``."""

    def __init__(self, metrics: ControllerMetrics, provider: str) -> None:
        self._metrics = metrics
        self._provider = provider

    def observe(self, service: str, seconds: float, failed: bool) -> None:
        labels = (self._provider, service)
        if failed:
            self._metrics.cloud_api_requests_failed.labels(*labels).inc()
            return
        self._metrics.cloud_api_requests.labels(*labels).inc()
        self._metrics.cloud_api_request_duration.labels(*labels).observe(seconds)


def machine_metric_labels(
    machine: Mapping[str, Any], machine_class: Mapping[str, Any] | None
) -> dict[str, str]:
    """The (namespace, machine_deployment, instance_type, zone) labels of the duration gauges."""
    zone = o.text(machine, "spec", "nodeTemplate", "metadata", "labels", c.LABEL_TOPOLOGY_ZONE)
    return {
        "namespace": o.namespace_of(machine),
        "machine_deployment": o.label(machine, c.LABEL_DEPLOYMENT_NAME) or "",
        "instance_type": o.text(machine_class, "nodeTemplate", "instanceType"),
        "zone": zone or o.text(machine_class, "nodeTemplate", "zone"),
    }


class _MachineCollector(Collector):
    def __init__(
        self, machines: Callable[[], list[Any]], frozen: Callable[[], bool], failures: Counter
    ) -> None:
        self._machines = machines
        self._frozen = frozen
        self._failures = failures

    def describe(self) -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily("mcm_machine_items_total", "Count of machines currently managed by the mcm."),
            GaugeMetricFamily("mcm_machine_controller_frozen", "Frozen status of the machine controller."),
        ]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            machines = [m for m in self._machines() if isinstance(m, Mapping)]
        except Exception:
            self._failures.labels("Machine-count").inc()
            machines = []
        yield GaugeMetricFamily(
            "mcm_machine_items_total", "Count of machines currently managed by the mcm.", value=len(machines)
        )
        yield GaugeMetricFamily(
            "mcm_machine_controller_frozen",
            "Frozen status of the machine controller.",
            value=1 if self._frozen() else 0,
        )
        yield from _per_machine(machines)


def _per_machine(machines: list[Mapping[str, Any]]) -> Iterator[GaugeMetricFamily]:
    info = GaugeMetricFamily(
        "mcm_machine_info",
        "Information of the Machines currently managed by the mcm.",
        labels=[
            "name",
            "namespace",
            "createdAt",
            "spec_provider_id",
            "spec_class_api_group",
            "spec_class_kind",
            "spec_class_name",
            "node_name",
        ],
    )
    condition = GaugeMetricFamily(
        "mcm_machine_status_condition",
        "Information of the mcm managed Machines' status conditions.",
        labels=["name", "namespace", "condition"],
    )
    phase = GaugeMetricFamily(
        "mcm_machine_current_status_phase",
        "Current status phase of the Machines currently managed by the mcm.",
        labels=["name", "namespace"],
    )
    for machine in machines:
        name, namespace = o.name_of(machine), o.namespace_of(machine)
        klass = o.sub(machine, "spec", "class")
        created = o.parse_time(o.meta(machine).get("creationTimestamp"))
        info.add_metric(
            [
                name,
                namespace,
                str(int(created.timestamp())) if created else "",
                o.text(machine, "spec", "providerID"),
                str(klass.get("apiGroup") or ""),
                str(klass.get("kind") or ""),
                str(klass.get("name") or ""),
                o.label(machine, c.LABEL_NODE) or "",
            ],
            1,
        )
        for cond in o.conditions(machine):
            value = CONDITION_VALUES.get(str(cond.get("status")))
            if value is not None:
                condition.add_metric([name, namespace, str(cond.get("type"))], value)
        current = o.text(machine, "status", "currentStatus", "phase")
        phase.add_metric([name, namespace], PHASE_VALUES.get(current, 0))
    yield from (info, condition, phase)
